package solana

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/jsonrpc"

	"agentpay/chains"
)

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// RPCURL is the JSON-RPC endpoint of a Solana node.
	RPCURL string
	// Mint is the USDC mint address (base58).
	Mint string
	// Required is the depth reported as DepositEvent.Required, the number of
	// slots after which a deposit is usually finalized. Finality itself comes
	// from the node's finalized commitment, never from this count. Default 32.
	Required uint64
	// MaxSlotsPerPoll bounds the slots one Poll scans, so a watcher far
	// behind (after downtime) catches up over several polls, saving its
	// position after each. Default 150 (a minute of slots).
	MaxSlotsPerPoll uint64
	// Parallel is how many getBlock calls are in flight at once while
	// catching up. Default 4.
	Parallel int
	// Lookback is how many slots of the mint's recent transfers are kept in
	// memory and matched again on every poll, so an address that joins the
	// watchlist is found even when it was paid in the moment between being
	// handed out and the first poll that lists it. Default 150.
	Lookback uint64
	// State resumes a previous watcher (see Watcher.State).
	State chains.WatcherState
	// RPCTimeout bounds each call to the node. Default
	// chains.DefaultRPCTimeout.
	RPCTimeout time.Duration
}

// Watcher implements chains.Watcher: it finds USDC deposits to the
// associated token accounts of watched owners and follows them to finality.
//
// It follows transfers, not addresses, as the EVM watcher does with
// eth_getLogs: each poll lists the slots produced since its cursor
// (getBlocks at commitment confirmed; skipped slots are not listed) and
// reads each one's transactions (getBlock, transactionDetails "accounts":
// account keys and token balances, no instructions or logs). A deposit is a
// rise of a token account's balance of the mint between the transaction's
// preTokenBalances and postTokenBalances, whose owner is in the watchlist
// (a hash set) and which is that owner's associated token account, the one
// the service sweeps from. So a poll costs in proportion to the slots and
// transfers since the last one, not to the addresses watched. Deposits not
// yet final are re-checked with getSignatureStatuses.
type Watcher struct {
	rpc      *rpc.Client
	mint     solana.PublicKey
	mintB58  string
	required uint64
	maxSlots uint64
	parallel int
	lookback uint64

	mu sync.Mutex
	// next is the first slot not yet scanned.
	next uint64
	// recent are the mint's credits of the last Lookback slots, oldest
	// first, matched again against each poll's watchlist.
	recent  []credit
	ataOf   map[solana.PublicKey]solana.PublicKey // owner -> ATA, for owners that matched
	pending map[string]*pendingDeposit            // by Deposit.Key()
	finals  map[string]uint64                     // recently final keys -> slot
	outbox  []chains.DepositEvent
	// head is the confirmed slot the latest poll read (Head).
	head atomic.Uint64
}

var _ chains.Watcher = (*Watcher)(nil)

// credit is a rise of one token account's balance of the mint in one
// transaction: a deposit when its owner is watched and the account is the
// owner's ATA.
type credit struct {
	slot    uint64
	sig     solana.Signature
	index   int // the token account's position in the transaction's account keys
	account solana.PublicKey
	owner   solana.PublicKey
	from    string
	amount  uint64
}

type pendingDeposit struct {
	dep           chains.Deposit
	sig           solana.Signature
	confirmations uint64
	missing       int
}

// NewWatcher returns a watcher positioned at cfg.State; with a zero state it
// starts at the confirmed slot of its first poll.
func NewWatcher(cfg WatcherConfig) (*Watcher, error) {
	if cfg.RPCURL == "" {
		return nil, errors.New("solana: RPC URL is required")
	}
	mint, err := solana.PublicKeyFromBase58(cfg.Mint)
	if err != nil {
		return nil, fmt.Errorf("solana: mint %q: %w", cfg.Mint, err)
	}
	if cfg.Required == 0 {
		cfg.Required = 32
	}
	if cfg.MaxSlotsPerPoll == 0 {
		cfg.MaxSlotsPerPoll = 150
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 4
	}
	if cfg.Lookback == 0 {
		cfg.Lookback = 150
	}
	client, err := newRPC(cfg.RPCURL, cfg.RPCTimeout)
	if err != nil {
		return nil, fmt.Errorf("solana: RPC URL: %w", err)
	}
	w := &Watcher{
		rpc:      client,
		mint:     mint,
		mintB58:  mint.String(),
		required: cfg.Required,
		maxSlots: cfg.MaxSlotsPerPoll,
		parallel: cfg.Parallel,
		lookback: cfg.Lookback,
		next:     cfg.State.Next,
		ataOf:    make(map[solana.PublicKey]solana.PublicKey),
		pending:  make(map[string]*pendingDeposit),
		finals:   make(map[string]uint64),
	}
	for _, d := range cfg.State.Pending {
		sig, err := solana.SignatureFromBase58(d.TxHash)
		if err != nil {
			return nil, fmt.Errorf("solana: resume: pending deposit %s: %w", d.Key(), err)
		}
		d.Amount = cloneAmount(d)
		w.pending[d.Key()] = &pendingDeposit{dep: d, sig: sig}
	}
	return w, nil
}

