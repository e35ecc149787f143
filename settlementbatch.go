package agentpay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"math/big"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/merchant"
	"agentpay/ent/payment"
	"agentpay/ent/predicate"
	"agentpay/ent/refund"
	"agentpay/ent/settlementbatch"
	"agentpay/internal/vault"
	"agentpay/payout"
)

// Settlement batches: the payout step of settlement. The rules are the
// note at the top of settlement.go.

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

func batchOf(key SettlementKey) predicate.SettlementBatch {
	return settlementbatch.And(
		settlementbatch.MerchantID(key.MerchantID),
		settlementbatch.Livemode(key.Livemode),
		settlementbatch.Chain(key.Chain),
	)
}

// paymentsOf matches the payments of key's merchant, mode and chain.
func paymentsOf(key SettlementKey) predicate.Payment {
	return payment.And(
		payment.Chain(key.Chain),
		payment.HasSessionWith(checkoutsession.MerchantID(key.MerchantID), checkoutsession.Livemode(key.Livemode)),
	)
}

// heldToSettle matches held payments (swept, never counted) with something
// left after their refunds: what settle_held_payments pays out.
func heldToSettle() predicate.Payment {
	return payment.And(
		payment.StatusEQ(payment.StatusConfirmed),
		payment.SettlementStatusIsNil(),
		payment.SweptAtNotNil(),
		payment.Or(payment.Late(true), payment.HasSessionWith(checkoutsession.StatusIn(endedStatuses...))),
		func(sel *entsql.Selector) {
			sel.Where(entsql.ColumnsLT(sel.C(payment.FieldRefundedToken), sel.C(payment.FieldAmountToken)))
		},
	)
}

