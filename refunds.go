package agentpay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/pairing"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
	"agentpay/ent/transfer"
	"agentpay/internal/jobs"
	"agentpay/internal/vault"
)

// Refunds (docs/money.md#refunds). A merchant returns all or part of a
// payment to its payer, or to an address it chooses, on the payment's
// chain.
//
// What may be refunded: a payment that is final (confirmed), whatever its
// settlement: held (late, over-, repeat or stray payments), counted with its
// settlement pending, or already in a settlement batch (paid, or being
// paid). A refund never exceeds what was paid less the earlier refunds
// that have not failed: one conditional update of the payment row
// (refunded_token + amount <= amount_token), made in the transaction that
// records the refund.
//
// Where the money comes from. A refund goes out of the treasury, which
// holds the payment's money until the payout; it never pays out money the
// merchant does not have with the service:
//
//   - before the payout (settlement pending, or held), the payment's own
//     money pays it, and the refund lowers what the merchant is paid: the
//     fee is recomputed on what is left (TransferFee of amount - refunded),
//     net = amount - refunded - fee; refunded in full, the merchant is paid
//     nothing for it;
//   - after the payout (the payment in a batch, or paid out on its own
//     before batches), the merchant has that money. What the payout did
//     not pay of the payment (refunded before it, by a refund that failed
//     since) covers a refund first; the rest must come from what the
//     merchant still holds unsettled on the chain and mode
//     (unsettledBalance: the nets of its confirmed counted payments in no
//     batch yet, less what earlier refunds after a payout reserved of
//     them, less a deficit carried by its last batch). It is reserved at
//     once (reserved_token) and netted off the batch that pays those
//     payments (settlementbatch.go), so the merchant is paid that much
//     less. A refund asking for more is refused, saying what is
//     available. The fee of the payout is not returned.
//
// Both bounds hold under concurrency: what a refund reads and reserves of
// the merchant's unsettled money, and what a batch claims and nets, happen
// under one lock per merchant, chain and mode (lockSettlementKey), so two
// refunds, or a refund and a batch, never use the same money. A refund
// before the payout lowers a pending payment's net, which may back a
// reservation: it takes the lock too and is refused where it would leave
// less unsettled than is reserved.
//
// Where it goes: the payer's address (the payment's from_address) unless
// the merchant names another, which needs its secret key of the mode: a
// dashboard session, whatever the member's role, refunds to the payer
// only (docs/security.md#refunds). The refund records whether its
// destination was chosen (destination) and the credential that asked
// (requested_with, merchant_key_id or dashboard_user_id).
//
// The refund goes out of the treasury on the payment's chain, gasless for
// the merchant and the payer (the treasury relays and pays gas, as for a
// settlement payout), driven by the send_refund job as a chainLeg with a
// fixed reference, so it is sent once whatever crashes. refund.created is
// recorded with the refund, refund.completed when its transfer is
// included, refund.failed when the chain reverted it MaxRefundReverts
// times (a token blocklist, a destination that cannot receive): a failed
// refund's amount is refundable again, and what it reserved is released.

// MaxRefundReverts is how many reverted transfers fail a refund.
const MaxRefundReverts = 3

// MaxRefundsPerPayment bounds the refunds of one payment (failed ones
// included), so that listing them has a bound.
const MaxRefundsPerPayment = 50

// RefundReasonMaxBytes bounds a refund's reason.
const RefundReasonMaxBytes = 500

// RefundInput is a merchant's refund request.
type RefundInput struct {
	// PaymentID is the payment's external id; optional when the session
	// has exactly one refundable payment.
	PaymentID string
	// AmountUSD is how much to return; nil returns all that is left.
	AmountUSD *decimal.Decimal
	// Address receives the refund; "" means the payer's address.
	Address string
	// Reason is free text for the merchant's records.
	Reason string
	// IdempotencyKey names this request: the same key answers the same
	// refund; another request under it is ErrIdempotencyKeyReused.
	IdempotencyKey string
}

// CreatedRefund is a recorded refund; Replayed when an earlier request
// with the same Idempotency-Key recorded it.
type CreatedRefund struct {
	Refund   *ent.Refund
	Payment  *ent.Payment
	Replayed bool
}