// Head is the confirmed slot the latest Poll read.
func (w *Watcher) Head() uint64 { return w.head.Load() }

// State is the scan position and the deposits not yet final.
func (w *Watcher) State() chains.WatcherState {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := chains.WatcherState{Next: w.next}
	for _, p := range w.sortedPending() {
		d := p.dep
		d.Amount = cloneAmount(d)
		st.Pending = append(st.Pending, d)
	}
	return st
}

// Poll scans the slots produced since the last poll for deposits to the
// watched owners and re-checks the pending ones. Events are returned once;
// when a poll fails the events it had already produced are kept and
// returned by the next successful poll, and the cursor stays after the last
// slot fully read.
func (w *Watcher) Poll(ctx context.Context, watched chains.Watchlist) ([]chains.DepositEvent, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	events, err := w.poll(ctx, watched)
	w.outbox = append(w.outbox, events...)
	if err != nil {
		return nil, err
	}
	out := w.outbox
	w.outbox = nil
	return out, nil
}

func (w *Watcher) poll(ctx context.Context, watched chains.Watchlist) ([]chains.DepositEvent, error) {
	head, err := w.rpc.GetSlot(ctx, rpc.CommitmentConfirmed)
	if err != nil {
		return nil, fmt.Errorf("solana: get slot: %w", err)
	}
	w.head.Store(head)
	if w.next == 0 {
		// A new watcher starts at the head: it reports deposits made from
		// now on.
		w.next = head
	}
	match := matcher(watched)

	// Transfers of the last slots, to owners that joined the watchlist
	// since they were read.
	var events []chains.DepositEvent
	for i := range w.recent {
		if ev, ok := w.report(&w.recent[i], match, head); ok {
			events = append(events, ev)
		}
	}
	scanEvents, scanErr := w.scanSlots(ctx, head, match)
	events = append(events, scanEvents...)
	// Deposits already pending are still followed when the scan failed:
	// their finality does not depend on it.
	statusEvents, statusErr := w.checkPending(ctx, head)
	events = append(events, statusEvents...)
	w.pruneRecent()
	w.pruneFinals()
	return events, errors.Join(scanErr, statusErr)
}

// matcher is the watchlist's membership test on a decoded owner: the
// package's own Watchlist answers without re-encoding the key.
func matcher(watched chains.Watchlist) func(solana.PublicKey) bool {
	switch l := watched.(type) {
	case nil:
		return func(solana.PublicKey) bool { return false }
	case *chains.LazyWatchlist:
		// Read now, after the head: the package's own list underneath
		// keeps its fast path.
		inner, err := l.Load()
		if err != nil {
			return func(solana.PublicKey) bool { return false }
		}
		return matcher(inner)
	case *Watchlist:
		return l.containsKey
	default:
		return func(pk solana.PublicKey) bool { return l.Contains(pk.String()) }
	}
}

// scanSlots reads the blocks of the slots from the cursor to head (at most
// MaxSlotsPerPoll of them) and reports the deposits in them. The cursor
// moves past each slot once its block is read, skipped slots included.
func (w *Watcher) scanSlots(ctx context.Context, head uint64, match func(solana.PublicKey) bool) ([]chains.DepositEvent, error) {
	if head < w.next {
		return nil, nil // a node behind the cursor: wait for it
	}
	end := min(head, w.next+w.maxSlots-1)
	var slots rpc.BlocksResult
	err := w.rpc.RPCCallForInto(ctx, &slots, "getBlocks", []any{w.next, end, rpc.M{"commitment": rpc.CommitmentConfirmed}})
	if err != nil {
		return nil, fmt.Errorf("solana: get blocks %d-%d: %w", w.next, end, err)
	}
	var events []chains.DepositEvent
	for start := 0; start < len(slots); start += w.parallel {
		batch := slots[start:min(start+w.parallel, len(slots))]
		blocks := make([]*scanBlock, len(batch))
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, slot := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				blocks[i], errs[i] = w.block(ctx, slot)
			}()
		}
		wg.Wait()
		for i, slot := range batch {
			if slot < w.next || slot > end {
				continue // getBlocks answered outside the range asked
			}
			if errs[i] != nil {
				return events, errs[i]
			}
			if b := blocks[i]; b != nil {
				for j := range b.Transactions {
					for _, c := range creditsIn(&b.Transactions[j], slot, w.mintB58) {
						w.recent = append(w.recent, c)
						if ev, ok := w.report(&w.recent[len(w.recent)-1], match, head); ok {
							events = append(events, ev)
						}
					}
				}
			}
			w.next = slot + 1
		}
	}
	// Slots after the last block listed up to end produced nothing.
	w.next = max(w.next, end+1)
	return events, nil
}

