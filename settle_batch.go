package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"math/big"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/merchant"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
	"agentpay/ent/settlementbatch"
	"agentpay/internal/vault"
)

// Settlement batches: the payout step of settlement. The rules are the
// note at the top of settle_payments.go.

// SettlementKey names whose payments a batch covers: one merchant, one
// paid chain, one mode.
type SettlementKey struct {
	MerchantID uuid.UUID
	Livemode   bool
	Chain      string
}

// SettleBatch advances the settlement of one merchant, chain and mode as
// far as it can: pays its open batch, or forms one when one is due and
// pays it. Done when no batch is left open; Waiting says what an open one,
// or the next one, waits for.
func (s *Service) SettleBatch(ctx context.Context, key SettlementKey) (SettleResult, error) {
	return s.settleBatchWith(ctx, key, s.cfg.Settlement)
}

func (s *Service) settleBatchWith(ctx context.Context, key SettlementKey, opts SettlementOptions) (SettleResult, error) {
	opts = opts.withDefaults()
	m, err := s.cfg.DB.Ent.Merchant.Get(ctx, key.MerchantID)
	if ent.IsNotFound(err) {
		return SettleResult{}, fmt.Errorf("%w: merchant %s", ErrNotFound, key.MerchantID)
	}
	if err != nil {
		return SettleResult{}, err
	}
	for attempt := 0; ; attempt++ {
		b, err := s.openBatch(ctx, key)
		if err != nil {
			return SettleResult{}, err
		}
		if b == nil {
			var waiting string
			b, waiting, err = s.formBatch(ctx, opts, m, key)
			if errors.Is(err, errBatchRaced) && attempt == 0 {
				continue // another run formed one, or took a payment: look again
			}
			if err != nil || b == nil || b.Status == settlementbatch.StatusCompleted {
				return SettleResult{Done: err == nil, Waiting: waiting}, err
			}
		}
		br := &batchRun{s: s, opts: opts, b: b, m: m}
		waiting, err := br.pay(ctx)
		if errors.Is(err, errBatchClosed) {
			return SettleResult{Done: true}, nil
		}
		if err != nil || waiting != "" {
			note := waiting
			if err != nil {
				note = err.Error()
			}
			if note = truncateUTF8(note, 500); note != br.b.Error {
				_ = br.save(context.WithoutCancel(ctx), func(u *ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne {
					return u.SetError(note)
				})
			}
			return SettleResult{Waiting: waiting}, err
		}
		return SettleResult{Done: true}, nil
	}
}

// openBatch is the key's batch not completed yet, nil if none.
func (s *Service) openBatch(ctx context.Context, key SettlementKey) (*ent.SettlementBatch, error) {
	b, err := s.cfg.DB.Ent.SettlementBatch.Query().
		Where(batchOf(key), settlementbatch.StatusIn(settlementbatch.StatusPending, settlementbatch.StatusSubmitted)).
		Order(ent.Asc(settlementbatch.FieldSeq)).
		First(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	return b, err
}

// lockSettlementKey serialises, per merchant, chain and mode, what uses
// the merchant's unsettled money: a refund (which reserves some of it
// after a payout, or lowers a pending payment's net before one) and the
// forming of a batch (which pays it out and nets the reservations), so two
// of them never use the same money. A transaction advisory lock on
// PostgreSQL, taken before anything it guards is read (a statement after
// it sees what the previous holder committed); SQLite's single writer
// serialises them already.
func (s *Service) lockSettlementKey(ctx context.Context, sqlTx *sql.Tx, key SettlementKey) error {
	if !s.cfg.DB.IsPostgres() {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte("agentpay settlement "))
	h.Write(key.MerchantID[:])
	h.Write([]byte(key.Chain))
	if key.Livemode {
		h.Write([]byte{1})
	}
	if _, err := sqlTx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		return fmt.Errorf("locking the settlement of %s: %w", key.Chain, err)
	}
	return nil
}

// errBatchRaced: a payment or refund the batch was formed with changed (or
// another run formed the batch) before it committed; nothing was written.
var errBatchRaced = errors.New("settlement batch: raced with another change")

// formBatch forms the key's next batch if one is due: nil and what it
// waits for if not. A batch with nothing to pay (net zero: refunds, or a
// deficit carried in) is completed at once.
func (s *Service) formBatch(ctx context.Context, opts SettlementOptions, m *ent.Merchant, key SettlementKey) (*ent.SettlementBatch, string, error) {
	ledger, err := s.ledger(sessionModeOf(key.Livemode), chains.Name(key.Chain))
	if err != nil {
		return nil, "", fmt.Errorf("settlement batch: %w", err)
	}
	decimals := ledger.Decimals()
	minimumUSD := decimal.Max(opts.BatchMinimum, decimal.Zero)
	minimum, err := ToBaseUnits("settlement minimum", minimumUSD, decimals)
	if err != nil {
		return nil, "", err
	}
	var (
		formed  *ent.SettlementBatch
		waiting string
	)
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		formed, waiting = nil, ""
		// Under the lock refunds take: a reservation is either netted here
		// or made after this batch, against the payments it leaves.
		if err := s.lockSettlementKey(ctx, sqlTx, key); err != nil {
			return err
		}
		counted, err := tx.Payment.Query().
			Where(paymentsOf(key), countedToSettle()).
			Order(ent.Asc(payment.FieldSweptAt), ent.Asc(payment.FieldID)).
			Limit(MaxPaymentsPerBatch).
			All(ctx)
		if err != nil {
			return fmt.Errorf("settlement batch: listing payments: %w", err)
		}
		var held []*ent.Payment
		if m.SettleHeldPayments && len(counted) < MaxPaymentsPerBatch {
			if held, err = tx.Payment.Query().
				Where(paymentsOf(key), heldToSettle()).
				Order(ent.Asc(payment.FieldSweptAt), ent.Asc(payment.FieldID)).
				Limit(MaxPaymentsPerBatch - len(counted)).
				All(ctx); err != nil {
				return fmt.Errorf("settlement batch: listing held payments: %w", err)
			}
		}
		if len(counted)+len(held) == 0 {
			return nil // refunds to net wait for payments to net them off
		}
		// Every reservation is netted by the batch that pays the payments it
		// was taken from (checkout_refunds.go caps them at MaxPaymentsPerBatch). One
		// whose refund is still in flight waits for it: netted, a refund
		// that then failed would have cost the merchant what it never got.
		refunds, err := tx.Refund.Query().
			Where(reservedRefunds(key)).
			Order(ent.Asc(refund.FieldCreatedAt), ent.Asc(refund.FieldID)).
			Limit(MaxPaymentsPerBatch).
			All(ctx)
		if err != nil {
			return fmt.Errorf("settlement batch: listing refunds: %w", err)
		}
		for _, r := range refunds {
			if r.Status != refund.StatusCompleted {
				waiting = fmt.Sprintf("next settlement batch: waits for refund %s (%s), made after a payout, to complete", r.ExternalID, r.Status)
				return nil
			}
		}
		prev, err := tx.SettlementBatch.Query().Where(batchOf(key)).Order(ent.Desc(settlementbatch.FieldSeq)).First(ctx)
		if err != nil && !ent.IsNotFound(err) {
			return err
		}

		var gross, fee, nets, refunded, carriedIn int64
		var oldest time.Time
		for _, p := range counted {
			if p.SettlementFee == nil || p.SettlementNet == nil {
				return fmt.Errorf("settlement batch: payment %s has no fee or net", p.ExternalID)
			}
			gross += p.AmountToken - p.RefundedToken
			fee += *p.SettlementFee
			nets += *p.SettlementNet
			if oldest.IsZero() || p.SweptAt.Before(oldest) {
				oldest = *p.SweptAt
			}
		}
		for _, p := range held {
			left := p.AmountToken - p.RefundedToken
			f := TransferFee(left)
			gross += left
			fee += f
			nets += left - f
			if oldest.IsZero() || p.SweptAt.Before(oldest) {
				oldest = *p.SweptAt
			}
		}
		for _, r := range refunds {
			refunded += r.ReservedToken
		}
		seq := 1
		if prev != nil {
			carriedIn, seq = prev.CarriedOut, prev.Seq+1
		}
		total := nets - refunded - carriedIn
		now := s.now().UTC().Truncate(time.Microsecond) // as PostgreSQL keeps it
		dueAt := oldest.Add(max(opts.BatchInterval, 0))
		if (!minimum.IsInt64() || total < minimum.Int64()) && now.Before(dueAt) {
			waiting = fmt.Sprintf("next settlement batch: net %s below the minimum %s until %s",
				FromBaseUnits(big.NewInt(total), decimals), minimumUSD, dueAt.Format(time.RFC3339))
			return nil
		}
		net, carriedOut := total, int64(0)
		if total < 0 {
			net, carriedOut = 0, -total
		}
		create := tx.SettlementBatch.Create().
			SetCreatedAt(now).
			SetUpdatedAt(now).
			SetExternalID(vault.SettlementID.New()).
			SetMerchantID(key.MerchantID).
			SetLivemode(key.Livemode).
			SetChain(key.Chain).
			SetSeq(seq).
			SetGross(gross).
			SetFee(fee).
			SetRefundsNetted(refunded).
			SetCarriedIn(carriedIn).
			SetCarriedOut(carriedOut).
			SetNet(net).
			SetSettlementType(string(m.SettlementType))
		status := payment.SettlementStatusSubmitted
		if net == 0 {
			create.SetStatus(settlementbatch.StatusCompleted).SetCompletedAt(now)
			status = payment.SettlementStatusCompleted
		}
		b, err := create.Save(ctx)
		if ent.IsConstraintError(err) {
			return errBatchRaced
		}
		if err != nil {
			return fmt.Errorf("settlement batch: recording: %w", err)
		}
		// Claimed as read: a refund or another batch that changed a payment
		// since makes the update miss, and the whole batch is formed again.
		claim := func(p *ent.Payment, u *ent.PaymentUpdate) error {
			u.Where(payment.ID(p.ID), payment.RefundedToken(p.RefundedToken), payment.SettlementBatchIDIsNil()).
				SetSettlementBatchID(b.ID).
				SetSettlementStatus(status).
				SetUpdatedAt(now)
			if net == 0 {
				u.SetSettledAt(now).SetSettlementError("")
			}
			n, err := u.Save(ctx)
			if err != nil {
				return fmt.Errorf("settlement batch: claiming payment %s: %w", p.ExternalID, err)
			}
			if n == 0 {
				return errBatchRaced
			}
			return nil
		}
		for _, p := range counted {
			if err := claim(p, tx.Payment.Update().Where(payment.SettlementStatusEQ(payment.SettlementStatusPending))); err != nil {
				return err
			}
		}
		for _, p := range held {
			left := p.AmountToken - p.RefundedToken
			f := TransferFee(left)
			u := tx.Payment.Update().Where(payment.SettlementStatusIsNil()).SetSettlementFee(f).SetSettlementNet(left - f)
			if err := claim(p, u); err != nil {
				return err
			}
		}
		for _, r := range refunds {
			n, err := tx.Refund.Update().
				Where(refund.ID(r.ID), refund.NettedBatchIDIsNil()).
				SetNettedBatchID(b.ID).
				Save(ctx)
			if err != nil {
				return fmt.Errorf("settlement batch: netting refund %s: %w", r.ExternalID, err)
			}
			if n == 0 {
				return errBatchRaced
			}
		}
		if net == 0 {
			if err := s.recordBatchEvent(ctx, tx, sqlTx, b); err != nil {
				return err
			}
		}
		formed = b
		return nil
	})
	if err != nil && ent.IsConstraintError(err) {
		err = errBatchRaced
	}
	if err != nil || formed == nil {
		return nil, waiting, err
	}
	// Read again outside the transaction, whose client is spent.
	formed, err = s.cfg.DB.Ent.SettlementBatch.Get(ctx, formed.ID)
	return formed, "", err
}