// CreateRefund records a refund of a payment of the caller's session and
// queues its transfer.
func (s *Service) CreateRefund(ctx context.Context, auth *MerchantAuth, sessionExternalID string, in RefundInput) (*CreatedRefund, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, err
	}
	in.Address = strings.TrimSpace(in.Address)
	if err := validateRefundInput(in); err != nil {
		return nil, err
	}
	fingerprint := refundFingerprint(sessionExternalID, in)
	if in.IdempotencyKey != "" {
		if out, err := s.refundByKey(ctx, auth, in.IdempotencyKey, fingerprint); out != nil || err != nil {
			return out, err
		}
	}
	var out *CreatedRefund
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		var err error
		out, err = s.createRefund(ctx, tx, sqlTx, auth, sessionExternalID, in, fingerprint)
		return err
	})
	if err != nil && in.IdempotencyKey != "" && ent.IsConstraintError(err) {
		// A concurrent request with the same key recorded first.
		if again, err2 := s.refundByKey(ctx, auth, in.IdempotencyKey, fingerprint); again != nil || err2 != nil {
			return again, err2
		}
	}
	if err != nil {
		return nil, err
	}
	// Read again outside the transaction, whose client is spent once it
	// has committed (a caller may follow the refund's edges).
	r, err := s.cfg.DB.Ent.Refund.Query().Where(refund.ID(out.Refund.ID)).WithPayment().Only(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading refund: %w", err)
	}
	return &CreatedRefund{Refund: r, Payment: r.Edges.Payment}, nil
}

func validateRefundInput(in RefundInput) error {
	if len(in.PaymentID) > 64 {
		return Invalid("payment_id", "at most 64 characters")
	}
	if len(in.Address) > 128 {
		return Invalid("address", "at most 128 characters")
	}
	if len(in.Reason) > RefundReasonMaxBytes {
		return Invalid("reason", "at most %d bytes", RefundReasonMaxBytes)
	}
	if len(in.IdempotencyKey) > 255 {
		return Invalid("Idempotency-Key", "at most 255 characters")
	}
	if in.AmountUSD != nil && in.AmountUSD.Sign() <= 0 {
		return Invalid("amount_usd", "must be greater than 0")
	}
	return nil
}

// refundFingerprint identifies a refund request for its Idempotency-Key.
func refundFingerprint(sessionExternalID string, in RefundInput) string {
	amount := ""
	if in.AmountUSD != nil {
		amount = in.AmountUSD.String()
	}
	h := sha256.New()
	for _, part := range []string{sessionExternalID, in.PaymentID, amount, in.Address, in.Reason} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// refundByKey answers a request whose Idempotency-Key recorded a refund
// already: that refund, or ErrIdempotencyKeyReused when the key named
// another request; nil when the key is new.
func (s *Service) refundByKey(ctx context.Context, auth *MerchantAuth, key, fingerprint string) (*CreatedRefund, error) {
	r, err := s.cfg.DB.Ent.Refund.Query().
		Where(refund.MerchantID(auth.Merchant.ID), refund.Livemode(auth.Livemode()), refund.IdempotencyKey(key)).
		WithPayment().
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading refund by idempotency key: %w", err)
	}
	if r.RequestHash != fingerprint {
		return nil, fmt.Errorf("%w: this Idempotency-Key was used for another refund request", ErrIdempotencyKeyReused)
	}
	return &CreatedRefund{Refund: r, Payment: r.Edges.Payment, Replayed: true}, nil
}

