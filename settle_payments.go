package agentpay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/payment"
	"agentpay/internal/jobs"
)

// Settlement (design.md section 3, docs/money.md#settlement). Once a
// session is confirmed, each of its counting payments (confirmed, not late)
// is marked pending with its fee and net, and settled in two steps:
//
//  1. sweep, per payment (settle_payment): the deposit address sends the
//     payment's tokens to the treasury on the chain it was paid on (the
//     treasury relays and pays gas); every address must be emptied;
//  2. payout, per batch (settle_batch): a settlement batch covers every
//     swept, counted, unpaid payment of one merchant on one chain in one
//     mode (at most MaxPaymentsPerBatch), and is paid in one transfer:
//     crypto_usdc: the treasury sends the batch's net to the merchant's
//     settlement_address on settlement_chain (default: the paid chain);
//     fiat_pix: the payout provider of the mode pays it, converted at its
//     FX rate. settlement.completed lists the payments it covers.
//
// A batch is formed when its net reaches SettlementOptions.BatchMinimum, or
// when its oldest payment has waited BatchInterval since it was swept, so
// a 0.50 payment does not cost a payout transfer of its own.
//
// The fee is the treasury's 0.1% (TransferFee) per payment, which pays the
// gas of the sweeps and the payout.
//
// A batch's net: the payments' nets (amount less refunds before the
// payout, less the fee on what is left), less what refunds made after an
// earlier payout reserved of the merchant's unsettled payments
// (checkout_refunds.go: reserved_token, taken when the refund is made, never more
// than those payments' nets), less the deficit the previous batch carried.
// A batch nets every reservation not netted yet, and waits while one of
// their refunds is in flight (netted, a refund that then failed would cost
// the merchant money it never got). Forming a batch and making a refund
// take one lock per merchant, chain and mode (lockSettlementKey), so a
// reservation is either netted by the batch or made against the payments
// the batch leaves. A net below zero is never paid: the batch completes
// with nothing to pay and carries the deficit into the next one
// (carried_out, carried_in). Since reservations, a deficit is always
// backed by payments not in a batch yet (a batch claims at most
// MaxPaymentsPerBatch of them, and only swept ones), which refunds count
// against (unsettledBalance); only refunds advanced by the treasury
// before reservations existed (the migration reserved their whole amount)
// can leave one that no payment backs, and then no refund after a payout
// is allowed until payments cover it.
//
// Held payments (late, over-, repeat: swept but not counted) are paid in
// the next batch like counted payments when the merchant's
// settle_held_payments is on; else they are held until refunded.
//
// Nothing is paid twice, whatever crashes: a sweep is a chainLeg
// (treasury_chain_legs.go) with a fixed ref derived from the payment id, a payout one
// with a fixed ref derived from the batch id; a fiat payout's idempotency
// key is the batch id. A batch is formed in one transaction that claims its
// payments and refunds by conditional updates and takes the next seq of its
// merchant, chain and mode (unique): two runs cannot both form one, and a
// new batch is formed only once the previous one is completed, so one is
// open at a time. Before every broadcast a payout's row is updated
// conditionally on the updated_at the run read, so two runs never
// broadcast at once. The step that completes is a conditional update, so
// settlement.completed is recorded once.
//
// Nothing is dropped either: a step that cannot go on (no settlement
// address yet, treasury short on the payout chain, provider refusal, chain
// down) leaves the payment or batch open with its error set, and the
// periodic settle_pending job tries it again.

// SettlementOptions tunes settlement; the zero value means the defaults.
type SettlementOptions struct {
	// Wait bounds how long one run waits for a leg's inclusion before
	// answering "not yet" (default 30s).
	Wait time.Duration
	// SolanaResendAfter as in reconcileOptions (default 3 minutes).
	SolanaResendAfter time.Duration
	// BatchMinimum is the net at which a batch is paid at once (default
	// DefaultSettlementMinimum; negative: any).
	BatchMinimum decimal.Decimal
	// BatchInterval is how long a batch's oldest payment waits, since it
	// was swept, before the batch is paid below the minimum (default
	// DefaultSettlementInterval; negative: no wait).
	BatchInterval time.Duration
}

// DefaultSettlementMinimum is SettlementOptions.BatchMinimum's default.
var DefaultSettlementMinimum = decimal.NewFromInt(10)

// DefaultSettlementInterval is SettlementOptions.BatchInterval's default.
const DefaultSettlementInterval = time.Hour

// MaxPaymentsPerBatch bounds a batch's payments (and its netted refunds),
// so settlement.completed has a bound; the rest go in the next batch.
const MaxPaymentsPerBatch = 500