// countedToSettle matches counted payments swept and in no batch yet.
func countedToSettle() predicate.Payment {
	return payment.And(
		payment.SettlementStatusEQ(payment.SettlementStatusPending),
		payment.SettlementBatchIDIsNil(),
		payment.SweptAtNotNil(),
	)
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

// unsettledBalance is what a merchant holds with the service on one chain
// and mode and has not been paid yet, in base units.
type unsettledBalance struct {
	key SettlementKey
	// unsettled: the nets of its confirmed counted payments in no batch
	// yet (swept or not): what its next batches pay it.
	unsettled int64
	// reserved: what refunds after a payout took of it, not netted off a
	// batch yet (and not failed); refunds is how many they are.
	reserved int64
	refunds  int
	// carried: the deficit its last batch carried over (only refunds
	// advanced before reservations existed leave one).
	carried int64
}

// available is what a refund after a payout may still reserve.
func (u unsettledBalance) available() int64 { return u.unsettled - u.reserved - u.carried }

// unsettledPayments matches key's payments whose net the next batches pay.
func unsettledPayments(key SettlementKey) predicate.Payment {
	return payment.And(
		paymentsOf(key),
		payment.StatusEQ(payment.StatusConfirmed),
		payment.SettlementStatusEQ(payment.SettlementStatusPending),
		payment.SettlementBatchIDIsNil(),
	)
}

// reservedRefunds matches key's refunds after a payout whose reservation
// is not netted off a batch yet and still holds (not failed).
func reservedRefunds(key SettlementKey) predicate.Refund {
	return refund.And(
		refund.MerchantID(key.MerchantID),
		refund.Livemode(key.Livemode),
		refund.Chain(key.Chain),
		refund.ReservedTokenGT(0),
		refund.NettedBatchIDIsNil(),
		refund.StatusNEQ(refund.StatusFailed),
	)
}

// readUnsettled reads key's unsettledBalance in tx, under
// lockSettlementKey.
func readUnsettled(ctx context.Context, tx *ent.Tx, key SettlementKey) (unsettledBalance, error) {
	u := unsettledBalance{key: key}
	sum := func(col string) func(*entsql.Selector) string {
		return func(sel *entsql.Selector) string { return "COALESCE(SUM(" + sel.C(col) + "), 0)" }
	}
	nets, err := tx.Payment.Query().Where(unsettledPayments(key)).Aggregate(sum(payment.FieldSettlementNet)).Int(ctx)
	if err != nil {
		return u, fmt.Errorf("summing unsettled payments: %w", err)
	}
	var rs []struct {
		Sum   int64 `json:"sum"`
		Count int   `json:"count"`
	}
	if err := tx.Refund.Query().Where(reservedRefunds(key)).Aggregate(
		func(sel *entsql.Selector) string {
			return entsql.As("COALESCE(SUM("+sel.C(refund.FieldReservedToken)+"), 0)", "sum")
		},
		func(sel *entsql.Selector) string { return entsql.As("COUNT(*)", "count") },
	).Scan(ctx, &rs); err != nil {
		return u, fmt.Errorf("summing reserved refunds: %w", err)
	}
	prev, err := tx.SettlementBatch.Query().Where(batchOf(key)).Order(ent.Desc(settlementbatch.FieldSeq)).First(ctx)
	if err != nil && !ent.IsNotFound(err) {
		return u, err
	}
	u.unsettled = int64(nets)
	if len(rs) == 1 {
		u.reserved, u.refunds = rs[0].Sum, rs[0].Count
	}
	if prev != nil {
		u.carried = prev.CarriedOut
	}
	return u, nil
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
		// was taken from (refunds.go caps them at MaxPaymentsPerBatch). One
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

// batchRun is one run paying one batch.
type batchRun struct {
	s    *Service
	opts SettlementOptions
	b    *ent.SettlementBatch
	m    *ent.Merchant
}

// errBatchTaken: another run touched the batch since this one read it; that
// run pays it.
var errBatchTaken = errors.New("settlement batch: being paid by another run")

// errBatchClosed: completed by another run.
var errBatchClosed = errors.New("settlement batch closed by another run")

// pay pays the batch's net and completes it: "" once completed, or what it
// waits for.
func (br *batchRun) pay(ctx context.Context) (string, error) {
	var (
		out     payoutOutcome
		waiting string
		err     error
	)
	switch br.b.SettlementType {
	case string(merchant.SettlementTypeFiatPix):
		out, waiting, err = br.fiatPayout(ctx)
	default:
		out, waiting, err = br.cryptoPayout(ctx)
	}
	if errors.Is(err, errBatchTaken) {
		return err.Error(), nil
	}
	if err != nil || waiting != "" {
		return waiting, err
	}
	return "", br.s.completeBatch(ctx, br.b, out)
}

// payoutOutcome is what the merchant was paid, for the completing step.
type payoutOutcome struct {
	reference string
	chain     string
	address   string
	txHash    string
	fxRate    string
	amount    string
	currency  string
}

func (br *batchRun) mode() Mode { return sessionModeOf(br.b.Livemode) }

func (br *batchRun) paidDecimals() (int32, error) {
	l, err := br.s.ledger(br.mode(), chains.Name(br.b.Chain))
	if err != nil {
		return 0, err
	}
	return l.Decimals(), nil
}

func (br *batchRun) netUSD() (decimal.Decimal, error) {
	decimals, err := br.paidDecimals()
	if err != nil {
		return decimal.Zero, err
	}
	return FromBaseUnits(big.NewInt(br.b.Net), decimals), nil
}

func (br *batchRun) cryptoPayout(ctx context.Context) (payoutOutcome, string, error) {
	chain, address := chains.Name(br.b.PayoutChain), br.b.PayoutAddress
	if address == "" {
		// Not attempted yet: the destination is fixed now, so a merchant
		// editing its settlement address mid-payout never splits it.
		address = br.m.SettlementAddress
		chain = chains.Name(br.b.Chain)
		if br.m.SettlementChain != "" {
			chain = chains.Name(br.m.SettlementChain)
		}
		if address == "" {
			return payoutOutcome{}, "no settlement_address set for the merchant", nil
		}
		if l, err := br.s.ledger(br.mode(), chain); err == nil && l.ValidateAddress(address) != nil {
			return payoutOutcome{}, fmt.Sprintf("settlement_address %s is not an address on %s", address, chain), nil
		}
	}
	ledger, err := br.s.ledger(br.mode(), chain)
	if err != nil {
		return payoutOutcome{}, "", fmt.Errorf("settlement payout: %w", err)
	}
	usd, err := br.netUSD()
	if err != nil {
		return payoutOutcome{}, "", err
	}
	amount, err := ToBaseUnits("settlement net", usd, ledger.Decimals())
	if err != nil {
		return payoutOutcome{}, "", err
	}
	leg := &chainLeg{
		name:      "payout",
		ledger:    ledger,
		from:      br.s.cfg.Treasury.Address(chain),
		to:        address,
		amount:    amount,
		ref:       batchPayoutRef(br.b.ID),
		hash:      br.b.TxHash,
		mayBeSent: br.b.Status == settlementbatch.StatusSubmitted,
		key: func() ([]byte, error) {
			return append([]byte(nil), br.s.cfg.Treasury.Key(chain)...), nil
		},
		row: legRow{
			submit: func(ctx context.Context) error {
				return br.submit(ctx, func(u *ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne {
					return u.SetPayoutChain(string(chain)).SetPayoutAddress(address)
				})
			},
			record: func(ctx context.Context, hash string) error {
				return br.save(ctx, func(u *ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne { return u.SetTxHash(hash) })
			},
			touched: func() time.Time { return br.b.UpdatedAt },
		},
	}
	done, waiting, err := br.s.driveLeg(ctx, br.opts, leg)
	if err != nil || !done {
		return payoutOutcome{}, waiting, err
	}
	return payoutOutcome{reference: leg.hash, chain: string(chain), address: address, txHash: leg.hash}, "", nil
}

func (br *batchRun) fiatPayout(ctx context.Context) (payoutOutcome, string, error) {
	provider := br.s.cfg.Payouts[br.mode()]
	if provider == nil {
		return payoutOutcome{}, fmt.Sprintf("no fiat payout provider configured for %s mode", br.mode()), nil
	}
	usd, err := br.netUSD()
	if err != nil {
		return payoutOutcome{}, "", err
	}
	if br.b.Status != settlementbatch.StatusSubmitted {
		if err := br.save(ctx, func(u *ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne {
			return u.SetStatus(settlementbatch.StatusSubmitted)
		}); err != nil {
			return payoutOutcome{}, "", err
		}
	}
	// The provider answers the same payout for the same key, whichever run
	// asks and however often.
	res, err := provider.Payout(ctx, payout.Request{
		IdempotencyKey: "settlement:" + br.b.ID.String(),
		MerchantID:     br.m.ID,
		AmountUSD:      usd,
	})
	if errors.Is(err, payout.ErrRefused) {
		return payoutOutcome{}, "payout provider refused: " + err.Error(), nil
	}
	if err != nil {
		return payoutOutcome{}, "", fmt.Errorf("settlement payout: %w", err)
	}
	return payoutOutcome{
		reference: res.Reference,
		fxRate:    res.FXRate.String(),
		amount:    res.Amount.StringFixed(2),
		currency:  res.Currency,
	}, "", nil
}

// submit marks the batch submitted before a broadcast, with what must be
// fixed, conditionally on the updated_at this run read: errBatchTaken if
// another run touched it since.
func (br *batchRun) submit(ctx context.Context, fix func(*ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne) error {
	now := br.s.now().UTC().Truncate(time.Microsecond)
	u := br.s.cfg.DB.Ent.SettlementBatch.UpdateOne(br.b).
		Where(
			settlementbatch.StatusIn(settlementbatch.StatusPending, settlementbatch.StatusSubmitted),
			settlementbatch.UpdatedAt(br.b.UpdatedAt),
		).
		SetStatus(settlementbatch.StatusSubmitted).
		SetUpdatedAt(now)
	b, err := fix(u).Save(ctx)
	if ent.IsNotFound(err) {
		return errBatchTaken
	}
	if err != nil {
		return fmt.Errorf("settlement batch: saving: %w", err)
	}
	br.b = b
	return nil
}

// save updates the batch while it is still open.
func (br *batchRun) save(ctx context.Context, set func(*ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne) error {
	u := br.s.cfg.DB.Ent.SettlementBatch.UpdateOne(br.b).
		Where(settlementbatch.StatusIn(settlementbatch.StatusPending, settlementbatch.StatusSubmitted)).
		SetUpdatedAt(br.s.now().UTC().Truncate(time.Microsecond))
	b, err := set(u).Save(ctx)
	if ent.IsNotFound(err) {
		return errBatchClosed
	}
	if err != nil {
		return fmt.Errorf("settlement batch: saving: %w", err)
	}
	br.b = b
	return nil
}

// batchPayoutRef is a batch payout's idempotency reference (chainLeg.ref).
func batchPayoutRef(batchID uuid.UUID) [32]byte {
	return sha256.Sum256(append([]byte("agentpay/settlement-batch/payout/"), batchID[:]...))
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

// recordBatchEvent records settlement.completed for a completed batch.
func (s *Service) recordBatchEvent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, b *ent.SettlementBatch) error {
	ps, err := tx.Payment.Query().
		Where(payment.SettlementBatchID(b.ID)).
		WithSession().
		Order(ent.Asc(payment.FieldSweptAt), ent.Asc(payment.FieldID)).
		All(ctx)
	if err != nil {
		return err
	}
	rs, err := tx.Refund.Query().
		Where(refund.NettedBatchID(b.ID)).
		WithPayment(func(q *ent.PaymentQuery) { q.WithSession() }).
		Order(ent.Asc(refund.FieldCreatedAt), ent.Asc(refund.FieldID)).
		All(ctx)
	if err != nil {
		return err
	}
	l, err := s.ledger(sessionModeOf(b.Livemode), chains.Name(b.Chain))
	if err != nil {
		return err
	}
	data := settlementEventData(b, ps, rs, l.Decimals())
	in := EventInput{MerchantID: b.MerchantID, Type: EventSettlementCompleted, Livemode: b.Livemode, Data: data}
	if sess := oneSession(ps); sess != nil {
		in.SessionID = &sess.ID
	}
	if _, err := s.RecordEvent(ctx, tx, sqlTx, in); err != nil {
		return fmt.Errorf("recording %s: %w", EventSettlementCompleted, err)
	}
	return nil
}

// oneSession is the session of every payment of ps, nil if they are of
// several (or none).
func oneSession(ps []*ent.Payment) *ent.CheckoutSession {
	if len(ps) == 0 {
		return nil
	}
	for _, p := range ps[1:] {
		if p.SessionID != ps[0].SessionID {
			return nil
		}
	}
	return ps[0].Edges.Session
}

// settlementEventData is settlement.completed's data for batch b, its
// payments ps (sessions loaded) and the refunds rs netted off it:
//   - standard fields: chain and token (the paid chain's), amount_usd the
//     batch's gross; when the batch covers one session, its
//     session_external_id and metadata; when one payment, that payment's
//     payment_external_id, amount_token, tx_hash and from_address (the
//     per-payment shape of before batching);
//   - settlement_id, totals (gross_usd, fee_usd, refunds_usd,
//     carried_in_usd, carried_out_usd, net_usd: net = gross - fee - refunds
//   - carried_in, or 0 with the deficit in carried_out), settlement_type,
//     payout_reference, where the payout went, settled_at;
//   - payments: one line per payment (gross, refunded before the payout,
//     fee, net); refunds: one negative line per refund netted.
func settlementEventData(b *ent.SettlementBatch, ps []*ent.Payment, rs []*ent.Refund, decimals int32) EventData {
	usd := func(units int64) decimal.Decimal { return FromBaseUnits(big.NewInt(units), decimals) }
	gross := usd(b.Gross)
	data := EventData{Chain: b.Chain, Token: "USDC", AmountUSD: &gross}
	if sess := oneSession(ps); sess != nil {
		data.SessionExternalID = sess.ExternalID
		data.Metadata = sess.Metadata
	}
	if len(ps) == 1 {
		p := ps[0]
		tok := usd(p.AmountToken)
		data.PaymentExternalID, data.AmountToken = p.ExternalID, &tok
		data.Token, data.TxHash, data.FromAddress = p.Token, p.TxHash, p.FromAddress
		data.Extra = map[string]any{"sweep_tx_hash": p.SweepTxHash}
	} else {
		data.Extra = map[string]any{}
	}
	lines := make([]any, 0, len(ps))
	for _, p := range ps {
		var fee, net int64
		if p.SettlementFee != nil {
			fee = *p.SettlementFee
		}
		if p.SettlementNet != nil {
			net = *p.SettlementNet
		}
		line := map[string]any{
			"payment_external_id": p.ExternalID,
			"amount_usd":          p.AmountUsd,
			"refunded_usd":        usd(p.AmountToken - fee - net),
			"gross_usd":           usd(fee + net),
			"fee_usd":             usd(fee),
			"net_usd":             usd(net),
			"tx_hash":             p.TxHash,
			"sweep_tx_hash":       p.SweepTxHash,
			"late":                p.Late,
		}
		if p.Edges.Session != nil {
			line["session_external_id"] = p.Edges.Session.ExternalID
		}
		lines = append(lines, line)
	}
	refundLines := make([]any, 0, len(rs))
	for _, r := range rs {
		// What the batch netted: the refund's reservation (its amount, less
		// what the payment's own unpaid money covered).
		line := map[string]any{"refund_id": r.ExternalID, "amount_usd": usd(r.ReservedToken).Neg()}
		if p := r.Edges.Payment; p != nil {
			line["payment_external_id"] = p.ExternalID
			if p.Edges.Session != nil {
				line["session_external_id"] = p.Edges.Session.ExternalID
			}
		}
		refundLines = append(refundLines, line)
	}
	x := data.Extra
	x["settlement_id"] = b.ExternalID
	x["payments"] = lines
	x["refunds"] = refundLines
	x["gross_usd"] = gross
	x["fee_usd"] = usd(b.Fee)
	x["refunds_usd"] = usd(b.RefundsNetted)
	x["carried_in_usd"] = usd(b.CarriedIn)
	x["carried_out_usd"] = usd(b.CarriedOut)
	x["net_usd"] = usd(b.Net)
	x["settlement_type"] = b.SettlementType
	x["payout_reference"] = b.Reference
	if b.CompletedAt != nil {
		x["settled_at"] = b.CompletedAt.UTC().Format(time.RFC3339)
	}
	if b.TxHash != "" {
		x["settlement_chain"] = b.PayoutChain
		x["settlement_address"] = b.PayoutAddress
		x["settlement_tx_hash"] = b.TxHash
	}
	if b.FxRate != "" {
		// Stored as decimal strings (exact); sent as JSON numbers like
		// every amount.
		x["fx_rate"] = decimalOrString(b.FxRate)
		x["payout_amount"] = decimalOrString(b.FiatAmount)
		x["payout_currency"] = b.FiatCurrency
	}
	return data
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