func (s *Service) createRefund(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, auth *MerchantAuth, sessionExternalID string, in RefundInput, fingerprint string) (*CreatedRefund, error) {
	sess, err := tx.CheckoutSession.Query().Where(ownSession(auth, sessionExternalID)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, errNoSuchSession
	}
	if err != nil {
		return nil, fmt.Errorf("reading session: %w", err)
	}
	p, err := refundablePayment(ctx, tx, sess, in.PaymentID)
	if err != nil {
		return nil, err
	}
	ledger, err := s.ledger(sessionMode(sess), chains.Name(p.Chain))
	if err != nil {
		return nil, err
	}
	decimals := ledger.Decimals()
	left := p.AmountToken - p.RefundedToken
	units := left
	if in.AmountUSD != nil {
		u, err := ToBaseUnits("amount_usd", *in.AmountUSD, decimals)
		if err != nil {
			return nil, err
		}
		if !u.IsInt64() || u.Int64() > left {
			return nil, Invalid("amount_usd", "%s is more than is left to refund of payment %s: %s",
				in.AmountUSD.String(), p.ExternalID, FromBaseUnits(big.NewInt(left), decimals).String())
		}
		units = u.Int64()
	}
	if units <= 0 {
		return nil, fmt.Errorf("%w: payment %s is refunded in full", ErrConflict, p.ExternalID)
	}
	to, chosen, err := s.refundDestination(ledger, auth, p, in.Address)
	if err != nil {
		return nil, err
	}
	key := SettlementKey{MerchantID: sess.MerchantID, Livemode: sess.Livemode, Chain: p.Chain}
	if err := s.lockSettlementKey(ctx, sqlTx, key); err != nil {
		return nil, err
	}
	// What the merchant holds unsettled, read under the lock: before this
	// refund changes it.
	before, err := readUnsettled(ctx, tx, key)
	if err != nil {
		return nil, err
	}

	// The bound, checked and taken in one conditional update (see the
	// package note above).
	n, err := tx.Payment.Update().
		Where(
			payment.ID(p.ID),
			payment.StatusEQ(payment.StatusConfirmed),
			func(sel *entsql.Selector) {
				sel.Where(entsql.P(func(b *entsql.Builder) {
					b.WriteString(sel.C(payment.FieldRefundedToken)).WriteString(" + ").Arg(units).
						WriteString(" <= ").WriteString(sel.C(payment.FieldAmountToken))
				}))
			},
		).
		AddRefundedToken(units).
		SetUpdatedAt(s.now().UTC()).
		Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("reserving the refund on payment %s: %w", p.ExternalID, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: payment %s changed while refunding (another refund took what was left); read it and try again", ErrConflict, p.ExternalID)
	}
	// Read after the update, which holds the payment's row: a batch that
	// claimed it first is seen here, one that claims it later sees this
	// refund.
	if p, err = tx.Payment.Get(ctx, p.ID); err != nil {
		return nil, err
	}
	afterPayout := paidOut(p)
	// Counted after the update above, which holds the payment's row: two
	// refunds of one payment count one after the other.
	if n, err := tx.Refund.Query().Where(refund.PaymentID(p.ID)).Count(ctx); err != nil {
		return nil, fmt.Errorf("counting refunds: %w", err)
	} else if n >= MaxRefundsPerPayment {
		return nil, fmt.Errorf("%w: payment %s has %d refunds, the most one payment may have", ErrConflict, p.ExternalID, n)
	}
	var reserved int64
	if afterPayout {
		if reserved, err = reserveAfterPayout(p, units, before, decimals); err != nil {
			return nil, err
		}
	} else {
		if err := resettle(ctx, tx, p); err != nil {
			return nil, err
		}
		if err := keepsReservationsCovered(ctx, tx, key, p, before, decimals); err != nil {
			return nil, err
		}
	}

	now := s.now().UTC().Truncate(time.Microsecond) // as PostgreSQL keeps it
	create := tx.Refund.Create().
		SetCreatedAt(now).
		SetUpdatedAt(now).
		SetExternalID(vault.RefundID.New()).
		SetPaymentID(p.ID).
		SetSessionID(sess.ID).
		SetMerchantID(sess.MerchantID).
		SetLivemode(sess.Livemode).
		SetChain(p.Chain).
		SetToken(p.Token).
		SetAmountToken(units).
		SetAmountUsd(FromBaseUnits(big.NewInt(units), decimals)).
		SetToAddress(to).
		SetReason(in.Reason).
		SetRequestHash(fingerprint).
		SetAfterPayout(afterPayout).
		SetReservedToken(reserved)
	if chosen {
		create.SetDestination(refund.DestinationChosen)
	}
	if err := requestedWith(ctx, tx, auth, create); err != nil {
		return nil, err
	}
	if in.IdempotencyKey != "" {
		create.SetIdempotencyKey(in.IdempotencyKey)
	}
	r, err := create.Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("recording refund: %w", err)
	}
	if err := recordSessionEvent(ctx, s, tx, sqlTx, sess, EventRefundCreated, refundEventData(sess, p, r, decimals)); err != nil {
		return nil, err
	}
	if s.cfg.Jobs != nil {
		if _, err := s.cfg.Jobs.InsertTx(ctx, sqlTx, jobs.SendRefundArgs{RefundID: r.ID}, nil); err != nil {
			return nil, fmt.Errorf("enqueueing refund %s: %w", r.ExternalID, err)
		}
	}
	return &CreatedRefund{Refund: r, Payment: p}, nil
}

