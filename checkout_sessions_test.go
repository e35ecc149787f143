package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/testenv"
)

func decp(s string) *decimal.Decimal {
	d := decimal.RequireFromString(s)
	return &d
}

// merchantAuths registers a merchant and returns its live and test callers.
func merchantAuths(t *testing.T, svc *Service) (live, test *MerchantAuth) {
	t.Helper()
	reg := newMerchant(t, svc)
	ctx := context.Background()
	live, err := svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.NoError(t, err)
	test, err = svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)
	return live, test
}

func TestSessionInputRules(t *testing.T) {
	tests := []struct {
		name string
		in   SessionInput
		err  string
	}{
		{"minimum", SessionInput{Amount: decp("0.5"), Currency: "USD"}, ""},
		{"maximum", SessionInput{Amount: decp("1000000.00"), Currency: "USD"}, ""},
		{"trailing zeros beyond cents", SessionInput{Amount: decp("10.0000"), Currency: "USD"}, ""},
		{"lower-case currency", SessionInput{Amount: decp("10"), Currency: "Usd"}, ""},
		{"just below minimum", SessionInput{Amount: decp("0.49"), Currency: "USD"}, "amount: must be at least 0.50 USD"},
		{"just above maximum", SessionInput{Amount: decp("1000000.01"), Currency: "USD"}, "amount: must be at most 1000000 USD"},
		{"sub-cent", SessionInput{Amount: decp("10.001"), Currency: "USD"}, "amount: must have at most 2 decimal places"},
		{"no amount", SessionInput{Currency: "USD"}, "amount: is required"},
		{"no currency", SessionInput{Amount: decp("10")}, "currency: is required"},
		{"exact big metadata integer", SessionInput{Amount: decp("10"), Currency: "USD", Metadata: map[string]any{"n": json.Number("9007199254740993")}},
			"metadata.n: number 9007199254740993 cannot be stored exactly; send it as a string"},
		{"nested metadata number", SessionInput{Amount: decp("10"), Currency: "USD", Metadata: map[string]any{"a": []any{map[string]any{"b": json.Number("0.1")}}}}, ""},
		{"nested inexact", SessionInput{Amount: decp("10"), Currency: "USD", Metadata: map[string]any{"a": []any{json.Number("1e400")}}},
			"metadata.a[0]: number 1e400 cannot be stored exactly; send it as a string"},
		{"metadata number too long to parse", SessionInput{Amount: decp("10"), Currency: "USD", Metadata: map[string]any{"n": json.Number(strings.Repeat("9", 1_000_000))}},
			"metadata.n: must be a number of at most 64 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.in.validate()
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, IsValidation(err), "%v", err)
			require.EqualError(t, err, tt.err)
		})
	}
}

// TestSessionExternalID: the id's prefix tells the session's mode (the
// formats and their randomness are tested in internal/vault).
func TestSessionExternalID(t *testing.T) {
	require.Regexp(t, `^cs_live_[0-9A-Za-z]{24}$`, newSessionExternalID(ModeLive))
	require.Regexp(t, `^cs_test_[0-9A-Za-z]{24}$`, newSessionExternalID(ModeTest))
}

