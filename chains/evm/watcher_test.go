package evm

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

func (c *testChain) watcher(tb testing.TB, viaRPC bool, confirmations uint64, state chains.WatcherState) *Watcher {
	tb.Helper()
	cfg := c.config(viaRPC)
	cfg.Confirmations = confirmations
	w, err := NewWatcher(context.Background(), cfg, state)
	require.NoError(tb, err)
	tb.Cleanup(w.Close)
	return w
}

// deposit sends amount from the payer to `to` and returns the block it
// landed in.
func (c *testChain) deposit(tb testing.TB, to common.Address, amount int64) (common.Hash, blockRef) {
	tb.Helper()
	h := c.payerTransfers(tb, []common.Address{to}, big.NewInt(amount), 1)[0]
	r, err := c.Client().TransactionReceipt(context.Background(), h)
	require.NoError(tb, err)
	return h, blockRef{Number: r.BlockNumber.Uint64(), Hash: r.BlockHash}
}

func poll(tb testing.TB, w *Watcher, wl chains.Watchlist) []chains.DepositEvent {
	tb.Helper()
	ev, err := w.Poll(context.Background(), wl)
	require.NoError(tb, err)
	return ev
}

func kinds(events []chains.DepositEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, fmt.Sprintf("%s:%d", e.Kind, e.Confirmations))
	}
	return out
}

// requireNothingTwice fails when the same report (kind, deposit, block,
// confirmations) appears more than once.
func requireNothingTwice(tb testing.TB, events []chains.DepositEvent) {
	tb.Helper()
	seen := map[string]bool{}
	for _, e := range events {
		k := fmt.Sprintf("%s|%s|%s|%d", e.Kind, e.Deposit.Key(), e.Deposit.BlockHash, e.Confirmations)
		require.False(tb, seen[k], "reported twice: %s", k)
		seen[k] = true
	}
}

// One watched recipient among 10,000 watched addresses and 1,000 unwatched
// recipients is found exactly once.
func TestWatcherFindsOneAmongMany(t *testing.T) {
	c := startChain(t, chains.Base)
	w := c.watcher(t, false, 1, chains.WatcherState{})
	w.cfg.ScanBatch = 2 // several eth_getLogs per poll

	_, target := newKey(t)
	watched := []string{target.Hex()}
	for i := 0; i < 10_000; i++ {
		watched = append(watched, randomAddress(t).Hex())
	}
	wl := NewWatchlist(watched)
	var recipients []common.Address
	for i := 0; i < 1_000; i++ {
		recipients = append(recipients, randomAddress(t))
		if i == 500 {
			recipients = append(recipients, target)
		}
	}
	amounts := big.NewInt(777)
	hashes := c.payerTransfers(t, recipients, amounts, 200)

	events := poll(t, w, wl)
	// The transfer is in the third of six blocks, so it is seen already
	// deeper than one, and final at once.
	rc, err := c.Client().TransactionReceipt(context.Background(), hashes[501])
	require.NoError(t, err)
	head, err := c.Client().BlockNumber(context.Background())
	require.NoError(t, err)
	depth := head - rc.BlockNumber.Uint64() + 1
	require.Equal(t, []string{fmt.Sprintf("seen:%d", depth), fmt.Sprintf("final:%d", depth)}, kinds(events))
	d := events[0].Deposit
	require.Equal(t, chains.Base, d.Chain)
	require.Equal(t, target.Hex(), d.To)
	require.Equal(t, hashes[501].Hex(), d.TxHash)
	require.Equal(t, big.NewInt(777), d.Amount)
	require.Equal(t, uint64(1), events[1].Required)

	c.Commit()
	c.Commit()
	require.Empty(t, poll(t, w, wl))
	require.Empty(t, w.State().Pending)
}