// refundablePayment picks the payment a refund is for: the one named, or
// the session's only confirmed payment with something left to refund.
func refundablePayment(ctx context.Context, tx *ent.Tx, sess *ent.CheckoutSession, paymentID string) (*ent.Payment, error) {
	ps, err := tx.Payment.Query().
		Where(payment.SessionID(sess.ID)).
		Order(ent.Asc(payment.FieldCreatedAt), ent.Asc(payment.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading payments: %w", err)
	}
	var p *ent.Payment
	if paymentID != "" {
		for _, c := range ps {
			if c.ExternalID == paymentID {
				p = c
			}
		}
		if p == nil {
			return nil, fmt.Errorf("%w: payment %q of session %s", ErrNotFound, paymentID, sess.ExternalID)
		}
	} else {
		var open []string
		for _, c := range ps {
			if c.Status == payment.StatusConfirmed && c.RefundedToken < c.AmountToken {
				p = c
				open = append(open, c.ExternalID)
			}
		}
		switch len(open) {
		case 0:
			if len(ps) == 0 {
				return nil, fmt.Errorf("%w: session %s has no payment to refund", ErrConflict, sess.ExternalID)
			}
			p = ps[len(ps)-1] // explained below
		case 1:
		default:
			return nil, Invalid("payment_id", "session %s has %d refundable payments (%s): name one", sess.ExternalID, len(open), strings.Join(open, ", "))
		}
	}
	if p.Status != payment.StatusConfirmed {
		return nil, fmt.Errorf("%w: payment %s is %s, not final yet: it can be refunded once confirmed", ErrConflict, p.ExternalID, p.Status)
	}
	return p, nil
}

// refundDestination is where a refund of p goes: the payer's address
// unless address names another (chosen), which only the merchant's secret
// key may do. The address is checked on the payment's chain.
func (s *Service) refundDestination(ledger chains.Ledger, auth *MerchantAuth, p *ent.Payment, address string) (to string, chosen bool, err error) {
	to = address
	if to == "" {
		if p.FromAddress == "" {
			return "", false, Invalid("address", "payment %s has no payer address on record: give the address to refund to", p.ExternalID)
		}
		to = p.FromAddress
	}
	if err := ledger.ValidateAddress(to); err != nil {
		return "", false, Invalid("address", "%s is not an address on %s: %v", to, p.Chain, err)
	}
	norm := s.wallets(chains.Name(p.Chain)).NormalizeAddress
	chosen = p.FromAddress == "" || norm(to) != norm(p.FromAddress)
	if !chosen {
		to = p.FromAddress // the payer's, as recorded
	}
	if chosen && auth.Dashboard != nil {
		return "", false, fmt.Errorf("%w: a refund to an address other than the payer's (%s) needs the merchant's secret key; a dashboard session refunds to the payer only",
			ErrForbidden, firstNonEmpty(p.FromAddress, "none on record"))
	}
	return to, chosen, nil
}

// requestedWith records on the refund being created the credential that
// asked for it: the secret key's key pair, or the dashboard session's
// member.
func requestedWith(ctx context.Context, tx *ent.Tx, auth *MerchantAuth, create *ent.RefundCreate) error {
	if auth.Dashboard != nil {
		create.SetRequestedWith(refund.RequestedWithDashboardSession).SetDashboardUserID(auth.Dashboard.UserID)
		return nil
	}
	create.SetRequestedWith(refund.RequestedWithSecretKey)
	if auth.keyMatch == nil {
		return nil // a MerchantAuth made in process (tests, tools): no key to name
	}
	id, err := tx.MerchantKey.Query().Where(auth.keyMatch).FirstID(ctx)
	if err != nil && !ent.IsNotFound(err) {
		return fmt.Errorf("reading the refund's key: %w", err)
	}
	if err == nil {
		create.SetMerchantKeyID(id)
	}
	return nil
}

// paidOut reports whether p's payout has gone out or is going: p is in a
// settlement batch, or was paid out on its own (before batches).
func paidOut(p *ent.Payment) bool {
	if p.SettlementBatchID != nil {
		return true
	}
	return p.SettlementStatus != nil &&
		(*p.SettlementStatus == payment.SettlementStatusSubmitted || *p.SettlementStatus == payment.SettlementStatusCompleted)
}

// unpaidOf is what the payout of paid-out payment p did not pay the
// merchant of it, the fee aside: the refunds made before the payout
// (amount - fee - net). A refund made before the payout that failed
// afterwards leaves that much in the treasury, which a later refund of p
// uses before the merchant's unsettled money.
func unpaidOf(p *ent.Payment) int64 {
	var fee, net int64
	if p.SettlementFee != nil {
		fee = *p.SettlementFee
	}
	if p.SettlementNet != nil {
		net = *p.SettlementNet
	}
	return max(p.AmountToken-fee-net, 0)
}

// reserveAfterPayout is what a refund of units of paid-out payment p (its
// refunded_token already counting them) reserves of the merchant's
// unsettled money: the part p's own unpaid money does not cover. More
// than the merchant has available is refused, saying what is.
func reserveAfterPayout(p *ent.Payment, units int64, u unsettledBalance, decimals int32) (int64, error) {
	own := max(unpaidOf(p)-(p.RefundedToken-units), 0)
	reserve := units - min(units, own)
	if reserve == 0 {
		return 0, nil
	}
	if u.refunds >= MaxPaymentsPerBatch {
		return 0, fmt.Errorf("%w: %d refunds after a payout on %s wait for the merchant's next settlement, the most there may be; refund again after it",
			ErrConflict, u.refunds, p.Chain)
	}
	if available := u.available(); reserve > available {
		usd := func(units int64) string { return FromBaseUnits(big.NewInt(units), decimals).String() }
		return 0, Invalid("amount_usd", "payment %s was paid out to the merchant; a refund after the payout is paid from what the merchant still holds unsettled on %s (%s mode): %s USDC available (unsettled payments %s, less refunds already reserved %s and a carried deficit %s), %s asked",
			p.ExternalID, p.Chain, sessionModeOf(u.key.Livemode), usd(max(available, 0)), usd(u.unsettled), usd(u.reserved), usd(u.carried), usd(reserve))
	}
	return reserve, nil
}

// keepsReservationsCovered refuses a refund before the payout of counted
// payment p (its net already lowered by resettle) when that would leave
// the merchant less unsettled money than refunds after a payout reserved
// of it. Held payments back no reservation and pass.
func keepsReservationsCovered(ctx context.Context, tx *ent.Tx, key SettlementKey, p *ent.Payment, before unsettledBalance, decimals int32) error {
	if before.reserved == 0 && before.carried == 0 {
		return nil
	}
	after, err := readUnsettled(ctx, tx, key)
	if err != nil {
		return err
	}
	if after.available() >= 0 || after.unsettled == before.unsettled {
		return nil
	}
	return Invalid("amount_usd", "payment %s's money backs refunds made after a payout on %s (%s mode): the merchant holds %s USDC unsettled beyond them, which this refund would take more than",
		p.ExternalID, p.Chain, sessionModeOf(key.Livemode), FromBaseUnits(big.NewInt(max(before.available(), 0)), decimals))
}

// resettle recomputes a pending settlement's fee and net after the
// payment's refunded amount changed; a payment in a batch keeps what the
// batch paid (a refund after the payout reserves the merchant's unsettled
// money instead).
func resettle(ctx context.Context, tx *ent.Tx, p *ent.Payment) error {
	if p.SettlementStatus == nil || *p.SettlementStatus != payment.SettlementStatusPending || p.SettlementBatchID != nil {
		return nil
	}
	left := p.AmountToken - p.RefundedToken
	fee := TransferFee(left)
	_, err := tx.Payment.Update().
		Where(payment.ID(p.ID), payment.SettlementStatusEQ(payment.SettlementStatusPending), payment.SettlementBatchIDIsNil()).
		SetSettlementFee(fee).
		SetSettlementNet(left - fee).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("recomputing the settlement of payment %s: %w", p.ExternalID, err)
	}
	return nil
}

