package evm

import (
	"context"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"agentpay/chains"
)

// Watcher implements chains.Watcher on one EVM chain.
//
// It asks eth_getLogs for the token's Transfer logs only (filtered by
// contract and event topic, never by recipient) and matches each log's
// recipient against the watchlist set, so a scan costs in proportion to the
// transfers in the range, not to the number of watched addresses.
//
// Reorgs: the watcher remembers recent checkpoints (the hash of the last
// block of each scanned range, and of each pending deposit's block). Every
// Poll checks the latest checkpoint and every pending deposit's block
// against the canonical chain; a mismatch reports the deposit Removed and
// rewinds the scan cursor to the newest checkpoint still canonical, so a
// deposit re-included elsewhere is found and reported Seen again. The
// checkpoints are part of State, so this holds across a restart too.
//
// Events per deposit: Seen (carrying its confirmations), then Confirmations
// each time the count changes while below the requirement, then Final once,
// in place of the Confirmations event for the required depth. A deposit
// already deep enough when first found is reported Seen and Final in one Poll.
type Watcher struct {
	cfg    Config
	client Client
	dialed *ethclient.Client
	token  common.Address

	mu sync.Mutex // one Poll at a time
	st watchState
	// head is the head the latest poll read (Head).
	head atomic.Uint64
}

var _ chains.Watcher = (*Watcher)(nil)

// NewWatcher builds a watcher that resumes from state (zero state: start at
// cfg.StartBlock, or the head when that is zero).
//
// state.Checkpoints (as State exports them) are restored, so the first Poll
// checks the last scanned block against the chain before scanning further:
// when a reorg replaced already scanned blocks while the watcher was
// stopped, it rewinds to the newest checkpoint still canonical and rescans
// the new branch. A state without checkpoints (saved before they existed)
// detects such a reorg only through its pending deposits' block hashes.
func NewWatcher(ctx context.Context, cfg Config, state chains.WatcherState) (*Watcher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	client, dialed, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	w := &Watcher{cfg: cfg, client: client, dialed: dialed, token: common.HexToAddress(cfg.USDC)}
	if err := w.init(ctx, state); err != nil {
		if dialed != nil {
			dialed.Close()
		}
		return nil, err
	}
	return w, nil
}

// NewWatcher builds a watcher on the ledger's connection and config (its
// gas key aside), so a caller that rebuilds watchers (after an error, or
// per scan) opens no new connection each time.
func (l *Ledger) NewWatcher(ctx context.Context, state chains.WatcherState) (*Watcher, error) {
	cfg := l.cfg
	cfg.Client = l.client
	cfg.GasKey = nil
	return NewWatcher(ctx, cfg, state)
}

func (w *Watcher) init(ctx context.Context, state chains.WatcherState) error {
	if _, _, err := checkChain(ctx, w.cfg, w.client); err != nil {
		return err
	}
	w.st = watchState{next: state.Next, pending: map[string]*tracked{}, final: map[string]finalized{}}
	if w.st.next == 0 {
		w.st.next = w.cfg.StartBlock
		if w.st.next == 0 {
			head, err := w.client.BlockNumber(ctx)
			if err != nil {
				return fmt.Errorf("evm: %s: reading head: %w", w.cfg.Chain, err)
			}
			w.st.next = head
		}
	}
	// Block 0 holds no logs; starting at 1 keeps next-1 a real block.
	w.st.next = max(w.st.next, 1)
	for _, cp := range state.Checkpoints {
		// A checkpoint at or above next is not of a scanned block; one
		// whose hash does not parse is unusable (the fallback rewind depth
		// still applies without it).
		raw, err := hexutil.Decode(cp.Hash)
		if cp.Number >= w.st.next || err != nil || len(raw) != common.HashLength {
			w.cfg.Logger.Warn("evm: ignoring a saved watcher checkpoint", "chain", w.cfg.Chain,
				"block", cp.Number, "hash", cp.Hash, "next", w.st.next)
			continue
		}
		w.st.addCheckpoint(blockRef{Number: cp.Number, Hash: common.BytesToHash(raw)}, w.cfg.ReorgWindow)
	}
	for _, d := range state.Pending {
		d.Amount = new(big.Int).Set(d.Amount)
		// reported stays 0: the first Poll reports the current count, which
		// may have moved while the watcher was stopped.
		w.st.pending[d.Key()] = &tracked{dep: d, hash: common.HexToHash(d.BlockHash)}
	}
	return nil
}

// Close releases the connection when NewWatcher dialed it.
func (w *Watcher) Close() {
	if w.dialed != nil {
		w.dialed.Close()
	}
}

