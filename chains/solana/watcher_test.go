package solana_test

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	agentsolana "agentpay/chains/solana"
)

// depositLog gathers a watcher's events by deposit and checks the
// reporting rules: seen once, confirmations only growing, final once, never
// anything after final.
type depositLog struct {
	t      *testing.T
	seen   map[string]chains.Deposit
	conf   map[string][]uint64
	final  map[string]int
	byTx   map[string]string // tx hash -> deposit key
	events int
}

func newDepositLog(t *testing.T) *depositLog {
	return &depositLog{t: t, seen: map[string]chains.Deposit{}, conf: map[string][]uint64{}, final: map[string]int{}, byTx: map[string]string{}}
}

func (l *depositLog) add(evs []chains.DepositEvent) {
	t := l.t
	for _, ev := range evs {
		l.events++
		key := ev.Deposit.Key()
		require.Equal(t, chains.Solana, ev.Deposit.Chain)
		require.Equal(t, uint64(testFinalizedDepth), ev.Required)
		switch ev.Kind {
		case chains.DepositSeen:
			_, dup := l.seen[key]
			require.False(t, dup, "deposit %s seen twice", key)
			l.seen[key] = ev.Deposit
			l.byTx[ev.Deposit.TxHash] = key
			l.conf[key] = append(l.conf[key], ev.Confirmations)
		case chains.DepositConfirmations:
			require.Contains(t, l.seen, key, "confirmations before seen")
			require.Zero(t, l.final[key], "confirmations after final")
			prev := l.conf[key]
			require.Greater(t, ev.Confirmations, prev[len(prev)-1], "confirmations must grow")
			require.Less(t, ev.Confirmations, ev.Required)
			l.conf[key] = append(prev, ev.Confirmations)
		case chains.DepositFinal:
			require.Contains(t, l.seen, key, "final before seen")
			l.final[key]++
			require.Equal(t, 1, l.final[key], "deposit %s final twice", key)
			require.GreaterOrEqual(t, ev.Confirmations, ev.Required)
		case chains.DepositRemoved:
			t.Fatalf("deposit %s removed on a chain without forks", key)
		}
	}
}

func (l *depositLog) allFinal(txs map[string]expectedDeposit) bool {
	for tx := range txs {
		key, ok := l.byTx[tx]
		if !ok || l.final[key] == 0 {
			return false
		}
	}
	return true
}

type expectedDeposit struct {
	to, from string
	amount   int64
}

// pollUntil polls every slot until done or the deadline.
func pollUntil(ctx context.Context, t *testing.T, w *agentsolana.Watcher, list chains.Watchlist, log *depositLog, done func() bool) {
	t.Helper()
	for !done() {
		evs, err := w.Poll(ctx, list)
		require.NoError(t, err)
		log.add(evs)
		select {
		case <-ctx.Done():
			t.Fatalf("timed out: %d events, seen %d, final %v", log.events, len(log.seen), log.final)
		case <-time.After(testSlotTime):
		}
	}
}

// poller polls every slot in the background while a test makes payments,
// so every deposit is followed from seen to final.
type poller struct {
	mu     sync.Mutex
	events []chains.DepositEvent
	err    error
	stop   chan struct{}
	done   chan struct{}
}

func startPoller(ctx context.Context, w *agentsolana.Watcher, list chains.Watchlist) *poller {
	p := &poller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			evs, err := w.Poll(ctx, list)
			p.mu.Lock()
			p.events = append(p.events, evs...)
			if err != nil && p.err == nil {
				p.err = err
			}
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(testSlotTime):
			}
		}
	}()
	return p
}

func (p *poller) drain() ([]chains.DepositEvent, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	evs := p.events
	p.events = nil
	return evs, p.err
}

func (p *poller) close() {
	close(p.stop)
	<-p.done
}