// ListRefunds lists the refunds of the caller's session, oldest first.
func (s *Service) ListRefunds(ctx context.Context, auth *MerchantAuth, sessionExternalID string) ([]*ent.Refund, error) {
	sess, err := s.MerchantSession(ctx, auth, sessionExternalID)
	if err != nil {
		return nil, err
	}
	rs, err := s.cfg.DB.Ent.Refund.Query().
		Where(refund.SessionID(sess.ID)).
		WithPayment().
		Order(ent.Asc(refund.FieldCreatedAt), ent.Asc(refund.FieldID)).
		Limit(1000). // a session's payments × MaxRefundsPerPayment in practice
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing refunds: %w", err)
	}
	return rs, nil
}

// PendingRefunds lists refunds not yet completed or failed and untouched
// for at least minAge (oldest first, at most limit), for the periodic job
// to try again.
func (s *Service) PendingRefunds(ctx context.Context, minAge time.Duration, limit int) ([]uuid.UUID, error) {
	return s.cfg.DB.Ent.Refund.Query().
		Where(
			refund.StatusIn(refund.StatusPending, refund.StatusSubmitted),
			refund.UpdatedAtLTE(s.now().UTC().Add(-minAge)),
		).
		Order(ent.Asc(refund.FieldUpdatedAt)).
		Limit(limit).
		IDs(ctx)
}