// withDefaults fills in the defaults; idempotent (a negative value, "none",
// stays negative and reads as zero where it is used).
func (o SettlementOptions) withDefaults() SettlementOptions {
	if o.Wait <= 0 {
		o.Wait = 30 * time.Second
	}
	if o.SolanaResendAfter == 0 {
		o.SolanaResendAfter = defaultSolanaResendAfter
	}
	if o.BatchMinimum.IsZero() {
		o.BatchMinimum = DefaultSettlementMinimum
	}
	if o.BatchInterval == 0 {
		o.BatchInterval = DefaultSettlementInterval
	}
	return o
}

// SettleResult is where a settlement stands after one run.
type SettleResult struct {
	// Done: completed (now or before), or nothing to settle.
	Done bool
	// Waiting says what a not-done settlement waits for.
	Waiting string
}

// queueSettlements marks the session's confirmed, counting payments not yet
// in settlement as pending, with their fee and net (on what refunds left:
// markForSettlement), and enqueues their settle jobs, in the caller's
// transaction (the one confirming the session).
func (s *Service) queueSettlements(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, sess *ent.CheckoutSession) error {
	ps, err := tx.Payment.Query().
		Where(
			payment.SessionID(sess.ID),
			payment.Late(false),
			payment.StatusEQ(payment.StatusConfirmed),
			payment.SettlementStatusIsNil(),
		).
		All(ctx)
	if err != nil {
		return fmt.Errorf("listing payments to settle: %w", err)
	}
	for _, p := range ps {
		if err := markForSettlement(ctx, tx, p); err != nil {
			return err
		}
		if s.cfg.Jobs == nil {
			continue // no worker wired (some tests): settle_pending finds it
		}
		if _, err := s.cfg.Jobs.InsertTx(ctx, sqlTx, jobs.SettlePaymentArgs{PaymentID: p.ID}, nil); err != nil {
			return fmt.Errorf("enqueueing settlement of %s: %w", p.ExternalID, err)
		}
	}
	return nil
}

// markForSettlement marks confirmed payment p pending settlement with its
// fee and net on what refunds left of it: a payment is refundable once
// confirmed, before its session is (an underpayment waiting for the
// rest), and such a refund lowered nothing yet (resettle acts on pending
// settlements only). The update is conditional on the refunded amount
// read, so a refund committing meanwhile is seen: read again, and
// computed again.
func markForSettlement(ctx context.Context, tx *ent.Tx, p *ent.Payment) error {
	for attempt := 0; attempt < 10; attempt++ {
		left := p.AmountToken - p.RefundedToken
		fee := TransferFee(left)
		n, err := tx.Payment.Update().
			Where(payment.ID(p.ID), payment.SettlementStatusIsNil(), payment.RefundedToken(p.RefundedToken)).
			SetSettlementStatus(payment.SettlementStatusPending).
			SetSettlementFee(fee).
			SetSettlementNet(left - fee).
			Save(ctx)
		if err != nil {
			return fmt.Errorf("marking payment %s for settlement: %w", p.ExternalID, err)
		}
		if n == 1 {
			return nil
		}
		if p, err = tx.Payment.Get(ctx, p.ID); err != nil {
			return err
		}
		if p.SettlementStatus != nil {
			return nil
		}
	}
	return fmt.Errorf("marking payment %s for settlement: its refunds kept changing", p.ExternalID)
}

// PendingSettlements lists payments whose settlement is pending and not
// swept yet, untouched for at least minAge (oldest first, at most limit),
// for the periodic job to try again; swept ones wait for their batch
// (DueSettlements).
func (s *Service) PendingSettlements(ctx context.Context, minAge time.Duration, limit int) ([]uuid.UUID, error) {
	return s.cfg.DB.Ent.Payment.Query().
		Where(
			payment.SettlementStatusEQ(payment.SettlementStatusPending),
			payment.SweptAtIsNil(),
			payment.UpdatedAtLTE(s.now().UTC().Add(-minAge)),
		).
		Order(ent.Asc(payment.FieldUpdatedAt)).
		Limit(limit).
		IDs(ctx)
}

// SettlePayment advances one payment's settlement as far as it can: its
// sweep, then its merchant, chain and mode's batch.
func (s *Service) SettlePayment(ctx context.Context, id uuid.UUID) (SettleResult, error) {
	return s.settlePaymentWith(ctx, id, s.cfg.Settlement)
}

