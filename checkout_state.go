package agentpay

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/ent/predicate"
)

// What a checkout session's status and deadline allow (spec 3.1, design.md
// section 3): the one place that says whether a session is open, whether a
// customer may select a chain, a merchant cancel it, a payment to it counts,
// and when it expires. The service and the checkout page (CheckoutPage.Open)
// both ask here.
//
// A session awaits its payment while pending (no chain chosen) or detecting
// (a chain chosen, its address watched), until expires_at. The expiry job
// marks it expired some time after that, so the rules read the deadline
// too: past it, a session is treated as expired whether or not it has been
// marked yet.

// awaitingStatuses are the statuses of a session that still waits for a
// payment covering it.
var awaitingStatuses = []checkoutsession.Status{checkoutsession.StatusPending, checkoutsession.StatusDetecting}

// awaitingPayment reports whether a session in this status still waits for
// a payment covering it (pending, detecting).
func awaitingPayment(status checkoutsession.Status) bool {
	return slices.Contains(awaitingStatuses, status)
}

// pastDeadline reports whether the session's expires_at has come.
func pastDeadline(sess *ent.CheckoutSession, now time.Time) bool {
	return !now.Before(sess.ExpiresAt)
}

// sessionOpen reports whether the customer can still pay the session: it
// awaits a payment and its deadline has not come.
func sessionOpen(sess *ent.CheckoutSession, now time.Time) bool {
	return awaitingPayment(sess.Status) && !pastDeadline(sess, now)
}

// livePaymentCheck answers whether a session has a live payment
// (hasLivePayment); the rules below ask it only when the status and the
// deadline leave the question open.
type livePaymentCheck func() (bool, error)

// hasLivePayment reports whether the session has a payment a reorg has not
// dropped (any status but failed): its customer can no longer change chain,
// nor its merchant cancel it.
func hasLivePayment(ctx context.Context, payments *ent.PaymentClient, sessionID uuid.UUID) (bool, error) {
	return payments.Query().
		Where(payment.SessionID(sessionID), payment.StatusNEQ(payment.StatusFailed)).
		Exist(ctx)
}