// maxCachedATAs bounds the owner -> ATA derivations kept (one per owner
// paid); past it they are derived again.
const maxCachedATAs = 100_000

// report makes a watched owner's credit a pending deposit, once.
func (w *Watcher) report(c *credit, match func(solana.PublicKey) bool, head uint64) (chains.DepositEvent, bool) {
	if !match(c.owner) {
		return chains.DepositEvent{}, false
	}
	ata, ok := w.ataOf[c.owner]
	if !ok {
		var err error
		if ata, err = associatedTokenAddress(c.owner, w.mint); err != nil {
			return chains.DepositEvent{}, false
		}
		if len(w.ataOf) >= maxCachedATAs {
			clear(w.ataOf)
		}
		w.ataOf[c.owner] = ata
	}
	if !ata.Equals(c.account) {
		// Another token account of the owner: not where the service looks
		// for the owner's balance, nor where it sweeps from.
		return chains.DepositEvent{}, false
	}
	dep := chains.Deposit{
		Chain:  chains.Solana,
		TxHash: c.sig.String(),
		Index:  uint(c.index),
		From:   c.from,
		To:     c.owner.String(),
		Amount: new(big.Int).SetUint64(c.amount),
		Block:  c.slot,
	}
	key := dep.Key()
	if _, ok := w.pending[key]; ok {
		return chains.DepositEvent{}, false
	}
	if _, ok := w.finals[key]; ok {
		return chains.DepositEvent{}, false
	}
	conf := w.depth(head, dep.Block)
	w.pending[key] = &pendingDeposit{dep: dep, sig: c.sig, confirmations: conf}
	return w.event(chains.DepositSeen, dep, conf), true
}

// scanBlock is the part of a getBlock answer (transactionDetails
// "accounts") the scan reads.
type scanBlock struct {
	Transactions []scanTx `json:"transactions"`
}

type scanTx struct {
	Transaction struct {
		Signatures  []string `json:"signatures"`
		AccountKeys []struct {
			Pubkey string `json:"pubkey"`
		} `json:"accountKeys"`
	} `json:"transaction"`
	Meta *struct {
		Err               json.RawMessage `json:"err"`
		PreTokenBalances  []scanBalance   `json:"preTokenBalances"`
		PostTokenBalances []scanBalance   `json:"postTokenBalances"`
	} `json:"meta"`
}

type scanBalance struct {
	AccountIndex  int    `json:"accountIndex"`
	Mint          string `json:"mint"`
	Owner         string `json:"owner"`
	UITokenAmount struct {
		Amount string `json:"amount"`
	} `json:"uiTokenAmount"`
}

// Errors a node answers getBlock with for a slot that has no block: skipped
// (-32007), or skipped or missing in long-term storage (-32009). A block the
// node has not got yet (-32004) is an error: the next poll asks again.
const (
	errSlotSkipped                = -32007
	errLongTermStorageSlotSkipped = -32009
)

// block reads a slot's transactions at commitment confirmed, nil when the
// slot produced no block after all.
func (w *Watcher) block(ctx context.Context, slot uint64) (*scanBlock, error) {
	maxVersion := uint64(0)
	var b *scanBlock
	err := w.rpc.RPCCallForInto(ctx, &b, "getBlock", []any{slot, rpc.M{
		// jsonParsed: "accounts" detail is built from parsed account keys
		// whatever the encoding; real nodes accept json and jsonParsed.
		"encoding":                       solana.EncodingJSONParsed,
		"transactionDetails":             "accounts",
		"rewards":                        false,
		"commitment":                     rpc.CommitmentConfirmed,
		"maxSupportedTransactionVersion": maxVersion,
	}})
	var rpcErr *jsonrpc.RPCError
	if errors.As(err, &rpcErr) && (rpcErr.Code == errSlotSkipped || rpcErr.Code == errLongTermStorageSlotSkipped) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("solana: get block %d: %w", slot, err)
	}
	return b, nil
}

