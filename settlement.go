package agentpay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/merchant"
	"agentpay/ent/payment"
	"agentpay/internal/jobs"
)

// Settlement (design.md section 3): once a session is confirmed, each of
// its counting payments (confirmed, not late) is paid out to the merchant
// by the settle_payment job, in three steps:
//
//  1. sweep: the deposit address sends the payment's tokens to the treasury
//     on the chain it was paid on (the treasury relays and pays gas);
//  2. payout: crypto_usdc: the treasury sends net = gross - fee to the
//     merchant's settlement_address on settlement_chain (default: the paid
//     chain), out of treasury liquidity; fiat_pix: the payout provider of
//     the session's mode pays net, converted at its FX rate;
//  3. complete: settlement_status completed and settlement.completed
//     (gross, fee, net, payout reference) in one transaction.
//
// The fee is the treasury's 0.1% (TransferFee), which pays the gas of the
// sweep and the payout.
//
// Nothing is paid twice, whatever crashes: each on-chain leg is a chainLeg
// (chainlegs.go) with a fixed ref derived from the payment id. A fiat
// payout's idempotency key is the payment id. The step that completes is a
// conditional update, so settlement.completed is recorded once.
//
// Nothing is dropped either: a step that cannot go on (no settlement
// address yet, treasury short on the payout chain, provider refusal, chain
// down) leaves the payment pending or submitted with settlement_error set,
// and the periodic settle_pending job tries it again.

// SettlementOptions tunes SettlePayment; the zero value means the defaults.
type SettlementOptions struct {
	// Wait bounds how long one run waits for a leg's inclusion before
	// answering "not yet" (default 30s).
	Wait time.Duration
	// SolanaResendAfter as in reconcileOptions (default 3 minutes).
	SolanaResendAfter time.Duration
}