// State is the watcher's resumable position: the next block to scan, the
// deposits seen but not final, and the recent checkpoints a resumed watcher
// verifies first.
//
// Only the checkpoints a rewind within the configured reorg depth can need
// are exported, so the persisted state stays small: those at most
// Confirmations blocks below the cursor, and the newest one below them as
// the anchor a rewind falls back to.
func (w *Watcher) State() chains.WatcherState {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := chains.WatcherState{Next: w.st.next}
	for _, t := range w.st.sortedPending() {
		d := t.dep
		d.Amount = new(big.Int).Set(d.Amount)
		out.Pending = append(out.Pending, d)
	}
	cps := w.st.checkpoints
	if w.st.next > w.cfg.Confirmations+1 {
		floor := w.st.next - 1 - w.cfg.Confirmations
		// First checkpoint at or above floor; keep one more below it.
		i := sort.Search(len(cps), func(i int) bool { return cps[i].Number >= floor })
		cps = cps[max(i-1, 0):]
	}
	for _, cp := range cps {
		out.Checkpoints = append(out.Checkpoints, chains.BlockRef{Number: cp.Number, Hash: cp.Hash.Hex()})
	}
	return out
}

// Head is the chain head the latest Poll read.
func (w *Watcher) Head() uint64 { return w.head.Load() }

// Poll scans new blocks and re-checks pending deposits. It is
// all-or-nothing: on error the watcher's state is unchanged and the next
// Poll redoes the work, so no event is lost with a discarded result.
func (w *Watcher) Poll(ctx context.Context, watched chains.Watchlist) ([]chains.DepositEvent, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.st.clone()
	events, err := w.poll(ctx, &st, watched)
	if err != nil {
		return nil, fmt.Errorf("evm: %s: poll: %w", w.cfg.Chain, err)
	}
	w.st = st
	return events, nil
}

