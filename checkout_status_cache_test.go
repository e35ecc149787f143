package agentpay

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/testdb"
)

// TestCheckoutStatusCacheFollowsEveryChange: while statuses are cached,
// every answer equals what the database holds, at once in the process that
// made the change and, on PostgreSQL, in a second process (its own service,
// connections and listener) as soon as the notification arrives: a chain
// selected, an amount below the price, each confirmation, the confirmation,
// a late payment. A row changed behind the service's back (no
// notification) stays as first read: the answers do come from memory.
func TestCheckoutStatusCacheFollowsEveryChange(t *testing.T) {
	ctx := context.Background()
	f := newPaymentFixture(t)
	require.NoError(t, f.svc.CacheCheckoutStatuses(t.Context()))
	pollers := map[string]*Service{"this process": f.svc}
	if testdb.IsPostgres() {
		other := newTestService(t, f.env, Config{DB: testdb.Reopen(t, f.db)})
		require.NoError(t, other.CacheCheckoutStatuses(t.Context()))
		pollers["another process"] = other
	}

	sess, addr := f.open(t, "5")
	id := sess.ExternalID
	stored := func() CheckoutStatus {
		acc, err := f.svc.readStatusAcc(ctx, id)
		require.NoError(t, err)
		acc.fold()
		return acc.st
	}
	answer := func(svc *Service) CheckoutStatus {
		st, err := svc.CheckoutStatus(ctx, id, "")
		require.NoError(t, err)
		st.Required = nil // the configuration's, not the database's
		return *st
	}
	same := func(a, b CheckoutStatus) bool {
		return sameStatus(SessionStatusUpdate{CheckoutStatus: a}, SessionStatusUpdate{CheckoutStatus: b})
	}
	requireFollows := func(step string) {
		t.Helper()
		want := stored()
		require.True(t, same(want, answer(f.svc)), "%s: this process answers what it committed at once", step)
		for name, svc := range pollers {
			require.Eventually(t, func() bool { return same(want, answer(svc)) }, 5*time.Second, 5*time.Millisecond,
				"%s: %s answers %+v, the database holds %+v", step, name, answer(svc), want)
		}
	}

	requireFollows("chain selected")
	f.pay(t, addr, 2_000_000)
	requireFollows("underpaid")
	require.Equal(t, "2", stored().AmountPaid.String())

	// Behind the service's back: no notification, the cached answer stays.
	// First every notification of the changes so far has arrived (they come
	// in commit order: a marker published now comes after them), and each
	// poller has read the session since.
	for name, svc := range pollers {
		sync, err := svc.bus.Subscribe(t.Context(), sessionChangedTopic, "sync")
		require.NoError(t, err)
		require.NoError(t, f.svc.bus.Publish(ctx, nil, sessionChangedTopic, "sync", name))
		select {
		case <-sync:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no notification within 5s", name)
		}
		answer(svc)
	}
	f.db.Ent.CheckoutSession.Update().Where(checkoutsession.ExternalID(id)).SetToken("RAW").ExecX(ctx)
	for name, svc := range pollers {
		require.Equal(t, "USDC", answer(svc).Token, "%s: the poll comes from memory", name)
	}

	f.evm.Commit()
	f.scan(t)
	requireFollows("one confirmation")
	require.Equal(t, "RAW", stored().Token)
	require.NotZero(t, stored().Confirmations)

	f.pay(t, addr, 3_000_000)
	requireFollows("covered")
	f.finalAll(t)
	requireFollows("confirmed")
	require.Equal(t, "confirmed", string(stored().Status))

	f.pay(t, addr, 1_000_000)
	requireFollows("late payment")
	f.finalAll(t)
	requireFollows("late payment final")
	require.Equal(t, "6", stored().AmountPaid.String())
}

