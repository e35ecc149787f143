package solana_test

import (
	"context"
	"encoding/json"
	"maps"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/chainstest"
	"agentpay/chains/devnet"
	agentsolana "agentpay/chains/solana"
)

type expectedDeposit struct {
	to, from string
	amount   int64
}

func newDepositLog(t *testing.T) *chainstest.DepositLog {
	return chainstest.NewDepositLog(t, chains.Solana, testFinalizedDepth)
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

	// 3 watched owners that get paid among 150 watched owners that never
	// get a token account.
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

	txs := slices.Collect(maps.Keys(expected))
	for !log.Final(txs...) {
		evs, err := p.drain()
		require.NoError(t, err)
		log.Add(evs)
		log.Wait(ctx, testSlotTime)
	}
	p.close()
	evs, err = p.drain()
	require.NoError(t, err)
	log.Add(evs)

	require.Equal(t, len(expected), log.Seen(), "only deposits to watched owners")
	for tx, want := range expected {
		got, _ := log.Deposit(tx)
		require.Equal(t, want.to, got.To, tx)
		require.Equal(t, want.from, got.From, tx)
		require.Equal(t, big.NewInt(want.amount).String(), got.Amount.String(), tx)
		require.Positive(t, got.Block)
		require.Empty(t, got.BlockHash)
		// Confirmations grew between seen and final.
		require.Greater(t, len(log.Confirmations(tx)), 1, "confirmations of %s: %v", tx, log.Confirmations(tx))
		t.Logf("%s: confirmations %v", tx[:8], log.Confirmations(tx))
	}

	// Later polls report nothing more and read only what is new: the slot,
	// the blocks produced since, one getBlock each; never the watched
	// addresses' accounts or signatures.
	const idlePolls = 5
	counter.take()
	before := w.State().Next
	for i := 0; i < idlePolls; i++ {
		evs, err := w.Poll(ctx, list)
		require.NoError(t, err)
		require.Empty(t, evs)
		time.Sleep(testSlotTime)
	}
	calls := counter.take()
	t.Logf("RPC calls in %d idle polls: %v", idlePolls, calls)
	require.Equal(t, idlePolls, calls["getSlot"])
	// No getBlocks when no slot passed since the poll before.
	require.LessOrEqual(t, calls["getBlocks"], idlePolls)
	require.LessOrEqual(t, uint64(calls["getBlock"]), w.State().Next-before, "one getBlock per new slot at most")
	for _, m := range []string{"getMultipleAccounts", "getSignaturesForAddress", "getTransaction", "getAccountInfo", "getSignatureStatuses"} {
		require.Zero(t, calls[m], m)
	}
	st := w.State()
	require.Empty(t, st.Pending)
	require.Positive(t, st.Next)
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
	log.PollUntil(ctx, w, list, testSlotTime, func() bool { return log.Final(sig.String()) })
	require.Equal(t, 1, log.Seen())
	got, _ := log.Deposit(sig.String())
	require.Equal(t, late, got.To)
}

