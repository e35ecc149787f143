package agentpay

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/predicate"
)

// TestSessionState pins what each status allows before and at the
// deadline, with and without a live payment. select and cancel name the
// refusal ("" allowed); asks says whether the payment question is asked at
// all (only when the status and the deadline leave it open).
func TestSessionState(t *testing.T) {
	const (
		pending    = checkoutsession.StatusPending
		detecting  = checkoutsession.StatusDetecting
		confirming = checkoutsession.StatusConfirming
		confirmed  = checkoutsession.StatusConfirmed
		expired    = checkoutsession.StatusExpired
		cancelled  = checkoutsession.StatusCancelled
	)
	tests := []struct {
		name     string
		status   checkoutsession.Status
		late     bool // the deadline has come
		paid     bool // the session has a live payment
		open     bool
		selectOK string // selectable without the payment check (before the lock)
		selectE  string // selectable with it
		cancelE  string
		already  bool // cancelling again changes nothing
		asks     bool // selectable and cancellable ask about payments
		expiry   bool
		reason   string
	}{
		{name: "pending", status: pending, open: true, asks: true},
		{name: "pending at the deadline", status: pending, late: true,
			selectOK: "conflict: session cs_x expired at 2030-01-01T12:00:00Z",
			selectE:  "conflict: session cs_x expired at 2030-01-01T12:00:00Z",
			cancelE:  "conflict: session cs_x expired at 2030-01-01T12:00:00Z and cannot be cancelled",
			asks:     true, expiry: true},
		{name: "detecting", status: detecting, open: true, asks: true},
		{name: "detecting with a payment", status: detecting, paid: true, open: true,
			selectE: "conflict: session cs_x already has a payment",
			cancelE: "conflict: session cs_x already has a payment and cannot be cancelled",
			asks:    true},
		{name: "detecting with a payment at the deadline", status: detecting, paid: true, late: true,
			selectOK: "conflict: session cs_x expired at 2030-01-01T12:00:00Z",
			selectE:  "conflict: session cs_x expired at 2030-01-01T12:00:00Z",
			cancelE:  "conflict: session cs_x already has a payment and cannot be cancelled",
			asks:     true, expiry: true},
		{name: "confirming", status: confirming, paid: true,
			selectOK: "conflict: session cs_x already has a payment (status confirming)",
			selectE:  "conflict: session cs_x already has a payment (status confirming)",
			cancelE:  "conflict: session cs_x already has a payment (status confirming) and cannot be cancelled"},
		{name: "confirming at the deadline", status: confirming, paid: true, late: true,
			selectOK: "conflict: session cs_x already has a payment (status confirming)",
			selectE:  "conflict: session cs_x already has a payment (status confirming)",
			cancelE:  "conflict: session cs_x already has a payment (status confirming) and cannot be cancelled"},
		{name: "confirmed", status: confirmed, paid: true,
			selectOK: "conflict: session cs_x already has a payment (status confirmed)",
			selectE:  "conflict: session cs_x already has a payment (status confirmed)",
			cancelE:  "conflict: session cs_x already has a payment (status confirmed) and cannot be cancelled",
			reason:   FailReasonAlreadyPaid},
		{name: "expired", status: expired, late: true,
			selectOK: "conflict: session cs_x is expired",
			selectE:  "conflict: session cs_x is expired",
			cancelE:  "conflict: session cs_x has expired and cannot be cancelled",
			reason:   FailReasonLate},
		{name: "cancelled", status: cancelled,
			selectOK: "conflict: session cs_x is cancelled",
			selectE:  "conflict: session cs_x is cancelled",
			already:  true, reason: FailReasonLate},
	}
	deadline := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sess := &ent.CheckoutSession{ExternalID: "cs_x", Status: tt.status, ExpiresAt: deadline}
			now := deadline.Add(-time.Nanosecond)
			if tt.late {
				now = deadline
			}
			asked := false
			check := func() (bool, error) { asked = true; return tt.paid, nil }

			require.Equal(t, tt.open, sessionOpen(sess, now), "open")
			requireRefusal(t, tt.selectOK, selectable(sess, now, nil), "selectable before the lock")
			requireRefusal(t, tt.selectE, selectable(sess, now, check), "selectable")
			require.Equal(t, tt.asks && !tt.late, asked, "selectable asks about payments only before the deadline")
			asked = false
			already, err := cancellable(sess, now, check)
			requireRefusal(t, tt.cancelE, err, "cancellable")
			require.Equal(t, tt.already, already, "already cancelled")
			require.Equal(t, tt.asks, asked, "cancellable asks about payments")
			require.Equal(t, tt.expiry, expiryDue(sess, now), "expiry due")
			require.Equal(t, tt.reason, lateReason(tt.status), "late reason")
			require.Equal(t, tt.reason != "", sessionEnded(tt.status), "ended")
			require.Equal(t, tt.status == pending || tt.status == detecting, awaitingPayment(tt.status), "awaiting")
		})
	}
}

