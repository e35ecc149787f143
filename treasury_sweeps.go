package agentpay

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/payment"
	"agentpay/ent/predicate"
)

// Sweeps: every amount that reaches a deposit address goes to the treasury
// once it is confirmed (docs/money.md).
//
// A counted payment is swept as the first leg of its settlement
// (settle_payments.go). A payment that is not counted (settlement_status NULL:
// late, over- or repeat payment, a payment to an expired session) is held
// for refund, recorded against the merchant: the settle_pending job finds
// it (HeldUnswept) and a sweep_payment job sweeps it (SweepHeldPayment).
// Refunds go out of the treasury, so a held payment is swept whether or not
// it has been refunded.
//
// Both paths drive the same leg: the deposit address to the treasury, for
// the payment's amount, with the ref settlementRef("sweep", payment id), and
// they write the same columns: sweep_submitted_at before every broadcast
// (conditionally on the value they read, so two runs never broadcast at
// once; the Solana "may have been broadcast" rule counts from it),
// sweep_tx_hash once known, swept_at once included. Whichever path runs,
// and however often, a payment is swept once: on EVM the ref is the
// EIP-3009 nonce; on Solana a leg that may have been broadcast is looked up
// by its ref before any resend.
//
// Once every payment recorded on an address is swept, the address is
// marked swept with the last sweep's hash (deposit_addresses.swept,
// sweep_tx_hash); a payment recorded on it later clears the mark. The scan
// stops watching an address once its session has ended, it is swept and the
// late-payment window has passed (checkout_deposits.go). On Solana the address's
// emptied token account is then closed, its rent back to the treasury
// (closeSweptAccount).

// HeldUnswept lists confirmed payments held for refund (never settled) that
// are not swept yet, untouched for at least minAge (oldest first, at most
// limit). Held means late, or of a session that has ended without counting
// it: a payment of a session still open may yet be counted, and its
// settlement sweeps it.
func (s *Service) HeldUnswept(ctx context.Context, minAge time.Duration, limit int) ([]uuid.UUID, error) {
	return s.cfg.DB.Ent.Payment.Query().
		Where(
			payment.StatusEQ(payment.StatusConfirmed),
			payment.SettlementStatusIsNil(),
			payment.SweptAtIsNil(),
			payment.DepositAddressIDNotNil(),
			payment.Or(payment.Late(true), payment.HasSessionWith(checkoutsession.StatusIn(endedStatuses...))),
			payment.UpdatedAtLTE(s.now().UTC().Add(-minAge)),
		).
		Order(ent.Asc(payment.FieldUpdatedAt)).
		Limit(limit).
		IDs(ctx)
}

// SweepHeldPayment sweeps one held payment to the treasury, as far as it
// can in one run. A payment in settlement is left to its settlement, which
// sweeps it with the same leg.
func (s *Service) SweepHeldPayment(ctx context.Context, id uuid.UUID) (SettleResult, error) {
	return s.sweepHeldWith(ctx, id, s.cfg.Settlement)
}