// completeBatch records the payout, its payments paid and
// settlement.completed, once.
func (s *Service) completeBatch(ctx context.Context, b *ent.SettlementBatch, out payoutOutcome) error {
	completed := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		completed = false
		now := s.now().UTC().Truncate(time.Microsecond)
		upd := tx.SettlementBatch.Update().
			Where(settlementbatch.ID(b.ID), settlementbatch.StatusIn(settlementbatch.StatusPending, settlementbatch.StatusSubmitted)).
			SetStatus(settlementbatch.StatusCompleted).
			SetReference(out.reference).
			SetError("").
			SetCompletedAt(now).
			SetUpdatedAt(now)
		if out.fxRate != "" {
			upd.SetFxRate(out.fxRate).SetFiatAmount(out.amount).SetFiatCurrency(out.currency)
		}
		n, err := upd.Save(ctx)
		if err != nil {
			return fmt.Errorf("completing settlement batch: %w", err)
		}
		if n == 0 {
			return nil // completed by another run
		}
		pu := tx.Payment.Update().
			Where(payment.SettlementBatchID(b.ID), payment.SettlementStatusEQ(payment.SettlementStatusSubmitted)).
			SetSettlementStatus(payment.SettlementStatusCompleted).
			SetSettlementReference(out.reference).
			SetSettlementError("").
			SetSettledAt(now)
		if out.txHash != "" {
			pu.SetSettlementTxHash(out.txHash).SetSettlementChain(out.chain).SetSettlementAddress(out.address)
		}
		if out.fxRate != "" {
			pu.SetSettlementFxRate(out.fxRate).SetSettlementFiatCurrency(out.currency)
		}
		if _, err := pu.Save(ctx); err != nil {
			return fmt.Errorf("completing settlement batch payments: %w", err)
		}
		b, err := tx.SettlementBatch.Get(ctx, b.ID)
		if err != nil {
			return err
		}
		completed = true
		return s.recordBatchEvent(ctx, tx, sqlTx, b)
	})
	if err != nil || !completed {
		return err
	}
	mode := sessionModeOf(b.Livemode)
	if l, err := s.ledger(mode, chains.Name(b.Chain)); err == nil {
		s.observer().Settled(string(mode), b.Chain, b.SettlementType, FromBaseUnits(big.NewInt(b.Net), l.Decimals()))
	}
	if out.txHash != "" {
		if l, err := s.ledger(mode, chains.Name(out.chain)); err == nil {
			s.observeGas(ctx, mode, l, out.txHash)
		}
	}
	return nil
}