// requireRefusal checks err is the conflict want, or nil when want is "".
func requireRefusal(t *testing.T, want string, err error, what string) {
	t.Helper()
	if want == "" {
		require.NoError(t, err, what)
		return
	}
	require.ErrorIs(t, err, ErrConflict, what)
	require.EqualError(t, err, want, what)
}

// TestSessionStatePaymentCheckFails: a payment check that cannot answer
// refuses the change instead of allowing it.
func TestSessionStatePaymentCheckFails(t *testing.T) {
	sess := &ent.CheckoutSession{ExternalID: "cs_x", Status: checkoutsession.StatusPending, ExpiresAt: time.Now().Add(time.Hour)}
	boom := errors.New("database down")
	fail := func() (bool, error) { return false, boom }
	require.ErrorIs(t, selectable(sess, time.Now(), fail), boom)
	_, err := cancellable(sess, time.Now(), fail)
	require.ErrorIs(t, err, boom)
}

func TestCovers(t *testing.T) {
	for _, tt := range []struct {
		paid, due int64
		want      bool
	}{{0, 1, false}, {999, 1000, false}, {1000, 1000, true}, {1001, 1000, true}} {
		require.Equal(t, tt.want, covers(big.NewInt(tt.paid), big.NewInt(tt.due)), "%d of %d", tt.paid, tt.due)
	}
}

// TestProgressOf pins the page's state and amounts for each status and
// each relation of paid to the amount (what web/ and page.js used to work
// out themselves).
func TestProgressOf(t *testing.T) {
	ten := decimal.New(10, 0)
	d := decimal.RequireFromString
	for _, tt := range []struct {
		status      checkoutsession.Status
		paid        string
		state       PageState
		due, excess string
		waiting     bool
	}{
		{checkoutsession.StatusPending, "0", "pending", "0", "0", true},
		{checkoutsession.StatusDetecting, "0", "detecting", "0", "0", true},
		{checkoutsession.StatusDetecting, "0.000001", PageStateUnderpaid, "9.999999", "0", true},
		{checkoutsession.StatusDetecting, "4", PageStateUnderpaid, "6", "0", true},
		{checkoutsession.StatusConfirming, "10", "confirming", "0", "0", false},
		{checkoutsession.StatusConfirming, "12.5", "confirming", "0", "2.5", false},
		{checkoutsession.StatusConfirmed, "10.000001", "confirmed", "0", "0.000001", false},
		// Ended unpaid: what arrived late is shown as paid, never as an
		// overpayment (and an expired session is never underpaid).
		{checkoutsession.StatusExpired, "4", "expired", "0", "0", false},
		{checkoutsession.StatusExpired, "11", "expired", "0", "0", false},
		{checkoutsession.StatusCancelled, "11", "cancelled", "0", "0", false},
	} {
		got := ProgressOf(tt.status, ten, d(tt.paid))
		name := string(tt.status) + " paid " + tt.paid
		require.Equal(t, tt.state, got.State, name)
		require.True(t, d(tt.due).Equal(got.Due), "%s: due %s", name, got.Due)
		require.True(t, d(tt.excess).Equal(got.Excess), "%s: excess %s", name, got.Excess)
		require.Equal(t, tt.waiting, got.Waiting, name)
	}
}