func TestCreateSessionStoresExactly(t *testing.T) {
	svc := newTestService(t, nil, Config{})
	svc.cfg.PayURL = "https://pay.example/"
	ctx := context.Background()
	live, test := merchantAuths(t, svc)

	created, err := svc.CreateSession(ctx, test, SessionInput{
		Amount: decp("19.99"), Currency: "usd", Description: "d",
		Metadata: map[string]any{"n": json.Number("42"), "f": json.Number("0.25"), "s": "x"},
	})
	require.NoError(t, err)
	require.Equal(t, "https://pay.example/pay/"+created.Session.ExternalID, created.CheckoutURL)
	require.Equal(t, created.CheckoutURL+"/embed", created.EmbedURL)

	row, err := svc.SessionByExternalID(ctx, created.Session.ExternalID)
	require.NoError(t, err)
	require.True(t, decimal.RequireFromString("19.99").Equal(row.AmountUsd))
	require.Equal(t, "USD", row.Currency)
	require.False(t, row.Livemode)
	require.Equal(t, checkoutsession.StatusPending, row.Status)
	require.Equal(t, map[string]any{"n": float64(42), "f": 0.25, "s": "x"}, row.Metadata)
	require.True(t, row.ExpiresAt.Equal(created.Session.ExpiresAt))
	require.True(t, row.CreatedAt.Equal(created.Session.CreatedAt))
	require.Equal(t, DefaultSessionTTL, row.ExpiresAt.Sub(row.CreatedAt))

	// The live caller does not see the test session.
	_, err = svc.MerchantSession(ctx, live, created.Session.ExternalID)
	require.ErrorIs(t, err, ErrNotFound)
	got, err := svc.MerchantSession(ctx, test, created.Session.ExternalID)
	require.NoError(t, err)
	require.Equal(t, row.ID, got.ID)
}

// TestCreateSessionInsideTx: a caller's transaction (a GraphQL mutation)
// is joined, not waited for (SQLite has one connection).
func TestCreateSessionInsideTx(t *testing.T) {
	svc := newTestService(t, nil, Config{})
	live, _ := merchantAuths(t, svc)
	key := "in-tx"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var id string
	err := svc.cfg.DB.WithTx(ctx, func(ctx context.Context, _ *ent.Tx, _ *sql.Tx) error {
		c, err := svc.CreateSession(ctx, live, SessionInput{Amount: decp("5"), Currency: "USD", IdempotencyKey: &key})
		if err != nil {
			return err
		}
		id = c.Session.ExternalID
		_, err = svc.SessionByExternalID(ctx, id)
		if err != nil {
			return err
		}
		_, err = svc.CreateSession(ctx, live, SessionInput{Amount: decp("5"), Currency: "USD", IdempotencyKey: &key})
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("want conflict, got %v", err)
		}
		return nil
	})
	require.NoError(t, err)
	_, err = svc.SessionByExternalID(ctx, id)
	require.NoError(t, err)
}

func TestCreateSessionIdempotencyRace(t *testing.T) {
	svc := newTestService(t, nil, Config{})
	ctx := context.Background()
	live, _ := merchantAuths(t, svc)
	key := "race-1"

	const n = 8
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		created   []string
		conflicts []error
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := svc.CreateSession(ctx, live, SessionInput{Amount: decp("5"), Currency: "USD", IdempotencyKey: &key})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created = append(created, c.Session.ExternalID)
			case errors.Is(err, ErrConflict):
				conflicts = append(conflicts, err)
			default:
				t.Errorf("create: %v", err)
			}
		}()
	}
	wg.Wait()
	require.Len(t, created, 1)
	require.Len(t, conflicts, n-1)
	for _, err := range conflicts {
		require.EqualError(t, err, fmt.Sprintf(`conflict: idempotency_key "race-1" was already used for session %s`, created[0]))
	}
}

func TestListSessionsParams(t *testing.T) {
	svc := newTestService(t, nil, Config{})
	ctx := context.Background()
	live, _ := merchantAuths(t, svc)
	for _, p := range []ListParams{{Limit: -1}, {Limit: 101}, {Offset: -1}} {
		_, err := svc.ListSessions(ctx, live, p)
		require.True(t, IsValidation(err), "%+v: %v", p, err)
	}
	page, err := svc.ListSessions(ctx, live, ListParams{})
	require.NoError(t, err)
	require.Equal(t, DefaultPageSize, page.Limit)
	require.Zero(t, page.Total)
	require.Empty(t, page.Sessions)
}