// Confirmations count up one per block; Final comes once, at the required depth.
func TestWatcherConfirmations(t *testing.T) {
	for _, chain := range chains.EVMChains {
		t.Run(string(chain), func(t *testing.T) {
			t.Parallel()
			c := startChain(t, chain)
			w := c.watcher(t, true, 4, chains.WatcherState{})
			_, to := newKey(t)
			wl := NewWatchlist([]string{to.Hex()})

			require.Empty(t, poll(t, w, wl))
			tx, blk := c.deposit(t, to, 5_000_000)
			var all []chains.DepositEvent
			ev := poll(t, w, wl)
			require.Equal(t, []string{"seen:1"}, kinds(ev))
			require.Equal(t, tx.Hex(), ev[0].Deposit.TxHash)
			require.Equal(t, blk.Hash.Hex(), ev[0].Deposit.BlockHash)
			require.Equal(t, blk.Number, ev[0].Deposit.Block)
			require.Equal(t, uint64(4), ev[0].Required)
			all = append(all, ev...)
			require.Empty(t, poll(t, w, wl), "no new block, nothing to say")
			require.Len(t, w.State().Pending, 1)

			for _, want := range []string{"confirmations:2", "confirmations:3", "final:4"} {
				c.Commit()
				ev := poll(t, w, wl)
				require.Equal(t, []string{want}, kinds(ev))
				all = append(all, ev...)
			}
			for i := 0; i < 3; i++ {
				c.Commit()
				require.Empty(t, poll(t, w, wl))
			}
			require.Empty(t, w.State().Pending)
			requireNothingTwice(t, all)
		})
	}
}

// A deposit whose block is reorged out is reported Removed; re-included in
// a new block it is Seen again, and that one goes Final.
func TestWatcherReorg(t *testing.T) {
	for _, viaRPC := range []bool{false, true} {
		t.Run(fmt.Sprintf("rpc=%v", viaRPC), func(t *testing.T) {
			ctx := context.Background()
			c := startChain(t, chains.Base)
			w := c.watcher(t, viaRPC, 3, chains.WatcherState{})
			_, to := newKey(t)
			wl := NewWatchlist([]string{to.Hex()})

			tx, old := c.deposit(t, to, 42)
			var all []chains.DepositEvent
			ev := poll(t, w, wl)
			require.Equal(t, []string{"seen:1"}, kinds(ev))
			all = append(all, ev...)
			raw, _, err := c.Client().TransactionByHash(ctx, tx)
			require.NoError(t, err)
			parent, err := c.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(old.Number-1))
			require.NoError(t, err)

			require.NoError(t, c.Fork(parent.Hash()))
			// The head is now below the scanned range: nothing can be said yet.
			require.Empty(t, poll(t, w, wl))

			// Re-send the same signed transaction and mine past the old
			// height. The pool may have taken it back already ("already
			// known"), or not yet have caught up with the fork ("nonce too
			// low"); either way the next blocks carry it.
			if err := c.Client().SendTransaction(ctx, raw); err != nil {
				require.Regexp(t, "already known|nonce too low", err.Error())
			}
			var moved blockRef
			for deadline := time.Now().Add(30 * time.Second); ; {
				require.True(t, time.Now().Before(deadline), "transaction not re-included")
				c.Commit()
				r, err := c.Client().TransactionReceipt(ctx, tx)
				if err == nil {
					moved = blockRef{Number: r.BlockNumber.Uint64(), Hash: r.BlockHash}
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			require.NotEqual(t, old.Hash, moved.Hash)

			ev = poll(t, w, wl)
			all = append(all, ev...)
			require.Len(t, ev, 2, kinds(ev))
			require.Equal(t, chains.DepositRemoved, ev[0].Kind)
			require.Equal(t, old.Hash.Hex(), ev[0].Deposit.BlockHash)
			require.Equal(t, chains.DepositSeen, ev[1].Kind)
			require.Equal(t, moved.Hash.Hex(), ev[1].Deposit.BlockHash)
			require.Equal(t, ev[0].Deposit.Key(), ev[1].Deposit.Key())

			finals := 0
			for i := 0; i < 5; i++ {
				c.Commit()
				ev := poll(t, w, wl)
				all = append(all, ev...)
				for _, e := range ev {
					require.NotEqual(t, chains.DepositSeen, e.Kind)
					require.NotEqual(t, chains.DepositRemoved, e.Kind)
					if e.Kind == chains.DepositFinal {
						finals++
						require.Equal(t, moved.Hash.Hex(), e.Deposit.BlockHash)
						require.Equal(t, big.NewInt(42), e.Deposit.Amount)
					}
				}
			}
			require.Equal(t, 1, finals)
			requireNothingTwice(t, all)
		})
	}
}

// A reorg of the scanned range with no pending deposit in it still rewinds
// the cursor: a deposit that only exists on the new branch is found.
func TestWatcherCursorReorg(t *testing.T) {
	ctx := context.Background()
	c := startChain(t, chains.Base)
	w := c.watcher(t, false, 2, chains.WatcherState{})
	_, to := newKey(t)
	wl := NewWatchlist([]string{to.Hex()})

	c.Commit()
	c.Commit()
	require.Empty(t, poll(t, w, wl))
	head, err := c.Client().HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, c.Fork(head.ParentHash))

	// The new branch carries a deposit at the height already scanned.
	tx, blk := c.deposit(t, to, 9)
	require.Equal(t, head.Number.Uint64(), blk.Number)
	ev := poll(t, w, wl)
	require.Equal(t, []string{"seen:1"}, kinds(ev))
	require.Equal(t, tx.Hex(), ev[0].Deposit.TxHash)
	c.Commit()
	require.Equal(t, []string{"final:2"}, kinds(poll(t, w, wl)))
}