// TestStateQueries: the queries of the state rules find exactly the
// sessions the rules decide, the deadline itself included, on the test
// database's engine: expiryDueAt (what the expiry job runs) is expiryDue,
// openAt (what the open-session cap counts) is sessionOpen.
func TestStateQueries(t *testing.T) {
	for _, q := range []struct {
		name  string
		query func(time.Time) predicate.CheckoutSession
		rule  func(*ent.CheckoutSession, time.Time) bool
		want  int
		why   string
	}{
		{"expiryDueAt", expiryDueAt, expiryDue, 4, "pending and detecting, past or at the deadline"},
		{"openAt", openAt, sessionOpen, 2, "pending and detecting, before the deadline"},
	} {
		t.Run(q.name, func(t *testing.T) {
			svc := newTestService(t, nil, Config{})
			live, _ := merchantAuths(t, svc)
			ctx := context.Background()
			now := time.Now().UTC().Truncate(time.Microsecond)
			want := map[string]bool{}
			for _, st := range []checkoutsession.Status{
				checkoutsession.StatusPending, checkoutsession.StatusDetecting, checkoutsession.StatusConfirming,
				checkoutsession.StatusConfirmed, checkoutsession.StatusExpired, checkoutsession.StatusCancelled,
			} {
				for _, expiresAt := range []time.Time{now.Add(-time.Minute), now, now.Add(time.Microsecond)} {
					created, err := svc.CreateSession(ctx, live, SessionInput{Amount: decp("10"), Currency: "USD"})
					require.NoError(t, err)
					sess, err := svc.cfg.DB.Ent.CheckoutSession.UpdateOne(created.Session).
						SetStatus(st).SetExpiresAt(expiresAt).Save(ctx)
					require.NoError(t, err)
					want[sess.ExternalID] = q.rule(sess, now)
				}
			}
			found, err := svc.cfg.DB.Ent.CheckoutSession.Query().Where(q.query(now)).All(ctx)
			require.NoError(t, err)
			got := map[string]bool{}
			for _, sess := range found {
				got[sess.ExternalID] = true
			}
			n := 0
			for id, decided := range want {
				require.Equal(t, decided, got[id], "session %s", id)
				if decided {
					n++
				}
			}
			require.Equal(t, q.want, n, q.why)
		})
	}
}

// TestSessionEnded: the ended statuses are those a payment is late to, and
// each ended session's end is the time of its own status.
func TestSessionEnded(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, st := range []checkoutsession.Status{
		checkoutsession.StatusPending, checkoutsession.StatusDetecting, checkoutsession.StatusConfirming,
		checkoutsession.StatusConfirmed, checkoutsession.StatusExpired, checkoutsession.StatusCancelled,
	} {
		require.Equal(t, lateReason(st) != "", sessionEnded(st), st)
		sess := &ent.CheckoutSession{Status: st, ConfirmedAt: &at, ExpiredAt: &at, CancelledAt: &at}
		end, ok := sessionEndedAt(sess)
		require.Equal(t, sessionEnded(st), ok, st)
		if ok {
			require.Equal(t, at, end)
		}
	}
	other := at.Add(time.Hour)
	end, _ := sessionEndedAt(&ent.CheckoutSession{Status: checkoutsession.StatusCancelled, CancelledAt: &at, ExpiredAt: &other})
	require.Equal(t, at, end, "a cancelled session ended when cancelled")
	_, ok := sessionEndedAt(&ent.CheckoutSession{Status: checkoutsession.StatusExpired})
	require.False(t, ok, "no time recorded")
}