// creditsIn lists the rises of the mint's balances in a successful
// transaction, with the owner that lost the most as the payer. The scan
// reads blocks with it and the ledger's DepositsIn a known transaction, so
// both name a deposit alike.
func creditsIn(tx *scanTx, slot uint64, mintB58 string) []credit {
	m := tx.Meta
	if m == nil || (len(m.Err) > 0 && string(m.Err) != "null") || len(tx.Transaction.Signatures) == 0 {
		return nil
	}
	var out []credit
	for _, b := range m.PostTokenBalances {
		if b.Mint != mintB58 || b.Owner == "" || b.AccountIndex < 0 || b.AccountIndex >= len(tx.Transaction.AccountKeys) {
			continue
		}
		post, ok := parseAmount(b.UITokenAmount.Amount)
		if !ok {
			continue
		}
		pre, _ := balanceAt(m.PreTokenBalances, b.AccountIndex, mintB58)
		if post <= pre {
			continue
		}
		owner, err := solana.PublicKeyFromBase58(b.Owner)
		if err != nil {
			continue
		}
		account, err := solana.PublicKeyFromBase58(tx.Transaction.AccountKeys[b.AccountIndex].Pubkey)
		if err != nil {
			continue
		}
		sig, err := solana.SignatureFromBase58(tx.Transaction.Signatures[0])
		if err != nil {
			return nil
		}
		out = append(out, credit{slot: slot, sig: sig, index: b.AccountIndex, account: account, owner: owner,
			from: payerOf(tx, mintB58), amount: post - pre})
	}
	return out
}

// payerOf is the owner of the mint's token account that lost the most in
// tx: the payer of a deposit. Empty when none lost anything (a mint).
func payerOf(tx *scanTx, mintB58 string) string {
	var best uint64
	from := ""
	for _, b := range tx.Meta.PreTokenBalances {
		if b.Mint != mintB58 {
			continue
		}
		pre, ok := parseAmount(b.UITokenAmount.Amount)
		if !ok {
			continue
		}
		post, _ := balanceAt(tx.Meta.PostTokenBalances, b.AccountIndex, mintB58)
		if pre <= post || pre-post <= best {
			continue
		}
		best = pre - post
		switch {
		case b.Owner != "":
			from = b.Owner
		case b.AccountIndex >= 0 && b.AccountIndex < len(tx.Transaction.AccountKeys):
			// Old nodes omit the owner; the token account is the best left.
			from = tx.Transaction.AccountKeys[b.AccountIndex].Pubkey
		}
	}
	return from
}

func balanceAt(balances []scanBalance, idx int, mintB58 string) (uint64, bool) {
	for _, b := range balances {
		if b.AccountIndex == idx && b.Mint == mintB58 {
			return parseAmount(b.UITokenAmount.Amount)
		}
	}
	return 0, false
}

func parseAmount(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// pruneRecent forgets credits older than Lookback slots below the cursor.
func (w *Watcher) pruneRecent() {
	floor := saturatingSub(w.next, w.lookback)
	i := sort.Search(len(w.recent), func(i int) bool { return w.recent[i].slot >= floor })
	if i > 0 {
		w.recent = append(w.recent[:0], w.recent[i:]...)
	}
}

// getTransaction reads a transaction at commitment, legacy and version 0
// alike, its message as binary (what accountKeys and the matching read).
func getTransaction(ctx context.Context, c *rpc.Client, sig solana.Signature, commitment rpc.CommitmentType) (*rpc.GetTransactionResult, error) {
	maxVersion := uint64(0)
	tx, err := c.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{
		Encoding:                       solana.EncodingBase64,
		Commitment:                     commitment,
		MaxSupportedTransactionVersion: &maxVersion,
	})
	if err != nil {
		return nil, fmt.Errorf("solana: get transaction %s: %w", sig, err)
	}
	return tx, nil
}

// accountKeys are the transaction's static keys followed by the keys loaded
// from lookup tables (writable, then read-only), the order token balance
// indexes refer to.
func accountKeys(tx *rpc.GetTransactionResult) (solana.PublicKeySlice, error) {
	parsed, err := tx.Transaction.GetTransaction()
	if err != nil {
		return nil, err
	}
	if parsed == nil {
		return nil, errors.New("no transaction")
	}
	keys := append(solana.PublicKeySlice(nil), parsed.Message.AccountKeys...)
	keys = append(keys, tx.Meta.LoadedAddresses.Writable...)
	keys = append(keys, tx.Meta.LoadedAddresses.ReadOnly...)
	return keys, nil
}

// statusBatch is the most signatures getSignatureStatuses takes per call.
const statusBatch = 256