// TestCheckoutStatusCacheOnlyWhileWatching: without CacheCheckoutStatuses,
// or once its context ends, every poll reads the database.
func TestCheckoutStatusCacheOnlyWhileWatching(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, false)
	reg := f.merchant(t, "Shop", nil)
	sess := f.session(t, reg.Merchant, "5")
	setToken := func(token string) {
		f.db.Ent.CheckoutSession.Update().Where(checkoutsession.ExternalID(sess.ExternalID)).SetToken(token).ExecX(ctx)
	}
	token := func() string {
		st, err := f.svc.CheckoutStatus(ctx, sess.ExternalID, "")
		require.NoError(t, err)
		return st.Token
	}
	setToken("A")
	require.Equal(t, "A", token())
	setToken("B")
	require.Equal(t, "B", token(), "not cached before CacheCheckoutStatuses")

	watch, stop := context.WithCancel(ctx)
	require.NoError(t, f.svc.CacheCheckoutStatuses(watch))
	require.Equal(t, "B", token())
	setToken("C")
	require.Equal(t, "B", token(), "cached")
	stop()
	require.Eventually(t, func() bool { return token() == "C" }, 5*time.Second, 5*time.Millisecond, "read again once the watch ends")
	setToken("D")
	require.Equal(t, "D", token())
}

// TestCheckoutStatusReadsTogether: polls that miss the status cache at the
// same time, each answered its own session (its amount, its status, its
// chain, what was paid to it; an unknown id no session). On PostgreSQL
// they are read together, a statement for many sessions
// (checkoutStatusReads); SQLite reads them one at a time on its one
// connection (reading them together there measured no better: issue 26,
// docs/performance.md).
func TestCheckoutStatusReadsTogether(t *testing.T) {
	ctx := context.Background()
	f := newPaymentFixture(t)
	type want struct {
		status, chain, amount, paid string
	}
	read := func(id string) want {
		acc, err := f.svc.readStatusAcc(ctx, id)
		assert.NoError(t, err)
		if acc == nil {
			return want{}
		}
		acc.fold()
		return want{string(acc.st.Status), acc.st.Chain, acc.st.Amount.String(), acc.st.AmountPaid.String()}
	}
	amounts := map[string]string{"cs_test_nosuchsession": ""}
	paid, addr := f.open(t, "7")
	f.pay(t, addr, 2_500_000)
	amounts[paid.ExternalID] = "7"
	for i := range 6 {
		amount := strconv.Itoa(10 + i)
		var sess *ent.CheckoutSession
		if i%2 == 0 {
			sess, _ = f.open(t, amount) // base selected: detecting
		} else {
			sess = f.session(t, f.merchant, amount) // pending
		}
		amounts[sess.ExternalID] = amount
	}
	// Read one at a time: each session's own.
	wants := map[string]want{}
	for id, amount := range amounts {
		wants[id] = read(id)
		require.Equal(t, amount, wants[id].amount, id)
	}
	require.Equal(t, "2.5", wants[paid.ExternalID].paid)
	require.Equal(t, want{}, wants["cs_test_nosuchsession"])

	calls0, batches0 := checkoutStatusReads.Counts(f.db)
	const rounds = 30 // together
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		got   = map[string][]want{}
	)
	for range rounds {
		for id := range wants {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				w := read(id)
				mu.Lock()
				got[id] = append(got[id], w)
				mu.Unlock()
			}()
		}
	}
	close(start)
	wg.Wait()
	for id, w := range wants {
		require.Len(t, got[id], rounds, id)
		for _, g := range got[id] {
			require.Equal(t, w, g, id)
		}
	}
	if testdb.IsPostgres() {
		calls, batches := checkoutStatusReads.Counts(f.db)
		calls, batches = calls-calls0, batches-batches0
		require.EqualValues(t, rounds*len(wants), calls, "every read went through the shared statement")
		require.Less(t, batches, calls, "concurrent reads shared statements")
		t.Logf("%d reads in %d statements", calls, batches)
	}
}