// SendRefund advances one refund's transfer as far as it can: done once
// it is completed or failed (now or before).
func (s *Service) SendRefund(ctx context.Context, id uuid.UUID) (SettleResult, error) {
	opts := s.cfg.Settlement.withDefaults()
	r, err := s.cfg.DB.Ent.Refund.Query().
		Where(refund.ID(id)).
		WithPayment().
		Only(ctx)
	if ent.IsNotFound(err) {
		return SettleResult{}, fmt.Errorf("%w: refund %s", ErrNotFound, id)
	}
	if err != nil {
		return SettleResult{}, err
	}
	if r.Status != refund.StatusPending && r.Status != refund.StatusSubmitted {
		return SettleResult{Done: true}, nil
	}
	mode := sessionModeOf(r.Livemode)
	chain := chains.Name(r.Chain)
	ledger, err := s.ledger(mode, chain)
	if err != nil {
		return SettleResult{}, fmt.Errorf("refund: %w", err)
	}
	if r.TxHash != "" {
		rc, err := ledger.Receipt(ctx, r.TxHash)
		if err != nil {
			return SettleResult{}, fmt.Errorf("refund receipt: %w", err)
		}
		if rc.State == chains.TxFailed {
			if r, err = s.refundReverted(ctx, r, rc.Err); err != nil || r.Status == refund.StatusFailed {
				return SettleResult{Done: err == nil}, err
			}
		}
	}
	rr := &refundRun{s: s, r: r}
	leg := &chainLeg{
		name:      "refund",
		ledger:    ledger,
		from:      s.cfg.Treasury.Address(chain),
		to:        r.ToAddress,
		amount:    big.NewInt(r.AmountToken),
		ref:       refundRef(r.ID),
		hash:      r.TxHash,
		mayBeSent: r.Status == refund.StatusSubmitted,
		key: func() ([]byte, error) {
			return append([]byte(nil), s.cfg.Treasury.Key(chain)...), nil
		},
		row: legRow{
			submit: func(ctx context.Context) error {
				return rr.save(ctx, func(u *ent.RefundUpdateOne) *ent.RefundUpdateOne { return u.SetStatus(refund.StatusSubmitted) })
			},
			record: func(ctx context.Context, hash string) error {
				return rr.save(ctx, func(u *ent.RefundUpdateOne) *ent.RefundUpdateOne { return u.SetTxHash(hash) })
			},
			touched: func() time.Time { return rr.r.UpdatedAt },
		},
	}
	done, waiting, err := s.driveLeg(ctx, opts, leg)
	if errors.Is(err, errRefundClosed) {
		return SettleResult{Done: true}, nil
	}
	if err != nil || !done {
		note := waiting
		if err != nil {
			note = err.Error()
		}
		if note = truncateUTF8(note, 500); note != rr.r.Error {
			_ = rr.save(context.WithoutCancel(ctx), func(u *ent.RefundUpdateOne) *ent.RefundUpdateOne { return u.SetError(note) })
		}
		return SettleResult{Waiting: waiting}, err
	}
	return SettleResult{Done: true}, s.completeRefund(ctx, rr.r, ledger)
}

// refundRef is a refund's idempotency reference (chainLeg.ref).
func refundRef(id uuid.UUID) [32]byte {
	return sha256.Sum256(append([]byte("agentpay/refund/"), id[:]...))
}

// refundRun is one run over one refund.
type refundRun struct {
	s *Service
	r *ent.Refund
}

var errRefundClosed = errors.New("refund closed by another run")