// DueSettlements lists the settlement keys that have something to do: an
// open batch untouched for at least minAge, or payments swept and waiting
// for a batch (counted ones, and held ones of merchants settling them); at
// most limit, for settle_pending to enqueue settle_batch jobs (which form a
// batch only when one is due).
func (s *Service) DueSettlements(ctx context.Context, minAge time.Duration, limit int) ([]SettlementKey, error) {
	seen := map[SettlementKey]bool{}
	var keys []SettlementKey
	add := func(k SettlementKey) {
		if !seen[k] && len(keys) < limit {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	open, err := s.cfg.DB.Ent.SettlementBatch.Query().
		Where(
			settlementbatch.StatusIn(settlementbatch.StatusPending, settlementbatch.StatusSubmitted),
			settlementbatch.UpdatedAtLTE(s.now().UTC().Add(-minAge)),
		).
		Order(ent.Asc(settlementbatch.FieldUpdatedAt)).
		Limit(limit).
		All(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range open {
		add(SettlementKey{MerchantID: b.MerchantID, Livemode: b.Livemode, Chain: b.Chain})
	}
	waiting, err := s.cfg.DB.Ent.Payment.Query().
		Where(payment.Or(
			countedToSettle(),
			payment.And(heldToSettle(), payment.HasSessionWith(checkoutsession.HasMerchantWith(merchant.SettleHeldPayments(true)))),
		)).
		WithSession().
		Order(ent.Asc(payment.FieldSweptAt)).
		Limit(10 * limit).
		All(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range waiting {
		add(SettlementKey{MerchantID: p.Edges.Session.MerchantID, Livemode: p.Edges.Session.Livemode, Chain: p.Chain})
	}
	return keys, nil
}