func (s *Service) sweepHeldWith(ctx context.Context, id uuid.UUID, opts SettlementOptions) (SettleResult, error) {
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
	if p.SweptAt != nil || p.SettlementStatus != nil || p.Status != payment.StatusConfirmed {
		return SettleResult{Done: true}, nil
	}
	if p.Edges.DepositAddress == nil {
		return SettleResult{}, fmt.Errorf("sweep: payment %s has no deposit address", p.ExternalID)
	}
	ledger, err := s.ledger(sessionMode(p.Edges.Session), chains.Name(p.Chain))
	if err != nil {
		return SettleResult{}, fmt.Errorf("sweep: %w", err)
	}
	row := legRow{
		submit: func(ctx context.Context) error {
			u := s.cfg.DB.Ent.Payment.UpdateOne(p).
				Where(payment.SettlementStatusIsNil(), sweepSubmittedAtIs(p.SweepSubmittedAt))
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
	}
	leg := s.sweepLeg(ledger, p, row)
	done, waiting, err := s.driveLeg(ctx, opts, leg)
	if errors.Is(err, errSweepTaken) {
		return SettleResult{Waiting: err.Error()}, nil
	}
	if err != nil || !done {
		return SettleResult{Waiting: waiting}, err
	}
	if err := s.finishSweep(ctx, ledger, p, leg.hash); err != nil {
		return SettleResult{}, err
	}
	return SettleResult{Done: true}, nil
}

// sweepLeg is payment p's sweep (its deposit address loaded): the whole
// amount from the deposit address to the treasury, relayed and paid for by
// the treasury.
//
// An internal payment's sweep is its collection (settle_internal.go):
// the same leg from the payer's custodial wallet, where its USDC stayed.
func (s *Service) sweepLeg(ledger chains.Ledger, p *ent.Payment, row legRow) *chainLeg {
	da := p.Edges.DepositAddress
	from, key := da.Address, func() ([]byte, error) { return s.DepositAddressKey(da) }
	if isInternalRef(p.TxHash) {
		from, key = p.FromAddress, func() ([]byte, error) { return s.payerWalletKey(context.Background(), p) }
	}
	return &chainLeg{
		name:      "sweep",
		ledger:    ledger,
		from:      from,
		to:        s.cfg.Treasury.Address(chains.Name(p.Chain)),
		amount:    big.NewInt(p.AmountToken),
		ref:       settlementRef("sweep", p.ID),
		hash:      p.SweepTxHash,
		mayBeSent: p.SweepSubmittedAt != nil,
		key:       key,
		row:       row,
	}
}

// errSweepTaken: another run wrote sweep_submitted_at (or a settlement
// took the payment) since this one read it; that run sends the sweep.
var errSweepTaken = errors.New("sweep: being sent by another run")

// markSweepSubmitted applies u, an update of p conditioned on what this run
// read, with sweep_submitted_at and updated_at set to now; errSweepTaken if
// the row changed meanwhile.
func (s *Service) markSweepSubmitted(ctx context.Context, p *ent.Payment, u *ent.PaymentUpdateOne) error {
	// Microseconds, as PostgreSQL keeps them: the next run compares what
	// it reads back.
	now := s.now().UTC().Truncate(time.Microsecond)
	q, err := u.SetSweepSubmittedAt(now).SetUpdatedAt(now).Save(ctx)
	if ent.IsNotFound(err) {
		return errSweepTaken
	}
	if err != nil {
		return fmt.Errorf("sweep: saving payment: %w", err)
	}
	p.SweepSubmittedAt, p.UpdatedAt, p.SettlementStatus = q.SweepSubmittedAt, q.UpdatedAt, q.SettlementStatus
	return nil
}

// sweepSubmittedAtIs matches a payment whose sweep_submitted_at is still at.
func sweepSubmittedAtIs(at *time.Time) predicate.Payment {
	if at == nil {
		return payment.SweepSubmittedAtIsNil()
	}
	return payment.SweepSubmittedAt(*at)
}

// sweepTouched is when p's sweep was last broadcast, or may have been: the
// Solana resend rule counts from it.
func sweepTouched(p *ent.Payment) time.Time {
	if p.SweepSubmittedAt != nil && p.SweepSubmittedAt.After(p.UpdatedAt) {
		return *p.SweepSubmittedAt
	}
	return p.UpdatedAt
}

// finishSweep records that p's sweep (hash) is included, and marks its
// deposit address swept with that hash once no payment on it is left to
// sweep. Idempotent.
func (s *Service) finishSweep(ctx context.Context, ledger chains.Ledger, p *ent.Payment, hash string) error {
	now := s.now().UTC()
	if _, err := s.cfg.DB.Ent.Payment.Update().
		Where(payment.ID(p.ID), payment.SweptAtIsNil()).
		SetSweptAt(now).
		Save(ctx); err != nil {
		return fmt.Errorf("sweep: recording payment %s swept: %w", p.ExternalID, err)
	}
	if p.DepositAddressID == nil {
		return nil
	}
	// One statement: a payment recorded on the address concurrently either
	// is seen here, or clears the mark after it (checkout_payments.go).
	n, err := s.cfg.DB.Ent.DepositAddress.Update().
		Where(
			depositaddress.ID(*p.DepositAddressID),
			depositaddress.Not(depositaddress.HasPaymentsWith(paymentToSweep())),
		).
		SetSwept(true).
		SetSweepTxHash(hash).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("sweep: marking the deposit address swept: %w", err)
	}
	if n == 0 || p.Edges.DepositAddress == nil {
		return nil
	}
	// Dust left on the address keeps its token account open until it is
	// swept (checkout_dust.go), which closes it then.
	if empty, err := s.depositAddressEmpty(ctx, *p.DepositAddressID); err == nil && empty {
		mode := ModeTest
		if sess, err := s.cfg.DB.Ent.CheckoutSession.Get(ctx, p.SessionID); err == nil {
			mode = sessionMode(sess)
		}
		s.closeSweptAccount(ctx, ledger, mode, p.Edges.DepositAddress)
	}
	return nil
}

// closeSweptAccount closes the emptied token account of a swept Solana
// deposit address, so its rent returns to the treasury (a no-op on EVM,
// whose ledgers are no TokenAccountCloser). Best effort: the sweep is done
// whatever happens here; an account left open (a failed close, or one
// holding tokens that arrived meanwhile) keeps its rent, and is closed by
// the next sweep of the address, if any.
func (s *Service) closeSweptAccount(ctx context.Context, ledger chains.Ledger, mode Mode, da *ent.DepositAddress) {
	closer, ok := ledger.(chains.TokenAccountCloser)
	if !ok {
		return
	}
	key, err := s.DepositAddressKey(da)
	if err != nil {
		s.logger.WarnContext(ctx, "closing a swept token account", "address", da.Address, "err", err)
		return
	}
	defer clear(key)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := closer.CloseEmptyTokenAccount(cctx, key)
	if err != nil {
		s.logger.WarnContext(ctx, "closing a swept token account", "address", da.Address, "err", err)
		return
	}
	if res.TxHash != "" {
		s.logger.InfoContext(ctx, "swept token account closed", "address", da.Address, "tx", res.TxHash)
		// The close's hash is kept nowhere else, so its cost (the rent
		// coming back, less the fee) is recorded now.
		s.recordCloseGas(ctx, mode, ledger, res.TxHash)
	}
}

// paymentToSweep matches a payment whose amount is still on its deposit
// address: not dropped by a reorg, not swept (a settlement completed before
// swept_at existed swept it too).
func paymentToSweep() predicate.Payment {
	return payment.And(
		payment.StatusNEQ(payment.StatusFailed),
		payment.SweptAtIsNil(),
		payment.Or(payment.SettlementStatusIsNil(), payment.SettlementStatusNEQ(payment.SettlementStatusCompleted)),
	)
}