func TestWatcherDeposits(t *testing.T) {
	tc := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	counter := newRPCCounter(t, tc.dn.RPCURL)
	w, err := agentsolana.NewWatcher(agentsolana.WatcherConfig{
		RPCURL:   counter.URL,
		Mint:     tc.dn.Mint.String(),
		Required: testFinalizedDepth,
	})
	require.NoError(t, err)

	// 3 watched owners that get paid, placed in both getMultipleAccounts
	// batches, among 150 watched owners that never get a token account.
	a := newKey(t).PublicKey().String()
	b := newKey(t).PublicKey().String()
	c := newKey(t).PublicKey().String()
	var owners []string
	for i := 0; i < 150; i++ {
		owners = append(owners, newKey(t).PublicKey().String())
	}
	owners[0], owners[70], owners[140] = a, b, c
	list := agentsolana.NewWatchlist(owners)

	evs, err := w.Poll(ctx, list)
	require.NoError(t, err)
	require.Empty(t, evs)

	log := newDepositLog(t)
	expected := map[string]expectedDeposit{}
	faucet := tc.dn.Payer.PublicKey().String()
	send := func(to string, amount int64) {
		t.Helper()
		sig, err := tc.dn.Send(ctx, mustPub(t, to), uint64(amount))
		require.NoError(t, err)
		if list.Contains(to) {
			expected[sig.String()] = expectedDeposit{to: to, from: faucet, amount: amount}
		}
	}

	// An unwatched agent that will pay b through the ledger.
	agent := newKey(t)
	send(agent.PublicKey().String(), 10_000_000)

	p := startPoller(ctx, w, list)
	// Several deposits in a row to the same owner, often between two polls,
	// and payments to unwatched owners in between.
	send(a, 1_000_000)
	send(a, 2_500_000)
	send(newKey(t).PublicKey().String(), 1_000)
	send(a, 7)
	send(c, 42)
	send(newKey(t).PublicKey().String(), 2_000)

	sub, err := tc.ledger.Transfer(ctx, chains.TransferRequest{Key: agent, To: b, Amount: big.NewInt(3_000_000)})
	require.NoError(t, err)
	rcpt, err := tc.ledger.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, rcpt.State)
	expected[sub.TxHash] = expectedDeposit{to: b, from: agent.PublicKey().String(), amount: 3_000_000}

	for !log.allFinal(expected) {
		evs, err := p.drain()
		require.NoError(t, err)
		log.add(evs)
		select {
		case <-ctx.Done():
			t.Fatalf("timed out: %d events, seen %d, final %v", log.events, len(log.seen), log.final)
		case <-time.After(testSlotTime):
		}
	}
	p.close()
	evs, err = p.drain()
	require.NoError(t, err)
	log.add(evs)

	require.Len(t, log.seen, len(expected), "only deposits to watched owners")
	for tx, want := range expected {
		key := log.byTx[tx]
		got := log.seen[key]
		require.Equal(t, want.to, got.To, tx)
		require.Equal(t, want.from, got.From, tx)
		require.Equal(t, big.NewInt(want.amount).String(), got.Amount.String(), tx)
		require.Positive(t, got.Block)
		require.Empty(t, got.BlockHash)
		// Confirmations grew between seen and final.
		require.Greater(t, len(log.conf[key]), 1, "confirmations of %s: %v", tx, log.conf[key])
	}

	for tx, key := range log.byTx {
		t.Logf("%s: confirmations %v", tx[:8], log.conf[key])
	}

	// Later polls report nothing more, read the 150 token accounts in two
	// calls, and list signatures only of the recently paid accounts.
	const idlePolls = 5
	counter.take()
	for i := 0; i < idlePolls; i++ {
		evs, err := w.Poll(ctx, list)
		require.NoError(t, err)
		require.Empty(t, evs)
		time.Sleep(testSlotTime)
	}
	calls := counter.take()
	t.Logf("RPC calls in %d idle polls: %v", idlePolls, calls)
	require.Equal(t, 2*idlePolls, calls["getMultipleAccounts"])
	require.LessOrEqual(t, calls["getSignaturesForAddress"], 3*idlePolls)
	require.Zero(t, calls["getTransaction"])
	require.Zero(t, calls["getAccountInfo"])
	st := w.State()
	require.Empty(t, st.Pending)
	require.Positive(t, st.Next)
}

func TestWatcherResume(t *testing.T) {
	tc := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := agentsolana.WatcherConfig{RPCURL: tc.dn.RPCURL, Mint: tc.dn.Mint.String(), Required: testFinalizedDepth}

	owner := newKey(t).PublicKey().String()
	list := agentsolana.NewWatchlist([]string{owner})
	w1, err := agentsolana.NewWatcher(cfg)
	require.NoError(t, err)
	_, err = w1.Poll(ctx, list)
	require.NoError(t, err)

	log := newDepositLog(t)
	first, err := tc.dn.Send(ctx, mustPub(t, owner), 100)
	require.NoError(t, err)
	pollUntil(ctx, t, w1, list, log, func() bool { return len(log.seen) == 1 })
	require.Zero(t, log.final[log.byTx[first.String()]], "the test needs the first deposit still pending")

	// The first watcher stops; a deposit arrives while none runs.
	st := w1.State()
	require.Len(t, st.Pending, 1)
	second, err := tc.dn.Send(ctx, mustPub(t, owner), 200)
	require.NoError(t, err)

	cfg.State = st
	w2, err := agentsolana.NewWatcher(cfg)
	require.NoError(t, err)
	want := map[string]expectedDeposit{first.String(): {}, second.String(): {}}
	pollUntil(ctx, t, w2, list, log, func() bool { return log.allFinal(want) })
	require.Len(t, log.seen, 2)
	require.Equal(t, "200", log.seen[log.byTx[second.String()]].Amount.String())
}

// An address handed out just before a poll and paid before the poll that
// first lists it is still found: new addresses are searched Lookback slots
// back.
func TestWatcherLateAddress(t *testing.T) {
	tc := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := agentsolana.NewWatcher(agentsolana.WatcherConfig{RPCURL: tc.dn.RPCURL, Mint: tc.dn.Mint.String(), Required: testFinalizedDepth})
	require.NoError(t, err)

	early := newKey(t).PublicKey().String()
	_, err = w.Poll(ctx, agentsolana.NewWatchlist([]string{early}))
	require.NoError(t, err)

	late := newKey(t).PublicKey().String()
	sig, err := tc.dn.Send(ctx, mustPub(t, late), 5)
	require.NoError(t, err)
	for i := 0; i < 3; i++ { // the scan position moves past the payment
		_, err = w.Poll(ctx, agentsolana.NewWatchlist([]string{early}))
		require.NoError(t, err)
		time.Sleep(testSlotTime)
	}

	log := newDepositLog(t)
	list := agentsolana.NewWatchlist([]string{early, late})
	pollUntil(ctx, t, w, list, log, func() bool {
		return log.allFinal(map[string]expectedDeposit{sig.String(): {}})
	})
	require.Len(t, log.seen, 1)
	require.Equal(t, late, log.seen[log.byTx[sig.String()]].To)
}