// Several deposits pending at once, in different blocks and in one block,
// each go through their own confirmations and finish exactly once.
func TestWatcherManyPending(t *testing.T) {
	c := startChain(t, chains.Arbitrum)
	w := c.watcher(t, true, 3, chains.WatcherState{})
	_, a := newKey(t)
	_, b := newKey(t)
	wl := NewWatchlist([]string{a.Hex(), b.Hex()})

	var all []chains.DepositEvent
	c.payerTransfers(t, []common.Address{a, b}, big.NewInt(1), 2) // one block, two deposits
	all = append(all, poll(t, w, wl)...)
	c.deposit(t, a, 2)
	all = append(all, poll(t, w, wl)...)
	for i := 0; i < 4; i++ {
		c.Commit()
		all = append(all, poll(t, w, wl)...)
	}
	requireNothingTwice(t, all)
	counts := map[chains.DepositEventKind]int{}
	total := new(big.Int)
	for _, e := range all {
		counts[e.Kind]++
		if e.Kind == chains.DepositFinal {
			total.Add(total, e.Deposit.Amount)
		}
	}
	require.Equal(t, map[chains.DepositEventKind]int{chains.DepositSeen: 3, chains.DepositConfirmations: 3, chains.DepositFinal: 3}, counts, kinds(all))
	require.Equal(t, big.NewInt(4), total)
	require.Empty(t, w.State().Pending)
}

// A rewind below a deposit already final does not report it again.
func TestWatcherRewindBelowFinal(t *testing.T) {
	c := startChain(t, chains.Base)
	w := c.watcher(t, false, 1, chains.WatcherState{})
	_, to := newKey(t)
	wl := NewWatchlist([]string{to.Hex()})
	_, blk := c.deposit(t, to, 5)
	require.Equal(t, []string{"seen:1", "final:1"}, kinds(poll(t, w, wl)))

	// Forget every checkpoint but a bogus one just above the deposit, so the
	// next poll sees a reorg and has to rewind by the fallback depth, to
	// the deposit's block.
	c.Commit()
	w.st.checkpoints = []blockRef{{Number: blk.Number + 1, Hash: common.Hash{1}}}
	require.Empty(t, poll(t, w, wl))
	require.Greater(t, w.State().Next, blk.Number+1)
}

// A reorg that replaces already scanned blocks while the watcher is stopped
// is found by a watcher resumed from the saved State (checkpoints included,
// through the JSON the service persists): a deposit that exists only on the
// new branch, below the saved cursor, is reported Seen and Final exactly once.
func TestWatcherResumeAfterReorgWhileStopped(t *testing.T) {
	for _, perBlock := range []bool{true, false} {
		// perBlock: a checkpoint for every scanned block, so the rewind
		// stops at the fork point; otherwise only the last scanned block
		// has one and the rewind falls back to the confirmation depth.
		t.Run(fmt.Sprintf("checkpoint-per-block=%v", perBlock), func(t *testing.T) {
			ctx := context.Background()
			const confirmations = 4
			c := startChain(t, chains.Base)
			_, to := newKey(t)
			wl := NewWatchlist([]string{to.Hex()})

			// Scan a deposit-free range.
			w := c.watcher(t, true, confirmations, chains.WatcherState{})
			for i := 0; i < 6; i++ {
				c.Commit()
				if perBlock {
					require.Empty(t, poll(t, w, wl))
				}
			}
			require.Empty(t, poll(t, w, wl))
			saved := w.State()
			w.Close() // stopped
			oldNext := saved.Next
			require.NotEmpty(t, saved.Checkpoints)
			last := saved.Checkpoints[len(saved.Checkpoints)-1]
			require.Equal(t, oldNext-1, last.Number)
			oldTip, err := c.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(oldNext-1))
			require.NoError(t, err)
			require.Equal(t, oldTip.Hash().Hex(), last.Hash)
			raw, err := json.Marshal(saved)
			require.NoError(t, err)
			var state chains.WatcherState
			require.NoError(t, json.Unmarshal(raw, &state))
			require.Equal(t, saved, state)

			// Fork three blocks below the saved cursor; the new branch
			// carries a deposit below it, then grows past it.
			parent, err := c.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(oldNext-4))
			require.NoError(t, err)
			require.NoError(t, c.Fork(parent.Hash()))
			tx, blk := c.deposit(t, to, 31)
			require.Less(t, blk.Number, oldNext, "the deposit must be in a block the old watcher had scanned")
			for {
				head, err := c.Client().BlockNumber(ctx)
				require.NoError(t, err)
				if head >= oldNext+1 {
					break
				}
				c.Commit()
			}
			newTip, err := c.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(oldNext-1))
			require.NoError(t, err)
			require.NotEqual(t, oldTip.Hash(), newTip.Hash(), "the scanned tip was reorged")

			w2 := c.watcher(t, true, confirmations, state)
			var all []chains.DepositEvent
			for i := 0; i < confirmations+2; i++ {
				all = append(all, poll(t, w2, wl)...)
				c.Commit()
			}
			requireNothingTwice(t, all)
			counts := map[chains.DepositEventKind]int{}
			for _, e := range all {
				counts[e.Kind]++
				require.Equal(t, tx.Hex(), e.Deposit.TxHash)
				require.Equal(t, blk.Hash.Hex(), e.Deposit.BlockHash)
				require.Equal(t, big.NewInt(31), e.Deposit.Amount)
			}
			require.Equal(t, 1, counts[chains.DepositSeen], kinds(all))
			require.Equal(t, 1, counts[chains.DepositFinal], kinds(all))
			require.Zero(t, counts[chains.DepositRemoved], kinds(all))
			require.Empty(t, w2.State().Pending)
		})
	}
}