// missingPolls is how many polls in a row a pending deposit's signature must
// be unknown before it is reported removed, so that one lagging RPC replica
// does not make a deposit flap.
const missingPolls = 2

// checkPending follows the deposits not yet final: confirmations as the
// slot depth grows, final once finalized, removed when the signature is gone.
func (w *Watcher) checkPending(ctx context.Context, head uint64) ([]chains.DepositEvent, error) {
	list := w.sortedPending()
	if len(list) == 0 {
		return nil, nil
	}
	var sigs []solana.Signature
	seen := make(map[solana.Signature]bool)
	for _, p := range list {
		if !seen[p.sig] {
			seen[p.sig] = true
			sigs = append(sigs, p.sig)
		}
	}
	statuses := make(map[solana.Signature]*rpc.SignatureStatusesResult, len(sigs))
	for start := 0; start < len(sigs); start += statusBatch {
		batch := sigs[start:min(start+statusBatch, len(sigs))]
		res, err := w.rpc.GetSignatureStatuses(ctx, true, batch...)
		if err != nil {
			return nil, fmt.Errorf("solana: get signature statuses: %w", err)
		}
		if len(res.Value) != len(batch) {
			return nil, fmt.Errorf("solana: get signature statuses: asked %d, got %d", len(batch), len(res.Value))
		}
		head = max(head, res.Context.Slot)
		for i, sig := range batch {
			statuses[sig] = res.Value[i]
		}
	}

	var events []chains.DepositEvent
	for _, p := range list {
		key := p.dep.Key()
		st := statuses[p.sig]
		switch {
		case st == nil || st.Err != nil:
			p.missing++
			if p.missing < missingPolls {
				continue
			}
			delete(w.pending, key)
			w.rewind(p.dep.Block)
			events = append(events, w.event(chains.DepositRemoved, p.dep, 0))
		case confirmationStatus(st) == rpc.ConfirmationStatusFinalized:
			if st.Slot != 0 {
				p.dep.Block = st.Slot
			}
			delete(w.pending, key)
			w.finals[key] = p.dep.Block
			conf := max(head-min(head, p.dep.Block)+1, w.required)
			events = append(events, w.event(chains.DepositFinal, p.dep, conf))
		default:
			p.missing = 0
			if st.Slot != 0 {
				p.dep.Block = st.Slot
			}
			if conf := w.depth(head, p.dep.Block); conf != p.confirmations {
				p.confirmations = conf
				events = append(events, w.event(chains.DepositConfirmations, p.dep, conf))
			}
		}
	}
	return events, nil
}

// rewind moves the cursor back to the slot of a deposit whose transaction
// is gone (its block left the chain), so that the transaction is reported
// seen again if it is re-included in another slot. Deposits still pending
// or final are not reported twice by the rescan.
func (w *Watcher) rewind(slot uint64) {
	if slot >= w.next {
		return
	}
	w.next = slot
	i := sort.Search(len(w.recent), func(i int) bool { return w.recent[i].slot >= slot })
	w.recent = w.recent[:i]
}

// depth is the deposit's confirmation count for a non-final event: slots
// from its own to the head, counting its own. It stays below Required so
// that Confirmations == Required means final only.
func (w *Watcher) depth(head, slot uint64) uint64 {
	d := uint64(1)
	if head >= slot {
		d = head - slot + 1
	}
	return min(d, w.required-1)
}

func (w *Watcher) event(kind chains.DepositEventKind, dep chains.Deposit, conf uint64) chains.DepositEvent {
	dep.Amount = cloneAmount(dep)
	return chains.DepositEvent{Kind: kind, Deposit: dep, Confirmations: conf, Required: w.required}
}

// pruneFinals forgets final deposits too old to be found again: below the
// recent credits matched again, and below any rewind (a rewind goes back to
// a pending deposit, and a deposit is final within about Required slots).
func (w *Watcher) pruneFinals() {
	horizon := 4*w.lookback + w.required
	for k, slot := range w.finals {
		if slot+horizon < w.next {
			delete(w.finals, k)
		}
	}
}

func (w *Watcher) sortedPending() []*pendingDeposit {
	list := make([]*pendingDeposit, 0, len(w.pending))
	for _, p := range w.pending {
		list = append(list, p)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i].dep, list[j].dep
		if a.Block != b.Block {
			return a.Block < b.Block
		}
		if a.TxHash != b.TxHash {
			return a.TxHash < b.TxHash
		}
		return a.Index < b.Index
	})
	return list
}

func cloneAmount(d chains.Deposit) *big.Int {
	if d.Amount == nil {
		return nil
	}
	return new(big.Int).Set(d.Amount)
}

func saturatingSub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