func (w *Watcher) poll(ctx context.Context, st *watchState, watched chains.Watchlist) ([]chains.DepositEvent, error) {
	head, _, err := blockAt(ctx, w.client, nil)
	if err != nil {
		return nil, fmt.Errorf("reading head: %w", err)
	}
	w.head.Store(head.Number)
	// A head below what we scanned is a node lagging behind (or a reorg to a
	// shorter chain): wait until it catches up, when hashes can be compared.
	if head.Number+1 < st.next {
		return nil, nil
	}
	hashes := map[uint64]blockRef{head.Number: head}
	canonical := func(n uint64) (common.Hash, error) {
		if r, ok := hashes[n]; ok {
			return r.Hash, nil
		}
		r, found, err := blockAt(ctx, w.client, &n)
		if err != nil {
			return common.Hash{}, err
		}
		if !found {
			r = blockRef{Number: n}
		}
		hashes[n] = r
		return r.Hash, nil
	}

	var events []chains.DepositEvent
	emit := func(kind chains.DepositEventKind, t *tracked, conf uint64) {
		d := t.dep
		d.Amount = new(big.Int).Set(d.Amount)
		events = append(events, chains.DepositEvent{Kind: kind, Deposit: d, Confirmations: conf, Required: w.cfg.Confirmations})
	}

	// 1. Has the scanned range been reorged? A block hash commits to all
	// its ancestors, so checking the newest checkpoint covers every block
	// below it.
	if cp, ok := st.lastCheckpoint(); ok {
		h, err := canonical(cp.Number)
		if err != nil {
			return nil, err
		}
		if h != cp.Hash {
			if err := w.rewind(st, cp.Number, canonical); err != nil {
				return nil, err
			}
		}
	}

	// 2. Pending deposits whose block left the canonical chain are removed
	// and their range rescanned. Their blocks are fetched in one batch.
	pending := st.sortedPending()
	var heights []uint64
	for _, t := range pending {
		// pending is sorted by block, so a repeated height is the last one.
		if _, ok := hashes[t.dep.Block]; !ok && (len(heights) == 0 || heights[len(heights)-1] != t.dep.Block) {
			heights = append(heights, t.dep.Block)
		}
	}
	if len(heights) > 0 {
		refs, err := blocksAt(ctx, w.client, heights)
		if err != nil {
			return nil, err
		}
		for _, n := range heights {
			r, ok := refs[n]
			if !ok {
				r = blockRef{Number: n}
			}
			hashes[n] = r
		}
	}
	for _, t := range pending {
		h, err := canonical(t.dep.Block)
		if err != nil {
			return nil, err
		}
		if h == t.hash {
			continue
		}
		emit(chains.DepositRemoved, t, 0)
		delete(st.pending, t.dep.Key())
		if err := w.rewind(st, t.dep.Block, canonical); err != nil {
			return nil, err
		}
	}

	// 3. Scan new blocks, in batches, bounded per poll.
	end := min(head.Number, st.next+w.cfg.MaxScanPerPoll-1)
	for from := st.next; from <= end; {
		to := min(end, from+w.cfg.ScanBatch-1)
		logs, toRef, err := w.scan(ctx, from, to, hashes)
		if err != nil {
			return nil, err
		}
		for i := range logs {
			d, ok := w.deposit(&logs[i], watched)
			if !ok {
				continue
			}
			if f, ok := st.final[d.Key()]; ok {
				// Rescanned after a rewind below a deposit already final.
				// A final deposit in another block means a reorg deeper
				// than the required confirmations: it stays final (it was
				// reported so), but that is worth a loud log line.
				if f.hash != logs[i].BlockHash {
					w.cfg.Logger.Error("evm: final deposit moved by a reorg deeper than the required confirmations",
						"chain", w.cfg.Chain, "deposit", d.Key(), "final_block", f.block, "new_block", d.Block)
				}
				continue
			}
			if old, ok := st.pending[d.Key()]; ok {
				if old.hash == logs[i].BlockHash {
					continue // rescanned after a rewind: already reported
				}
				// Moved between steps 2 and 3 by a reorg in between.
				emit(chains.DepositRemoved, old, 0)
			}
			t := &tracked{dep: d, hash: logs[i].BlockHash}
			t.reported = head.Number - d.Block + 1
			st.pending[d.Key()] = t
			st.addCheckpoint(blockRef{Number: d.Block, Hash: t.hash}, w.cfg.ReorgWindow)
			emit(chains.DepositSeen, t, t.reported)
		}
		st.addCheckpoint(toRef, w.cfg.ReorgWindow)
		st.next = to + 1
		from = to + 1
	}

	// 4. Confirmations and finality. Every pending deposit is canonical
	// here: older ones were checked in step 2, new ones come from a range
	// whose last block was stable across the scan.
	for _, t := range st.sortedPending() {
		if t.dep.Block > head.Number {
			continue
		}
		conf := head.Number - t.dep.Block + 1
		switch {
		case conf >= w.cfg.Confirmations:
			emit(chains.DepositFinal, t, conf)
			delete(st.pending, t.dep.Key())
			st.final[t.dep.Key()] = finalized{block: t.dep.Block, hash: t.hash}
		case conf != t.reported:
			t.reported = conf
			emit(chains.DepositConfirmations, t, conf)
		}
	}
	st.pruneFinal(w.cfg.MaxScanPerPoll + 2*w.cfg.Confirmations)
	return events, nil
}

// scan fetches the token's Transfer logs in [from, to]. The hash of block
// `to` is read before and after the query; if it changed, a reorg raced the
// query and the logs may belong to either chain, so the query is retried.
func (w *Watcher) scan(ctx context.Context, from, to uint64, hashes map[uint64]blockRef) ([]types.Log, blockRef, error) {
	const attempts = 3
	for i := 0; i < attempts; i++ {
		before, ok := hashes[to]
		if !ok || i > 0 {
			r, found, err := blockAt(ctx, w.client, &to)
			if err != nil {
				return nil, blockRef{}, err
			}
			if !found {
				return nil, blockRef{}, fmt.Errorf("block %d not found", to)
			}
			before = r
		}
		logs, err := w.client.FilterLogs(ctx, ethereum.FilterQuery{
			FromBlock: new(big.Int).SetUint64(from),
			ToBlock:   new(big.Int).SetUint64(to),
			Addresses: []common.Address{w.token},
			Topics:    [][]common.Hash{{transferTopic}},
		})
		if err != nil {
			return nil, blockRef{}, fmt.Errorf("eth_getLogs %d-%d: %w", from, to, err)
		}
		after, found, err := blockAt(ctx, w.client, &to)
		if err != nil {
			return nil, blockRef{}, err
		}
		if found && after.Hash == before.Hash {
			hashes[to] = after
			return logs, after, nil
		}
	}
	return nil, blockRef{}, fmt.Errorf("block %d kept changing during the scan", to)
}