func TestExpireSessions(t *testing.T) {
	ctx := context.Background()
	f := newPaymentFixture(t)

	unpaid, _ := f.open(t, "3")
	pendingSess := f.session(t, f.merchant, "4") // never selected a chain
	underpaid, addr := f.open(t, "10")
	f.pay(t, addr, 4_000_000)
	covered, addr2 := f.open(t, "2")
	f.pay(t, addr2, 2_000_000)
	future, _ := f.open(t, "6")

	n, err := f.svc.ExpireSessions(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is past its deadline yet")

	for _, s := range []*ent.CheckoutSession{unpaid, pendingSess, underpaid, covered} {
		f.pastDeadline(t, s)
	}
	n, err = f.svc.ExpireSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = f.svc.ExpireSessions(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "expiring twice changes nothing")

	for _, s := range []*ent.CheckoutSession{unpaid, pendingSess, underpaid} {
		got := f.reload(t, s)
		require.Equal(t, checkoutsession.StatusExpired, got.Status)
		require.NotNil(t, got.ExpiredAt)
	}
	require.Equal(t, checkoutsession.StatusConfirming, f.reload(t, covered).Status, "paid in time: waits for confirmations")
	require.Equal(t, checkoutsession.StatusDetecting, f.reload(t, future).Status)

	evs := f.sessionEvents(t, unpaid)
	require.Equal(t, []string{EventSessionExpired}, eventTypes(evs))
	require.Equal(t, unpaid.ExternalID, evs[0].Data["session_external_id"])
	require.Equal(t, map[string]any{"order_id": "A-17", "qty": float64(2)}, evs[0].Data["metadata"])
	require.Equal(t, []string{EventSessionExpired}, eventTypes(f.sessionEvents(t, pendingSess)))

	evs = f.sessionEvents(t, underpaid)
	require.Equal(t, []string{EventPaymentDetected, EventPaymentFailed, EventSessionExpired}, eventTypes(evs))
	failed := evs[1].Data
	require.Equal(t, FailReasonUnderpaid, failed["reason"])
	requireDec(t, "4", failed["amount_paid_usd"])
	requireDec(t, "10", failed["amount_expected_usd"])
	requireDec(t, "6", failed["amount_due_usd"])
	require.Equal(t, underpaid.ExternalID, failed["session_external_id"])
	require.False(t, evs[2].Row.CreatedAt.Before(evs[1].Row.CreatedAt))

	// The covered session still confirms after its deadline.
	f.mine(t, func() bool { return f.reload(t, covered).Status == checkoutsession.StatusConfirmed })
	findEvent(t, f.sessionEvents(t, covered), EventPaymentConfirmed)
	f.replay(t)
}

// TestOpenSessionCapHoldsUnderConcurrentCreates: however many creates race,
// no more than MaxOpenSessions sessions are open at once, whether near the
// cap (every create counts under a lock per merchant and mode) or far from
// it (creates spend half the headroom a count found, internal/headroom),
// and a session past its expires_at no longer counts, whether or not the
// expiry job has marked it.
func TestOpenSessionCapHoldsUnderConcurrentCreates(t *testing.T) {
	for _, limit := range []int{3, 300} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			env := testenv.New(t, testenv.Options{Clock: time.Now()})
			clk := env.Clock
			svc := newTestService(t, env, Config{MaxOpenSessions: limit})
			live, _ := merchantAuths(t, svc)
			ctx := context.Background()

			var (
				wg      sync.WaitGroup
				created atomic.Int32
				refused atomic.Int32
			)
			attempts := limit + 9
			work := make(chan struct{}, attempts)
			for range attempts {
				work <- struct{}{}
			}
			close(work)
			for range 12 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						_, err := svc.CreateSession(ctx, live, SessionInput{Amount: decp("5"), Currency: "USD"})
						switch {
						case err == nil:
							created.Add(1)
						case errors.Is(err, ErrRateLimited):
							refused.Add(1)
						default:
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			require.Equal(t, int32(limit), created.Load())
			require.Equal(t, int32(9), refused.Load())

			clk.Set(clk.Now().Add(svc.sessionTTL()))
			_, err := svc.CreateSession(ctx, live, SessionInput{Amount: decp("5"), Currency: "USD"})
			require.NoError(t, err, "sessions at their deadline are no longer open")
		})
	}
}