// save updates the refund row while it is still open.
func (rr *refundRun) save(ctx context.Context, set func(*ent.RefundUpdateOne) *ent.RefundUpdateOne) error {
	r, err := set(rr.s.cfg.DB.Ent.Refund.UpdateOne(rr.r).
		Where(refund.StatusIn(refund.StatusPending, refund.StatusSubmitted)).
		SetUpdatedAt(rr.s.now().UTC())).
		Save(ctx)
	if ent.IsNotFound(err) {
		return errRefundClosed
	}
	if err != nil {
		return fmt.Errorf("refund: saving: %w", err)
	}
	r.Edges = rr.r.Edges
	rr.r = r
	return nil
}

// completeRefund records the refund's inclusion and refund.completed once,
// and reports it (amount, gas) to the observer after the commit.
func (s *Service) completeRefund(ctx context.Context, r *ent.Refund, ledger chains.Ledger) error {
	completed := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.Refund.Update().
			Where(refund.ID(r.ID), refund.StatusIn(refund.StatusPending, refund.StatusSubmitted)).
			SetStatus(refund.StatusCompleted).
			SetError("").
			SetCompletedAt(s.now().UTC().Truncate(time.Microsecond)).
			Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		completed = true
		if err := s.refundEvent(ctx, tx, sqlTx, r.ID, EventRefundCompleted, nil); err != nil {
			return err
		}
		return s.tellRefundedAgent(ctx, tx, sqlTx, r)
	})
	if err != nil || !completed {
		return err
	}
	mode := sessionModeOf(r.Livemode)
	s.observer().Refunded(string(mode), r.Chain, r.AmountUsd)
	s.observeGas(ctx, mode, ledger, r.TxHash)
	return nil
}

// refundReverted counts a reverted transfer; at MaxRefundReverts the
// refund fails: refund.failed, and its amount is refundable again (and
// back in a pending settlement's net).
func (s *Service) refundReverted(ctx context.Context, r *ent.Refund, why string) (*ent.Refund, error) {
	var out *ent.Refund
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		upd := tx.Refund.Update().
			Where(refund.ID(r.ID), refund.StatusIn(refund.StatusPending, refund.StatusSubmitted), refund.TxHash(r.TxHash)).
			AddReverts(1).
			SetTxHash("").
			SetError(truncateUTF8("reverted: "+why, 500)).
			SetUpdatedAt(s.now().UTC())
		failing := r.Reverts+1 >= MaxRefundReverts
		if failing {
			upd.SetStatus(refund.StatusFailed)
		}
		n, err := upd.Save(ctx)
		if err != nil {
			return fmt.Errorf("refund: counting a revert: %w", err)
		}
		if out, err = tx.Refund.Query().Where(refund.ID(r.ID)).WithPayment().Only(ctx); err != nil {
			return err
		}
		if n == 0 || !failing {
			return nil
		}
		if _, err := tx.Payment.UpdateOneID(r.PaymentID).AddRefundedToken(-r.AmountToken).Save(ctx); err != nil {
			return fmt.Errorf("refund: releasing payment: %w", err)
		}
		p, err := tx.Payment.Get(ctx, r.PaymentID)
		if err != nil {
			return err
		}
		if err := resettle(ctx, tx, p); err != nil {
			return err
		}
		return s.refundEvent(ctx, tx, sqlTx, r.ID, EventRefundFailed, map[string]any{"failure_reason": why})
	})
	return out, err
}

// refundReceivedData is refund.received's data.
type refundReceivedData struct {
	RefundID          string `json:"refund_id"`
	SessionExternalID string `json:"session_external_id"`
	PaymentExternalID string `json:"payment_external_id"`
	// TransactionID is the agent's checkout payment the refund returns.
	TransactionID uuid.UUID   `json:"transaction_id"`
	Agent         string      `json:"agent"`
	AmountUSD     json.Number `json:"amount_usd"` // a JSON number, exact
	Chain         string      `json:"chain"`
	ToAddress     string      `json:"to_address"`
	TxHash        string      `json:"tx_hash"`
	Reason        string      `json:"reason,omitempty"`
}