// deposit decodes a Transfer log to a watched address. A transfer of zero
// is no deposit: ERC-20 lets anyone send one to any address, and it moves
// nothing.
func (w *Watcher) deposit(l *types.Log, watched chains.Watchlist) (chains.Deposit, bool) {
	if watched == nil || l.Removed || len(l.Topics) != 3 || l.Topics[0] != transferTopic || len(l.Data) != 32 {
		return chains.Deposit{}, false
	}
	to := common.BytesToAddress(l.Topics[2][12:])
	amount := new(big.Int).SetBytes(l.Data)
	if amount.Sign() == 0 || !watched.Contains(normalized(to)) {
		return chains.Deposit{}, false
	}
	return chains.Deposit{
		Chain:     w.cfg.Chain,
		TxHash:    l.TxHash.Hex(),
		Index:     l.Index,
		From:      common.BytesToAddress(l.Topics[1][12:]).Hex(),
		To:        to.Hex(),
		Amount:    amount,
		Block:     l.BlockNumber,
		BlockHash: l.BlockHash.Hex(),
	}, true
}

// rewind moves the cursor back below a block found non-canonical at height
// bad: to just after the newest checkpoint under it that is still
// canonical. Without one, it goes back by the confirmation depth, the
// deepest reorg the configuration allows for.
func (w *Watcher) rewind(st *watchState, bad uint64, canonical func(uint64) (common.Hash, error)) error {
	target := uint64(1)
	if bad > w.cfg.Confirmations {
		target = bad - w.cfg.Confirmations
	}
	for i := len(st.checkpoints) - 1; i >= 0; i-- {
		cp := st.checkpoints[i]
		if cp.Number >= bad {
			continue
		}
		h, err := canonical(cp.Number)
		if err != nil {
			return err
		}
		if h == cp.Hash {
			target = cp.Number + 1
			break
		}
	}
	// Checkpoints at or above the target describe the old chain.
	st.checkpoints = slices.DeleteFunc(st.checkpoints, func(cp blockRef) bool { return cp.Number >= target })
	st.next = min(st.next, target)
	return nil
}

// watchState is what a Poll changes; Poll works on a copy and keeps it only
// when the whole poll succeeded.
type watchState struct {
	next        uint64
	checkpoints []blockRef // ascending by number
	pending     map[string]*tracked
	// final remembers recently final deposits, so a rescan after a rewind
	// does not report them again. Kept in memory only: after a restart a
	// rewind below a final deposit (rare: it needs a reorg while stopped)
	// can report it again.
	final map[string]finalized
}

type finalized struct {
	block uint64
	hash  common.Hash
}

// pruneFinal forgets final deposits more than keep blocks below the cursor,
// deeper than any rewind goes.
func (s *watchState) pruneFinal(keep uint64) {
	if s.next <= keep {
		return
	}
	for k, f := range s.final {
		if f.block < s.next-keep {
			delete(s.final, k)
		}
	}
}

// tracked is a pending deposit.
type tracked struct {
	dep      chains.Deposit
	hash     common.Hash
	reported uint64 // confirmations last reported
}

func (s watchState) clone() watchState {
	c := watchState{next: s.next, checkpoints: slices.Clone(s.checkpoints), pending: make(map[string]*tracked, len(s.pending)), final: maps.Clone(s.final)}
	for k, t := range s.pending {
		cp := *t
		c.pending[k] = &cp
	}
	if c.final == nil {
		c.final = map[string]finalized{}
	}
	return c
}

func (s *watchState) lastCheckpoint() (blockRef, bool) {
	if len(s.checkpoints) == 0 {
		return blockRef{}, false
	}
	return s.checkpoints[len(s.checkpoints)-1], true
}

// addCheckpoint records a block's hash, keeping the list sorted and at most
// window long (the oldest go first).
func (s *watchState) addCheckpoint(r blockRef, window int) {
	i := sort.Search(len(s.checkpoints), func(i int) bool { return s.checkpoints[i].Number >= r.Number })
	if i < len(s.checkpoints) && s.checkpoints[i].Number == r.Number {
		s.checkpoints[i] = r
	} else {
		s.checkpoints = slices.Insert(s.checkpoints, i, r)
	}
	if over := len(s.checkpoints) - window; over > 0 {
		s.checkpoints = slices.Delete(s.checkpoints, 0, over)
	}
}

// sortedPending lists pending deposits in chain order, so events come out
// in a stable order.
func (s *watchState) sortedPending() []*tracked {
	out := make([]*tracked, 0, len(s.pending))
	for _, t := range s.pending {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].dep, out[j].dep
		if a.Block != b.Block {
			return a.Block < b.Block
		}
		if a.TxHash != b.TxHash {
			return a.TxHash < b.TxHash
		}
		return a.Index < b.Index
	})
	return out
}