// A slot holding many transactions (200 transfers sent at once into 500 ms
// slots) yields every deposit to a watched owner once, and none to the
// others.
func TestWatcherManyTransactionsInASlot(t *testing.T) {
	tc := startChainWith(t, devnet.SolanaConfig{SlotTime: 500 * time.Millisecond, FinalizedDepth: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := agentsolana.NewWatcher(agentsolana.WatcherConfig{RPCURL: tc.dn.RPCURL, Mint: tc.dn.Mint.String(), Required: 4})
	require.NoError(t, err)

	recipients := make([]solana.PublicKey, 200)
	var watched []string
	for i := range recipients {
		recipients[i] = newKey(t).PublicKey()
		if i%5 == 0 {
			watched = append(watched, recipients[i].String())
		}
	}
	list := agentsolana.NewWatchlist(watched)
	_, err = w.Poll(ctx, list)
	require.NoError(t, err)

	sigs, err := tc.dn.SendAll(ctx, recipients, 1_000)
	require.NoError(t, err)
	expected := map[string]string{} // signature -> watched owner
	for i, sig := range sigs {
		if i%5 == 0 {
			expected[sig.String()] = recipients[i].String()
		}
	}

	log := chainstest.NewDepositLog(t, chains.Solana, 4)
	log.PollUntil(ctx, w, list, 100*time.Millisecond, func() bool {
		return log.Final(slices.Collect(maps.Keys(expected))...)
	})
	require.Equal(t, len(expected), log.Seen(), "only deposits to watched owners")
	perSlot := map[uint64]int{}
	for sig, owner := range expected {
		got, ok := log.Deposit(sig)
		require.True(t, ok, sig)
		require.Equal(t, owner, got.To)
		require.Equal(t, "1000", got.Amount.String())
		require.Equal(t, tc.dn.Payer.PublicKey().String(), got.From)
		perSlot[got.Block]++
	}
	// How full the busiest slot was, read back from the node.
	busiest := 0
	for slot := range perSlot {
		b, err := tc.dn.Client().GetBlockWithOpts(ctx, slot, &rpc.GetBlockOpts{
			TransactionDetails: rpc.TransactionDetailsSignatures, Commitment: rpc.CommitmentConfirmed,
		})
		require.NoError(t, err)
		busiest = max(busiest, len(b.Signatures))
	}
	t.Logf("200 transfers; watched deposits per slot %v; busiest slot %d transactions", perSlot, busiest)
	require.GreaterOrEqual(t, busiest, 20, "the test needs a slot with many transactions")
}

// Real clusters skip slots (a leader produced no block): getBlocks leaves
// them out, and the watcher reads only the blocks that exist while its
// cursor moves past the skipped slots too.
func TestWatcherSkippedSlots(t *testing.T) {
	tc := startChainWith(t, devnet.SolanaConfig{SkipEvery: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	counter := newRPCCounter(t, tc.dn.RPCURL)
	w, err := agentsolana.NewWatcher(agentsolana.WatcherConfig{RPCURL: counter.URL, Mint: tc.dn.Mint.String(), Required: testFinalizedDepth})
	require.NoError(t, err)
	owner := newKey(t).PublicKey().String()
	list := agentsolana.NewWatchlist([]string{owner})
	_, err = w.Poll(ctx, list)
	require.NoError(t, err)
	start := w.State().Next
	counter.take()

	log := newDepositLog(t)
	var sigs []string
	for _, amount := range []uint64{1, 20, 300} {
		sig, err := tc.dn.Send(ctx, mustPub(t, owner), amount)
		require.NoError(t, err)
		sigs = append(sigs, sig.String())
		_, err = tc.dn.Send(ctx, newKey(t).PublicKey(), amount)
		require.NoError(t, err)
		time.Sleep(3 * testSlotTime) // empty slots in between, some skipped
	}
	log.PollUntil(ctx, w, list, testSlotTime, func() bool { return log.Final(sigs...) })
	require.Equal(t, len(sigs), log.Seen())

	end := w.State().Next - 1
	produced, err := tc.dn.Client().GetBlocks(ctx, start, &end, rpc.CommitmentConfirmed)
	require.NoError(t, err)
	calls := counter.take()
	t.Logf("slots %d-%d: %d produced; calls %v", start, end, len(produced), calls)
	require.Less(t, uint64(len(produced)), end-start+1, "the devnet skipped slots")
	require.Equal(t, len(produced), calls["getBlock"], "one getBlock per produced slot, none for a skipped one")
}

// A watcher resumed from its saved state (as JSON, as the service keeps it
// in chain_cursors) reports a deposit it had seen only as it progresses,
// never seen again, and finds the deposits made while it was stopped.
func TestWatcherResumesWithoutReportingTwice(t *testing.T) {
	tc := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner := newKey(t).PublicKey().String()
	list := agentsolana.NewWatchlist([]string{owner})
	cfg := agentsolana.WatcherConfig{RPCURL: tc.dn.RPCURL, Mint: tc.dn.Mint.String(), Required: testFinalizedDepth}
	w1, err := agentsolana.NewWatcher(cfg)
	require.NoError(t, err)
	_, err = w1.Poll(ctx, list)
	require.NoError(t, err)

	log := newDepositLog(t)
	first, err := tc.dn.Send(ctx, mustPub(t, owner), 100)
	require.NoError(t, err)
	log.PollUntil(ctx, w1, list, testSlotTime, func() bool { _, ok := log.Deposit(first.String()); return ok })
	require.False(t, log.Final(first.String()), "stopped before final")

	for restart := 0; restart < 3; restart++ {
		saved, err := json.Marshal(w1.State())
		require.NoError(t, err)
		var st chains.WatcherState
		require.NoError(t, json.Unmarshal(saved, &st))
		require.Len(t, st.Pending, 1)
		cfg.State = st
		w1, err = agentsolana.NewWatcher(cfg)
		require.NoError(t, err)
		// The new watcher goes over the same slots' transfers again (its
		// recent transfers are not saved): still not seen twice.
		log.PollUntil(ctx, w1, list, testSlotTime, func() bool { return true })
	}
	second, err := tc.dn.Send(ctx, mustPub(t, owner), 200)
	require.NoError(t, err)
	log.PollUntil(ctx, w1, list, testSlotTime, func() bool { return log.Final(first.String(), second.String()) })
	require.Equal(t, 2, log.Seen())
}