func (o SettlementOptions) withDefaults() SettlementOptions {
	if o.Wait <= 0 {
		o.Wait = 30 * time.Second
	}
	switch {
	case o.SolanaResendAfter == 0:
		o.SolanaResendAfter = defaultSolanaResendAfter
	case o.SolanaResendAfter < 0:
		o.SolanaResendAfter = 0
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
// in settlement as pending, with their fee and net, and enqueues their
// settle jobs, in the caller's transaction (the one confirming the
// session).
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
		fee := TransferFee(p.AmountToken)
		if _, err := tx.Payment.UpdateOne(p).
			SetSettlementStatus(payment.SettlementStatusPending).
			SetSettlementFee(fee).
			SetSettlementNet(p.AmountToken - fee).
			Save(ctx); err != nil {
			return fmt.Errorf("marking payment %s for settlement: %w", p.ExternalID, err)
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

// PendingSettlements lists payments whose settlement is pending or
// submitted and untouched for at least minAge (oldest first, at most
// limit), for the periodic job to try again.
func (s *Service) PendingSettlements(ctx context.Context, minAge time.Duration, limit int) ([]uuid.UUID, error) {
	return s.cfg.DB.Ent.Payment.Query().
		Where(
			payment.SettlementStatusIn(payment.SettlementStatusPending, payment.SettlementStatusSubmitted),
			payment.UpdatedAtLTE(s.now().UTC().Add(-minAge)),
		).
		Order(ent.Asc(payment.FieldUpdatedAt)).
		Limit(limit).
		IDs(ctx)
}

// SettlePayment advances one payment's settlement as far as it can.
func (s *Service) SettlePayment(ctx context.Context, id uuid.UUID) (SettleResult, error) {
	return s.settlePaymentWith(ctx, id, s.cfg.Settlement)
}

// settlePaymentWith is SettlePayment with explicit options.
func (s *Service) settlePaymentWith(ctx context.Context, id uuid.UUID, opts SettlementOptions) (SettleResult, error) {
	opts = opts.withDefaults()
	p, err := s.cfg.DB.Ent.Payment.Query().
		Where(payment.ID(id)).
		WithDepositAddress().
		WithSession(func(q *ent.CheckoutSessionQuery) { q.WithMerchant() }).
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
	st := &settlement{s: s, opts: opts, p: p, sess: p.Edges.Session, m: p.Edges.Session.Edges.Merchant}
	waiting, err := st.run(ctx)
	if errors.Is(err, errSettlementClosed) {
		return SettleResult{Done: true}, nil
	}
	if err != nil || waiting != "" {
		note := waiting
		if err != nil {
			note = err.Error()
		}
		if note = truncateUTF8(note, 500); note != st.p.SettlementError {
			_ = st.save(context.WithoutCancel(ctx), func(u *ent.PaymentUpdateOne) *ent.PaymentUpdateOne {
				return u.SetSettlementError(note)
			})
		}
		return SettleResult{Waiting: waiting}, err
	}
	return SettleResult{Done: true}, nil
}

// settlement is one run over one payment.
type settlement struct {
	s    *Service
	opts SettlementOptions
	p    *ent.Payment
	sess *ent.CheckoutSession
	m    *ent.Merchant
}

// run answers "" once completed, or what it waits for.
func (st *settlement) run(ctx context.Context) (string, error) {
	mode := sessionMode(st.sess)
	paidChain := chains.Name(st.p.Chain)
	ledger, err := st.s.ledger(mode, paidChain)
	if err != nil {
		return "", fmt.Errorf("settlement: %w", err)
	}
	if st.p.Edges.DepositAddress == nil {
		return "", fmt.Errorf("settlement: payment %s has no deposit address", st.p.ExternalID)
	}
	// The sweep leg is shared with the sweep of held payments (sweeps.go):
	// same ref, same columns, so a payment is swept once whichever runs.
	sweep := st.s.sweepLeg(ledger, st.p, legRow{
		submit: func(ctx context.Context) error {
			u := st.s.cfg.DB.Ent.Payment.UpdateOne(st.p).
				Where(
					payment.SettlementStatusIn(payment.SettlementStatusPending, payment.SettlementStatusSubmitted),
					sweepSubmittedAtIs(st.p.SweepSubmittedAt),
				).
				SetSettlementStatus(payment.SettlementStatusSubmitted)
			return st.s.markSweepSubmitted(ctx, st.p, u)
		},
		record: func(ctx context.Context, hash string) error {
			return st.save(ctx, func(u *ent.PaymentUpdateOne) *ent.PaymentUpdateOne { return u.SetSweepTxHash(hash) })
		},
		touched: func() time.Time { return sweepTouched(st.p) },
	})
	// Settlements submitted before sweep_submitted_at existed.
	sweep.mayBeSent = sweep.mayBeSent || *st.p.SettlementStatus == payment.SettlementStatusSubmitted
	done, waiting, err := st.s.driveLeg(ctx, st.opts, sweep)
	if errors.Is(err, errSweepTaken) {
		return err.Error(), nil
	}
	if err != nil || !done {
		return waiting, err
	}
	if st.p.SweptAt == nil {
		if err := st.s.finishSweep(ctx, ledger, st.p, sweep.hash); err != nil {
			return "", err
		}
	}

	var result payoutOutcome
	if st.p.SettlementNet != nil && *st.p.SettlementNet == 0 {
		// Refunded in full before its payout: the sweep repaid the
		// treasury, which paid the refund; the merchant is owed nothing.
		return "", st.complete(ctx, result)
	}
	switch st.m.SettlementType {
	case merchant.SettlementTypeFiatPix:
		result, waiting, err = st.fiatPayout(ctx, mode)
	default:
		result, waiting, err = st.cryptoPayout(ctx, mode, paidChain)
	}
	if err != nil || waiting != "" {
		return waiting, err
	}
	return "", st.complete(ctx, result)
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

func (st *settlement) cryptoPayout(ctx context.Context, mode Mode, paidChain chains.Name) (payoutOutcome, string, error) {
	chain := chains.Name(st.p.SettlementChain)
	address := st.p.SettlementAddress
	if address == "" {
		// Not attempted yet: the destination is fixed now.
		address = st.m.SettlementAddress
		chain = paidChain
		if st.m.SettlementChain != "" {
			chain = chains.Name(st.m.SettlementChain)
		}
		if address == "" {
			return payoutOutcome{}, "no settlement_address set for the merchant", nil
		}
		if !st.addressFits(chain, address) {
			return payoutOutcome{}, fmt.Sprintf("settlement_address %s is not an address on %s", address, chain), nil
		}
	}
	ledger, err := st.s.ledger(mode, chain)
	if err != nil {
		return payoutOutcome{}, "", fmt.Errorf("settlement payout: %w", err)
	}
	net, err := st.netUnits(ledger.Decimals())
	if err != nil {
		return payoutOutcome{}, "", err
	}
	payout := &chainLeg{
		name:      "payout",
		ledger:    ledger,
		from:      st.s.cfg.Treasury.Address(chain),
		to:        address,
		amount:    net,
		ref:       settlementRef("payout", st.p.ID),
		hash:      st.p.SettlementTxHash,
		mayBeSent: st.p.SettlementAddress != "",
		key: func() ([]byte, error) {
			return append([]byte(nil), st.s.cfg.Treasury.Key(chain)...), nil
		},
		row: st.legRow((*ent.PaymentUpdateOne).SetSettlementTxHash, func(upd *ent.PaymentUpdateOne) *ent.PaymentUpdateOne {
			return upd.SetSettlementChain(string(chain)).SetSettlementAddress(address)
		}),
	}
	done, waiting, err := st.s.driveLeg(ctx, st.opts, payout)
	if err != nil || !done {
		return payoutOutcome{}, waiting, err
	}
	return payoutOutcome{reference: payout.hash, chain: string(chain), address: address, txHash: payout.hash}, "", nil
}

// addressFits reports whether a merchant's address (validated against its
// settlement_chain, or against either family when it has none) can receive
// on chain.
func (st *settlement) addressFits(chain chains.Name, address string) bool {
	l, err := st.s.ledger(sessionMode(st.sess), chain)
	if err != nil {
		return true // the ledger lookup reports the missing chain
	}
	return l.ValidateAddress(address) == nil
}

func (st *settlement) netUnits(decimals int32) (*big.Int, error) {
	if st.p.SettlementNet == nil {
		return nil, fmt.Errorf("settlement: payment %s has no net amount", st.p.ExternalID)
	}
	paidDecimals, err := st.paidDecimals()
	if err != nil {
		return nil, err
	}
	usd := FromBaseUnits(big.NewInt(*st.p.SettlementNet), paidDecimals)
	return ToBaseUnits("settlement_net", usd, decimals)
}

func (st *settlement) paidDecimals() (int32, error) {
	l, err := st.s.ledger(sessionMode(st.sess), chains.Name(st.p.Chain))
	if err != nil {
		return 0, err
	}
	return l.Decimals(), nil
}

func (st *settlement) fiatPayout(ctx context.Context, mode Mode) (payoutOutcome, string, error) {
	provider := st.s.cfg.Payouts[mode]
	if provider == nil {
		return payoutOutcome{}, fmt.Sprintf("no fiat payout provider configured for %s mode", mode), nil
	}
	decimals, err := st.paidDecimals()
	if err != nil {
		return payoutOutcome{}, "", err
	}
	if st.p.SettlementNet == nil {
		return payoutOutcome{}, "", fmt.Errorf("settlement: payment %s has no net amount", st.p.ExternalID)
	}
	res, err := provider.Payout(ctx, PayoutRequest{
		IdempotencyKey: "settlement:" + st.p.ID.String(),
		MerchantID:     st.m.ID,
		AmountUSD:      FromBaseUnits(big.NewInt(*st.p.SettlementNet), decimals),
	})
	if errors.Is(err, ErrPayoutRefused) {
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

// complete records the payout and settlement.completed once.
func (st *settlement) complete(ctx context.Context, out payoutOutcome) error {
	s := st.s
	var completed *ent.Payment // by this run (only one completes it)
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		completed = nil
		now := s.now().UTC().Truncate(time.Microsecond)
		upd := tx.Payment.Update().
			Where(
				payment.ID(st.p.ID),
				payment.SettlementStatusIn(payment.SettlementStatusPending, payment.SettlementStatusSubmitted),
			).
			SetSettlementStatus(payment.SettlementStatusCompleted).
			SetSettlementReference(out.reference).
			SetSettlementError("").
			SetSettledAt(now)
		if out.fxRate != "" {
			upd.SetSettlementFxRate(out.fxRate).
				SetSettlementFiatAmount(out.amount).
				SetSettlementFiatCurrency(out.currency)
		}
		n, err := upd.Save(ctx)
		if err != nil {
			return fmt.Errorf("completing settlement: %w", err)
		}
		if n == 0 {
			return nil // completed by another run
		}
		p, err := tx.Payment.Get(ctx, st.p.ID)
		if err != nil {
			return err
		}
		decimals, err := st.paidDecimals()
		if err != nil {
			return err
		}
		data := settlementEventData(st.sess, st.m, p, decimals)
		if err := recordSessionEvent(ctx, s, tx, sqlTx, st.sess, EventSettlementCompleted, data); err != nil {
			return err
		}
		completed = p
		return nil
	})
	if err != nil || completed == nil {
		return err
	}
	st.observe(ctx, completed)
	return nil
}

// observe reports a settlement this run completed: the amounts swept and
// paid out, and the gas the treasury paid for its legs.
func (st *settlement) observe(ctx context.Context, p *ent.Payment) {
	obs, mode := st.s.observer(), sessionMode(st.sess)
	decimals, err := st.paidDecimals()
	if err != nil {
		return
	}
	obs.Swept(string(mode), p.Chain, p.AmountUsd)
	if p.SettlementNet != nil {
		obs.Settled(string(mode), p.Chain, string(st.m.SettlementType), FromBaseUnits(big.NewInt(*p.SettlementNet), decimals))
	}
	if l, err := st.s.ledger(mode, chains.Name(p.Chain)); err == nil {
		st.s.observeGas(ctx, mode, l, p.SweepTxHash)
	}
	if p.SettlementTxHash != "" {
		if l, err := st.s.ledger(mode, chains.Name(p.SettlementChain)); err == nil {
			st.s.observeGas(ctx, mode, l, p.SettlementTxHash)
		}
	}
}

// settlementEventData is settlement.completed's data: the spec's fields of
// the payment being settled (amount_usd is its gross), then gross, fee,
// net, the settlement type and the payout reference, and where it went.
func settlementEventData(sess *ent.CheckoutSession, m *ent.Merchant, p *ent.Payment, decimals int32) EventData {
	data := paymentEventData(sess, p, decimals)
	usd := func(units *int64) decimal.Decimal {
		if units == nil {
			return decimal.Zero
		}
		return FromBaseUnits(big.NewInt(*units), decimals)
	}
	data.Extra = map[string]any{
		"gross_usd":        p.AmountUsd,
		"fee_usd":          usd(p.SettlementFee),
		"net_usd":          usd(p.SettlementNet),
		"settlement_type":  string(m.SettlementType),
		"payout_reference": p.SettlementReference,
		"sweep_tx_hash":    p.SweepTxHash,
	}
	if p.SettledAt != nil {
		data.Extra["settled_at"] = p.SettledAt.UTC().Format(time.RFC3339)
	}
	if p.SettlementTxHash != "" {
		data.Extra["settlement_chain"] = p.SettlementChain
		data.Extra["settlement_address"] = p.SettlementAddress
		data.Extra["settlement_tx_hash"] = p.SettlementTxHash
	}
	if p.SettlementFxRate != "" {
		// Stored as decimal strings (exact); sent as JSON numbers like
		// every amount.
		data.Extra["fx_rate"] = decimalOrString(p.SettlementFxRate)
		data.Extra["payout_amount"] = decimalOrString(p.SettlementFiatAmount)
		data.Extra["payout_currency"] = p.SettlementFiatCurrency
	}
	return data
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

// legRow writes a settlement leg's progress to the payment: record sets
// the leg's hash column, fix what must be fixed before its first
// broadcast (nil: nothing).
func (st *settlement) legRow(record func(*ent.PaymentUpdateOne, string) *ent.PaymentUpdateOne, fix func(*ent.PaymentUpdateOne) *ent.PaymentUpdateOne) legRow {
	return legRow{
		submit: func(ctx context.Context) error {
			return st.save(ctx, func(u *ent.PaymentUpdateOne) *ent.PaymentUpdateOne {
				u.SetSettlementStatus(payment.SettlementStatusSubmitted)
				if fix != nil {
					u = fix(u)
				}
				return u
			})
		},
		record: func(ctx context.Context, hash string) error {
			return st.save(ctx, func(u *ent.PaymentUpdateOne) *ent.PaymentUpdateOne { return record(u, hash) })
		},
		touched: func() time.Time { return st.p.UpdatedAt },
	}
}

// save updates the payment row while its settlement is still open.
func (st *settlement) save(ctx context.Context, set func(*ent.PaymentUpdateOne) *ent.PaymentUpdateOne) error {
	upd := st.s.cfg.DB.Ent.Payment.UpdateOne(st.p).
		Where(payment.SettlementStatusIn(payment.SettlementStatusPending, payment.SettlementStatusSubmitted)).
		SetUpdatedAt(st.s.now().UTC())
	p, err := set(upd).Save(ctx)
	if ent.IsNotFound(err) {
		return errSettlementClosed
	}
	if err != nil {
		return fmt.Errorf("settlement: saving payment: %w", err)
	}
	st.p.SettlementStatus, st.p.UpdatedAt = p.SettlementStatus, p.UpdatedAt
	st.p.SweepTxHash, st.p.SettlementTxHash = p.SweepTxHash, p.SettlementTxHash
	st.p.SweepSubmittedAt, st.p.SweptAt = p.SweepSubmittedAt, p.SweptAt
	st.p.SettlementChain, st.p.SettlementAddress = p.SettlementChain, p.SettlementAddress
	// A refund may have lowered them while the settlement was pending;
	// from the first broadcast on (status submitted) refunds are refused,
	// so what this save read is what the payout pays.
	st.p.SettlementFee, st.p.SettlementNet = p.SettlementFee, p.SettlementNet
	return nil
}

var errSettlementClosed = errors.New("settlement closed by another run")