// A deposit pending when the watcher stopped, whose block was reorged out
// while it was stopped, is reported Removed by the resumed watcher, then
// Seen and Final once in the block that re-includes it.
func TestWatcherResumeAfterReorgMovesPending(t *testing.T) {
	ctx := context.Background()
	const confirmations = 5
	c := startChain(t, chains.Arbitrum)
	_, to := newKey(t)
	wl := NewWatchlist([]string{to.Hex()})

	w := c.watcher(t, false, confirmations, chains.WatcherState{})
	c.Commit()
	require.Empty(t, poll(t, w, wl))
	tx, old := c.deposit(t, to, 7)
	require.Equal(t, []string{"seen:1"}, kinds(poll(t, w, wl)))
	c.Commit()
	require.Equal(t, []string{"confirmations:2"}, kinds(poll(t, w, wl)))
	state := w.State()
	require.Len(t, state.Pending, 1)
	w.Close()

	raw, _, err := c.Client().TransactionByHash(ctx, tx)
	require.NoError(t, err)
	parent, err := c.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(old.Number-1))
	require.NoError(t, err)
	require.NoError(t, c.Fork(parent.Hash()))
	// As in TestWatcherReorg: the pool may or may not have taken the
	// transaction back yet; either way the next blocks carry it.
	if err := c.Client().SendTransaction(ctx, raw); err != nil {
		require.Regexp(t, "already known|nonce too low", err.Error())
	}
	var moved blockRef
	for deadline := time.Now().Add(30 * time.Second); ; {
		require.True(t, time.Now().Before(deadline), "transaction not re-included")
		c.Commit()
		if r, err := c.Client().TransactionReceipt(ctx, tx); err == nil {
			moved = blockRef{Number: r.BlockNumber.Uint64(), Hash: r.BlockHash}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.NotEqual(t, old.Hash, moved.Hash)
	for {
		head, err := c.Client().BlockNumber(ctx)
		require.NoError(t, err)
		if head >= state.Next {
			break
		}
		c.Commit()
	}

	w2 := c.watcher(t, false, confirmations, state)
	var events []chains.DepositEvent
	for i := 0; i < confirmations+2; i++ {
		events = append(events, poll(t, w2, wl)...)
		c.Commit()
	}
	requireNothingTwice(t, events)
	var got []string
	for _, e := range events {
		require.Equal(t, tx.Hex(), e.Deposit.TxHash)
		switch e.Kind {
		case chains.DepositRemoved:
			require.Equal(t, old.Hash.Hex(), e.Deposit.BlockHash)
			got = append(got, "removed")
		case chains.DepositSeen, chains.DepositFinal:
			require.Equal(t, moved.Hash.Hex(), e.Deposit.BlockHash)
			got = append(got, string(e.Kind))
		}
	}
	require.Equal(t, []string{"removed", "seen", "final"}, got, kinds(events))
}