// settlePaymentWith is SettlePayment with explicit options. Done once the
// payment is paid out (now or before); else Waiting says what for.
func (s *Service) settlePaymentWith(ctx context.Context, id uuid.UUID, opts SettlementOptions) (SettleResult, error) {
	opts = opts.withDefaults()
	p, err := s.cfg.DB.Ent.Payment.Query().
		Where(payment.ID(id)).
		WithDepositAddress().
		WithSession().
		Only(ctx)
	if ent.IsNotFound(err) {
		return SettleResult{}, fmt.Errorf("%w: payment %s", ErrNotFound, id)
	}
	if err != nil {
		return SettleResult{}, err
	}
	if p.SettlementStatus == nil ||
		(*p.SettlementStatus != payment.SettlementStatusPending && *p.SettlementStatus != payment.SettlementStatusSubmitted) {
		return SettleResult{Done: true}, nil
	}
	sess := p.Edges.Session
	if p.SettlementBatchID == nil && p.SweptAt == nil {
		waiting, err := s.sweepForSettlement(ctx, opts, p)
		if err != nil || waiting != "" {
			note := waiting
			if err != nil {
				note = err.Error()
			}
			if note = truncateUTF8(note, 500); note != p.SettlementError {
				_, _ = s.cfg.DB.Ent.Payment.Update().
					Where(payment.ID(p.ID), payment.SettlementStatusEQ(payment.SettlementStatusPending)).
					SetSettlementError(note).
					Save(context.WithoutCancel(ctx))
			}
			return SettleResult{Waiting: waiting}, err
		}
	}
	res, err := s.settleBatchWith(ctx, SettlementKey{MerchantID: sess.MerchantID, Livemode: sess.Livemode, Chain: p.Chain}, opts)
	if err != nil {
		return res, err
	}
	p, err = s.cfg.DB.Ent.Payment.Get(ctx, id)
	if err != nil {
		return SettleResult{}, err
	}
	if p.SettlementStatus != nil && *p.SettlementStatus == payment.SettlementStatusCompleted {
		return SettleResult{Done: true}, nil
	}
	return SettleResult{Waiting: res.Waiting}, nil
}

// sweepForSettlement sweeps a counted payment (its deposit address and
// session loaded) to the treasury: "" once swept, or what it waits for.
// The leg is shared with the sweep of held payments (treasury_sweeps.go): same ref,
// same columns, so a payment is swept once whichever runs.
func (s *Service) sweepForSettlement(ctx context.Context, opts SettlementOptions, p *ent.Payment) (string, error) {
	ledger, err := s.ledger(sessionMode(p.Edges.Session), chains.Name(p.Chain))
	if err != nil {
		return "", fmt.Errorf("settlement: %w", err)
	}
	if p.Edges.DepositAddress == nil {
		return "", fmt.Errorf("settlement: payment %s has no deposit address", p.ExternalID)
	}
	sweep := s.sweepLeg(ledger, p, legRow{
		submit: func(ctx context.Context) error {
			u := s.cfg.DB.Ent.Payment.UpdateOne(p).
				Where(
					payment.SettlementStatusEQ(payment.SettlementStatusPending),
					sweepSubmittedAtIs(p.SweepSubmittedAt),
				)
			return s.markSweepSubmitted(ctx, p, u)
		},
		record: func(ctx context.Context, hash string) error {
			q, err := s.cfg.DB.Ent.Payment.UpdateOne(p).SetSweepTxHash(hash).SetUpdatedAt(s.now().UTC()).Save(ctx)
			if err != nil {
				return fmt.Errorf("sweep: recording %s: %w", hash, err)
			}
			p.SweepTxHash, p.UpdatedAt = q.SweepTxHash, q.UpdatedAt
			return nil
		},
		touched: func() time.Time { return sweepTouched(p) },
	})
	done, waiting, err := s.driveLeg(ctx, opts, sweep)
	if errors.Is(err, errSweepTaken) {
		return err.Error(), nil
	}
	if err != nil || !done {
		return waiting, err
	}
	if err := s.finishSweep(ctx, ledger, p, sweep.hash); err != nil {
		return "", err
	}
	s.observer().Swept(string(sessionMode(p.Edges.Session)), p.Chain, p.AmountUsd)
	s.observeGas(ctx, sessionMode(p.Edges.Session), ledger, sweep.hash)
	return "", nil
}

func decimalOrString(v string) any {
	if d, err := decimal.NewFromString(v); err == nil {
		return d
	}
	return v
}

// settlementRef is a leg's idempotency reference: fixed per payment and
// leg, so every retry of the leg carries the same one.
func settlementRef(leg string, paymentID uuid.UUID) [32]byte {
	return sha256.Sum256(append([]byte("agentpay/settlement/"+leg+"/"), paymentID[:]...))
}