// selectable says whether a customer may (re)select a payment method now:
// the session is open and has no live payment. hasPayment nil leaves the
// payments out (a first check, before the session's row is locked).
func selectable(sess *ent.CheckoutSession, now time.Time, hasPayment livePaymentCheck) error {
	switch {
	case awaitingPayment(sess.Status):
	case sess.Status == checkoutsession.StatusConfirming || sess.Status == checkoutsession.StatusConfirmed:
		return fmt.Errorf("%w: session %s already has a payment (status %s)", ErrConflict, sess.ExternalID, sess.Status)
	default:
		return fmt.Errorf("%w: session %s is %s", ErrConflict, sess.ExternalID, sess.Status)
	}
	if pastDeadline(sess, now) {
		return fmt.Errorf("%w: session %s expired at %s", ErrConflict, sess.ExternalID, sess.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if hasPayment == nil {
		return nil
	}
	paid, err := hasPayment()
	if err != nil {
		return err
	}
	if paid {
		return fmt.Errorf("%w: session %s already has a payment", ErrConflict, sess.ExternalID)
	}
	return nil
}

// cancellable says whether a merchant may cancel the session now: from
// pending or detecting while it has no live payment and its deadline has not
// come. A cancelled session may be cancelled again, which changes nothing
// (alreadyCancelled).
func cancellable(sess *ent.CheckoutSession, now time.Time, hasPayment livePaymentCheck) (alreadyCancelled bool, err error) {
	switch {
	case sess.Status == checkoutsession.StatusCancelled:
		return true, nil
	case awaitingPayment(sess.Status):
	case sess.Status == checkoutsession.StatusExpired:
		return false, fmt.Errorf("%w: session %s has expired and cannot be cancelled", ErrConflict, sess.ExternalID)
	default:
		return false, fmt.Errorf("%w: session %s already has a payment (status %s) and cannot be cancelled", ErrConflict, sess.ExternalID, sess.Status)
	}
	paid, err := hasPayment()
	if err != nil {
		return false, fmt.Errorf("reading payments: %w", err)
	}
	if paid {
		return false, fmt.Errorf("%w: session %s already has a payment and cannot be cancelled", ErrConflict, sess.ExternalID)
	}
	if pastDeadline(sess, now) {
		// Past its deadline the session is expired, whether or not the
		// expiry job has marked it yet (it sends session.expired).
		return false, fmt.Errorf("%w: session %s expired at %s and cannot be cancelled", ErrConflict,
			sess.ExternalID, sess.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return false, nil
}

// covers reports whether payments summing paid settle an amount due (an
// overpayment does too).
func covers(paid, due *big.Int) bool {
	return paid.Cmp(due) >= 0
}

// expiryDue reports whether the expiry job decides the session now: it
// still awaits its payment and its deadline has come. The session then
// expires unless its seen payments cover the amount (those wait for their
// confirmations).
func expiryDue(sess *ent.CheckoutSession, now time.Time) bool {
	return awaitingPayment(sess.Status) && pastDeadline(sess, now)
}

// expiryDueAt is expiryDue as a query: the sessions the expiry job decides
// at now.
func expiryDueAt(now time.Time) predicate.CheckoutSession {
	return checkoutsession.And(
		checkoutsession.StatusIn(awaitingStatuses...),
		checkoutsession.ExpiresAtLTE(now),
	)
}

// lateReason is the payment.failed reason of a payment arriving at a
// session in this status, or "" when the payment counts for the session: a
// session that ended (expired or cancelled without a payment, or already
// confirmed) takes no more payments.
func lateReason(status checkoutsession.Status) string {
	switch status {
	case checkoutsession.StatusExpired, checkoutsession.StatusCancelled:
		return FailReasonLate
	case checkoutsession.StatusConfirmed:
		return FailReasonAlreadyPaid
	}
	return ""
}

// endedStatuses are the statuses of a session that takes no more payments
// (lateReason gives each one's reason).
var endedStatuses = []checkoutsession.Status{
	checkoutsession.StatusConfirmed, checkoutsession.StatusExpired, checkoutsession.StatusCancelled,
}

// sessionEnded reports whether a session in this status takes no more
// payments.
func sessionEnded(status checkoutsession.Status) bool {
	return slices.Contains(endedStatuses, status)
}

// sessionEndedAt is when an ended session ended: its confirmed_at,
// expired_at or cancelled_at by its status. ok is false while it is open
// (or, for an ended one, when the time was not recorded).
func sessionEndedAt(sess *ent.CheckoutSession) (at time.Time, ok bool) {
	var t *time.Time
	switch sess.Status {
	case checkoutsession.StatusConfirmed:
		t = sess.ConfirmedAt
	case checkoutsession.StatusExpired:
		t = sess.ExpiredAt
	case checkoutsession.StatusCancelled:
		t = sess.CancelledAt
	}
	if t == nil {
		return time.Time{}, false
	}
	return *t, true
}

// openAt is sessionOpen as a query: the sessions a customer can still pay
// at now.
func openAt(now time.Time) predicate.CheckoutSession {
	return checkoutsession.And(
		checkoutsession.StatusIn(awaitingStatuses...),
		checkoutsession.ExpiresAtGT(now),
	)
}

// PageState is what a checkout session's payments amount to against its
// amount, as the hosted page (and any client of the status endpoint)
// shows it: the one place that says when a session is underpaid, what is
// still due and what was paid beyond the amount. The page renders it and
// derives nothing.
type PageState string

const (
	// PageStateUnderpaid is a session still detecting with part of its
	// amount paid: it waits for the rest (checkout_payments.go moves it to
	// confirming once its payments cover the amount).
	PageStateUnderpaid PageState = "underpaid"
)

// PaymentProgress is a session's PageState with the amounts that go with
// it, in USD at 1 USDC = 1 USD.
type PaymentProgress struct {
	// State is the session's status, except PageStateUnderpaid.
	State PageState
	// Due is what is still to pay while underpaid; zero otherwise.
	Due decimal.Decimal
	// Excess is what was paid beyond the amount; zero otherwise, and zero
	// once the session has ended unpaid (expired or cancelled: what arrived
	// is a late payment, shown as paid, not as an overpayment).
	Excess decimal.Decimal
	// Waiting is whether the page still waits for a payment (pending,
	// detecting, underpaid): the countdown runs and the deposit shows.
	Waiting bool
}

// ProgressOf is the PaymentProgress of a session in status whose amount is
// amount and whose live payments sum to paid.
func ProgressOf(status checkoutsession.Status, amount, paid decimal.Decimal) PaymentProgress {
	p := PaymentProgress{State: PageState(status), Waiting: awaitingPayment(status)}
	if status == checkoutsession.StatusDetecting && paid.IsPositive() && paid.LessThan(amount) {
		p.State = PageStateUnderpaid
		p.Due = amount.Sub(paid)
	}
	unpaidEnd := status == checkoutsession.StatusExpired || status == checkoutsession.StatusCancelled
	if paid.GreaterThan(amount) && !unpaidEnd {
		p.Excess = paid.Sub(amount)
	}
	return p
}