// tellRefundedAgent records refund.received, in the transaction that
// completes refund r, when the payment it returns was an agent's checkout
// payment from its custodial wallet (agentcheckout.go) and the refund went
// back to that wallet: to the agent, and to each human paired with it, who
// answers for the agent's spending.
func (s *Service) tellRefundedAgent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, r *ent.Refund) error {
	p, err := tx.Payment.Query().Where(payment.ID(r.PaymentID)).WithSession().Only(ctx)
	if err != nil {
		return fmt.Errorf("refund: reading payment: %w", err)
	}
	paid, err := tx.Transfer.Query().Where(
		transfer.KindEQ(transfer.KindCheckoutPayment), transfer.CheckoutSessionID(p.SessionID),
		transfer.Chain(p.Chain), transfer.TxHash(p.TxHash), transfer.FromAgentIDNotNil(),
	).WithFromAgent().First(ctx)
	if ent.IsNotFound(err) {
		return nil // not an agent's payment
	}
	if err != nil {
		return fmt.Errorf("refund: reading the agent's payment: %w", err)
	}
	norm := s.wallets(chains.Name(r.Chain)).NormalizeAddress
	if norm(r.ToAddress) != norm(paid.FromAddress) {
		return nil // sent elsewhere, as the merchant chose: not the agent's money
	}
	a := paid.Edges.FromAgent
	data := refundReceivedData{
		RefundID: r.ExternalID, SessionExternalID: p.Edges.Session.ExternalID, PaymentExternalID: p.ExternalID,
		TransactionID: paid.ID, Agent: a.Username, AmountUSD: json.Number(r.AmountUsd.String()), Chain: r.Chain,
		ToAddress: r.ToAddress, TxHash: r.TxHash, Reason: r.Reason,
	}
	if err := s.recordAccountEvent(ctx, tx, sqlTx, AgentParty(a.ID), EventRefundReceived, data); err != nil {
		return err
	}
	humans, err := tx.Pairing.Query().Where(pairing.AgentID(a.ID), pairing.StatusEQ(pairing.StatusApproved)).All(ctx)
	if err != nil {
		return fmt.Errorf("refund: reading the agent's humans: %w", err)
	}
	for _, h := range humans {
		if err := s.recordAccountEvent(ctx, tx, sqlTx, UserParty(h.UserID), EventRefundReceived, data); err != nil {
			return err
		}
	}
	return nil
}

// refundEvent records a refund.* event from the refund's current row.
func (s *Service) refundEvent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, id uuid.UUID, kind string, extra map[string]any) error {
	r, err := tx.Refund.Query().Where(refund.ID(id)).WithPayment(func(q *ent.PaymentQuery) { q.WithSession() }).Only(ctx)
	if err != nil {
		return err
	}
	p := r.Edges.Payment
	sess := p.Edges.Session
	ledger, err := s.ledger(sessionMode(sess), chains.Name(r.Chain))
	if err != nil {
		return err
	}
	data := refundEventData(sess, p, r, ledger.Decimals())
	for k, v := range extra {
		data.Extra[k] = v
	}
	return recordSessionEvent(ctx, s, tx, sqlTx, sess, kind, data)
}

// refundEventData is a refund.* event's data: the standard fields describe
// the refund (its amount, its transaction), the payment it returns is
// named by payment_external_id and described in payment_*.
func refundEventData(sess *ent.CheckoutSession, p *ent.Payment, r *ent.Refund, decimals int32) EventData {
	usd := r.AmountUsd
	tok := FromBaseUnits(big.NewInt(r.AmountToken), decimals)
	extra := map[string]any{
		"refund_id":          r.ExternalID,
		"refund_status":      string(r.Status),
		"to_address":         r.ToAddress,
		"payment_amount_usd": p.AmountUsd,
		"payment_tx_hash":    p.TxHash,
		"refunded_usd":       FromBaseUnits(big.NewInt(p.RefundedToken), decimals),
	}
	if isInternalRef(p.TxHash) {
		// No chain transaction (internalsettlement.go): null, and the
		// reference in its own field.
		extra["payment_tx_hash"] = nil
		extra["payment_internal_reference"] = p.TxHash
	}
	if r.Reason != "" {
		extra["reason"] = r.Reason
	}
	if r.CompletedAt != nil {
		extra["completed_at"] = r.CompletedAt.UTC().Format(time.RFC3339)
	}
	return EventData{
		SessionExternalID: sess.ExternalID,
		PaymentExternalID: p.ExternalID,
		AmountUSD:         &usd,
		AmountToken:       &tok,
		Token:             r.Token,
		Chain:             r.Chain,
		TxHash:            r.TxHash,
		Metadata:          sess.Metadata,
		Extra:             extra,
	}
}
