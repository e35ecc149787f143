package agentpay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
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
//     payments (settle_batch.go), so the merchant is paid that much
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
