package solana

import (
	"context"
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
	// BatchSize is the number of token accounts read per getMultipleAccounts
	// call. Default and maximum 100 (the node's limit).
	BatchSize int
	// HotSlots: a token account that changed within this many slots has its
	// signatures listed on every poll, not only when its amount changes,
	// because a deposit and a withdrawal of the same size between two polls
	// leave the amount unchanged. Default 150 (about a minute).
	HotSlots uint64
	// Lookback is how many slots before the scan position an address that
	// joins the watchlist is searched, covering a payment made in the moment
	// between the address being handed out and the next poll. Default 150.
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
// Each poll reads the watched token accounts with getMultipleAccounts at
// commitment confirmed, 100 per call; only an account whose amount changed
// (or that changed recently, see HotSlots) costs a getSignaturesForAddress
// and a getTransaction per new signature. Deposits not yet final are
// re-checked with getSignatureStatuses.
type Watcher struct {
	rpc      *rpc.Client
	mint     solana.PublicKey
	required uint64
	batch    int
	hotSlots uint64
	lookback uint64

	mu sync.Mutex
	// next is the first slot not yet scanned.
	next uint64
	// initial is true until the first successful poll.
	initial  bool
	accounts map[solana.PublicKey]*watchedAccount // by ATA
	ataOf    map[string]solana.PublicKey          // owner address -> ATA
	pending  map[string]*pendingDeposit           // by Deposit.Key()
	finals   map[string]uint64                    // recently final keys -> slot
	outbox   []chains.DepositEvent
	// head is the confirmed slot the latest poll read (Head).
	head atomic.Uint64
}

var _ chains.Watcher = (*Watcher)(nil)

// watchedAccount is what the watcher knows of one watched owner's ATA.
type watchedAccount struct {
	owner  solana.PublicKey
	ata    solana.PublicKey
	exists bool
	amount uint64
	// lastSig is the newest signature already examined, the `until` of the
	// next getSignaturesForAddress; lastSlot is its slot.
	lastSig  solana.Signature
	lastSlot uint64
	// floor: without lastSig, signatures older than this slot are not
	// examined (they belong to before the watcher's scan position).
	floor       uint64
	changedSlot uint64
	// seen: read at least once; rescan: a deposit in it was removed, so its
	// signatures are listed again from floor.
	seen   bool
	rescan bool
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
	if cfg.BatchSize <= 0 || cfg.BatchSize > 100 {
		cfg.BatchSize = 100
	}
	if cfg.HotSlots == 0 {
		cfg.HotSlots = 150
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
		required: cfg.Required,
		batch:    cfg.BatchSize,
		hotSlots: cfg.HotSlots,
		lookback: cfg.Lookback,
		next:     cfg.State.Next,
		initial:  true,
		accounts: make(map[solana.PublicKey]*watchedAccount),
		ataOf:    make(map[string]solana.PublicKey),
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

// Poll scans the watched owners' token accounts for new deposits and
// re-checks the pending ones. Events are returned once; when a poll fails
// the events it had already produced are kept and returned by the next
// successful poll.
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

	scan := newPollScan(head)
	events, scannedTo, scanErr := w.scanAccounts(ctx, scan, watched)
	// Deposits already pending are still followed when the scan failed:
	// their finality does not depend on it.
	statusEvents, statusErr := w.checkPending(ctx, scan)
	events = append(events, statusEvents...)
	if err := errors.Join(scanErr, statusErr); err != nil {
		return events, err
	}
	if scannedTo+1 > w.next {
		w.next = scannedTo + 1
	}
	w.initial = false
	w.pruneFinals()
	return events, nil
}

// pollScan carries what one poll learned: the highest slot seen and the
// transactions already fetched (one transaction can pay several watched
// accounts).
type pollScan struct {
	head uint64
	txs  map[solana.Signature]*rpc.GetTransactionResult
}

func newPollScan(head uint64) *pollScan {
	return &pollScan{head: head, txs: make(map[solana.Signature]*rpc.GetTransactionResult)}
}

func (s *pollScan) seeSlot(slot uint64) {
	if slot > s.head {
		s.head = slot
	}
}

// scanAccounts reads every watched ATA and examines those that changed. It
// returns the lowest slot at which all accounts are known to be scanned.
func (w *Watcher) scanAccounts(ctx context.Context, scan *pollScan, watched chains.Watchlist) ([]chains.DepositEvent, uint64, error) {
	atas := w.refreshAccounts(watched)
	scannedTo := scan.head
	var events []chains.DepositEvent
	var errs []error
	for start := 0; start < len(atas); start += w.batch {
		end := min(start+w.batch, len(atas))
		batch := atas[start:end]
		res, err := w.rpc.GetMultipleAccountsWithOpts(ctx, batch, &rpc.GetMultipleAccountsOpts{
			Encoding:   solana.EncodingBase64,
			Commitment: rpc.CommitmentConfirmed,
		})
		if err != nil {
			return events, 0, fmt.Errorf("solana: get multiple accounts: %w", err)
		}
		if len(res.Value) != len(batch) {
			return events, 0, fmt.Errorf("solana: get multiple accounts: asked %d, got %d", len(batch), len(res.Value))
		}
		ctxSlot := res.Context.Slot
		scan.seeSlot(ctxSlot)
		scannedTo = min(scannedTo, ctxSlot)
		for i, ata := range batch {
			acc := w.accounts[ata]
			exists, amount := false, uint64(0)
			if ta, ok := decodeTokenAccount(res.Value[i]); ok && ta.Mint.Equals(w.mint) {
				exists, amount = true, ta.Amount
			}
			changed := acc.seen && (exists != acc.exists || amount != acc.amount)
			var needScan bool
			switch {
			case !acc.seen:
				// No token account: nothing can have been paid into it yet.
				needScan = exists
			case acc.rescan, changed:
				needScan = true
			default:
				needScan = acc.changedSlot != 0 && ctxSlot <= acc.changedSlot+w.hotSlots
			}
			if needScan {
				evs, err := w.scanAccount(ctx, scan, acc, ctxSlot)
				events = append(events, evs...)
				if err != nil {
					// Keep the cached amount so the next poll looks again;
					// the other accounts go on.
					errs = append(errs, err)
					continue
				}
			}
			if changed || (!acc.seen && exists) {
				acc.changedSlot = ctxSlot
			}
			acc.seen, acc.exists, acc.amount, acc.rescan = true, exists, amount, false
		}
	}
	return events, scannedTo, errors.Join(errs...)
}

// refreshAccounts aligns the account cache with the watchlist and returns
// the ATAs to read. An owner seen for the first time is searched back to the
// resume position, or Lookback slots before the scan position.
func (w *Watcher) refreshAccounts(watched chains.Watchlist) []solana.PublicKey {
	var addrs []string
	if watched != nil {
		addrs = watched.Addresses()
	}
	keep := make(map[solana.PublicKey]struct{}, len(addrs))
	atas := make([]solana.PublicKey, 0, len(addrs))
	for _, a := range addrs {
		ata, ok := w.ataOf[a]
		if !ok {
			owner, err := solana.PublicKeyFromBase58(a)
			if err != nil {
				continue // cannot receive anything; not worth failing the scan
			}
			ata, err = associatedTokenAddress(owner, w.mint)
			if err != nil {
				continue
			}
			w.ataOf[a] = ata
		}
		if _, dup := keep[ata]; dup {
			continue
		}
		keep[ata] = struct{}{}
		atas = append(atas, ata)
		if _, ok := w.accounts[ata]; !ok {
			owner, _ := solana.PublicKeyFromBase58(a)
			// On the first poll the floor is the scan position itself (the
			// resumed Next, or the head for a new watcher): older deposits were
			// reported before, or predate the watcher. Later, Lookback covers
			// an address handed out just before the poll that found it.
			floor := w.next
			if !w.initial {
				floor = saturatingSub(w.next, w.lookback)
			}
			w.accounts[ata] = &watchedAccount{owner: owner, ata: ata, floor: floor}
		}
	}
	for ata := range w.accounts {
		if _, ok := keep[ata]; !ok {
			delete(w.accounts, ata)
		}
	}
	if len(w.ataOf) > 2*len(addrs)+1024 {
		// Drop derivations of owners no longer watched.
		for a, ata := range w.ataOf {
			if _, ok := keep[ata]; !ok {
				delete(w.ataOf, a)
			}
		}
	}
	return atas
}

// scanAccount examines the signatures of acc newer than the last one seen,
// oldest first, and reports a deposit for each transaction that raised the
// account's amount.
func (w *Watcher) scanAccount(ctx context.Context, scan *pollScan, acc *watchedAccount, minSlot uint64) ([]chains.DepositEvent, error) {
	sigs, err := w.newSignatures(ctx, acc, minSlot)
	if err != nil {
		return nil, err
	}
	var events []chains.DepositEvent
	for i := len(sigs) - 1; i >= 0; i-- {
		s := sigs[i]
		scan.seeSlot(s.Slot)
		if s.Err == nil {
			tx, err := w.transaction(ctx, scan, s.Signature)
			if err != nil {
				// lastSig stays at the previous signature, so the next poll
				// resumes here.
				return events, err
			}
			if dep, ok := w.depositIn(tx, s.Signature, acc); ok {
				key := dep.Key()
				_, isPending := w.pending[key]
				_, isFinal := w.finals[key]
				if !isPending && !isFinal {
					conf := w.depth(scan.head, dep.Block)
					w.pending[key] = &pendingDeposit{dep: dep, sig: s.Signature, confirmations: conf}
					events = append(events, w.event(chains.DepositSeen, dep, conf))
				}
			}
		}
		acc.lastSig, acc.lastSlot = s.Signature, s.Slot
	}
	return events, nil
}

// sigPageLimit is the most signatures a node returns per call.
const sigPageLimit = 1000

// newSignatures lists acc's signatures at commitment confirmed, newest
// first, down to lastSig; without one (or when lastSig was lost to a fork)
// down to the account's floor slot.
func (w *Watcher) newSignatures(ctx context.Context, acc *watchedAccount, minSlot uint64) ([]*rpc.TransactionSignature, error) {
	floor := acc.floor
	if !acc.lastSig.IsZero() {
		floor = acc.lastSlot
	}
	limit := sigPageLimit
	var out []*rpc.TransactionSignature
	var before solana.Signature
	for {
		page, err := w.rpc.GetSignaturesForAddressWithOpts(ctx, acc.ata, &rpc.GetSignaturesForAddressOpts{
			Limit:      &limit,
			Before:     before,
			Until:      acc.lastSig,
			Commitment: rpc.CommitmentConfirmed,
			// The account was read at minSlot: a node behind it could omit
			// the very transactions that changed the amount.
			MinContextSlot: &minSlot,
		})
		if err != nil {
			return nil, fmt.Errorf("solana: get signatures for %s: %w", acc.ata, err)
		}
		for _, s := range page {
			if s == nil {
				continue
			}
			if s.Slot < floor || (!acc.lastSig.IsZero() && s.Signature == acc.lastSig) {
				return out, nil
			}
			out = append(out, s)
		}
		if len(page) < limit {
			return out, nil
		}
		before = page[len(page)-1].Signature
	}
}

// transaction fetches a transaction at commitment confirmed, once per poll.
func (w *Watcher) transaction(ctx context.Context, scan *pollScan, sig solana.Signature) (*rpc.GetTransactionResult, error) {
	if tx, ok := scan.txs[sig]; ok {
		return tx, nil
	}
	tx, err := getTransaction(ctx, w.rpc, sig, rpc.CommitmentConfirmed)
	if err != nil {
		return nil, err
	}
	scan.txs[sig] = tx
	return tx, nil
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

// depositIn is the increase of acc's amount made by tx, read from the
// transaction's pre and post token balances. Index is the token account's
// position in the transaction's account keys, so every watched account a
// transaction pays gets its own deposit.
func (w *Watcher) depositIn(tx *rpc.GetTransactionResult, sig solana.Signature, acc *watchedAccount) (chains.Deposit, bool) {
	if tx == nil || tx.Meta == nil || tx.Meta.Err != nil || tx.Transaction == nil {
		return chains.Deposit{}, false
	}
	keys, err := accountKeys(tx)
	if err != nil {
		return chains.Deposit{}, false
	}
	idx := -1
	for i, k := range keys {
		if k.Equals(acc.ata) {
			idx = i
			break
		}
	}
	if idx < 0 {
		return chains.Deposit{}, false
	}
	pre, _ := tokenAmountAt(tx.Meta.PreTokenBalances, idx, w.mint)
	post, ok := tokenAmountAt(tx.Meta.PostTokenBalances, idx, w.mint)
	if !ok || post <= pre {
		return chains.Deposit{}, false
	}
	return chains.Deposit{
		Chain:  chains.Solana,
		TxHash: sig.String(),
		Index:  uint(idx),
		From:   w.sourceOwner(tx, keys),
		To:     acc.owner.String(),
		Amount: new(big.Int).SetUint64(post - pre),
		Block:  tx.Slot,
	}, true
}

// sourceOwner is the owner of the mint's token account that lost the most
// in tx: the payer of the deposit. Empty when none lost anything (a mint).
func (w *Watcher) sourceOwner(tx *rpc.GetTransactionResult, keys solana.PublicKeySlice) string {
	var best uint64
	from := ""
	for _, b := range tx.Meta.PreTokenBalances {
		if !b.Mint.Equals(w.mint) {
			continue
		}
		pre, ok := parseTokenAmount(b)
		if !ok {
			continue
		}
		post, _ := tokenAmountAt(tx.Meta.PostTokenBalances, int(b.AccountIndex), w.mint)
		if pre <= post || pre-post <= best {
			continue
		}
		best = pre - post
		switch {
		case b.Owner != nil:
			from = b.Owner.String()
		case int(b.AccountIndex) < len(keys):
			// Old nodes omit the owner; the token account is the best left.
			from = keys[b.AccountIndex].String()
		}
	}
	return from
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

func tokenAmountAt(balances []rpc.TokenBalance, idx int, mint solana.PublicKey) (uint64, bool) {
	for _, b := range balances {
		if int(b.AccountIndex) == idx && b.Mint.Equals(mint) {
			return parseTokenAmount(b)
		}
	}
	return 0, false
}

func parseTokenAmount(b rpc.TokenBalance) (uint64, bool) {
	if b.UiTokenAmount == nil {
		return 0, false
	}
	v, err := strconv.ParseUint(b.UiTokenAmount.Amount, 10, 64)
	return v, err == nil
}

// statusBatch is the most signatures getSignatureStatuses takes per call.
const statusBatch = 256

// missingPolls is how many polls in a row a pending deposit's signature must
// be unknown before it is reported removed, so that one lagging RPC replica
// does not make a deposit flap.
const missingPolls = 2

// checkPending follows the deposits not yet final: confirmations as the
// slot depth grows, final once finalized, removed when the signature is gone.
func (w *Watcher) checkPending(ctx context.Context, scan *pollScan) ([]chains.DepositEvent, error) {
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
		scan.seeSlot(res.Context.Slot)
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
			w.markRescan(p.dep)
			events = append(events, w.event(chains.DepositRemoved, p.dep, 0))
		case confirmationStatus(st) == rpc.ConfirmationStatusFinalized:
			if st.Slot != 0 {
				p.dep.Block = st.Slot
			}
			delete(w.pending, key)
			w.finals[key] = p.dep.Block
			conf := max(scan.head-min(scan.head, p.dep.Block)+1, w.required)
			events = append(events, w.event(chains.DepositFinal, p.dep, conf))
		default:
			p.missing = 0
			if st.Slot != 0 {
				p.dep.Block = st.Slot
			}
			if conf := w.depth(scan.head, p.dep.Block); conf != p.confirmations {
				p.confirmations = conf
				events = append(events, w.event(chains.DepositConfirmations, p.dep, conf))
			}
		}
	}
	return events, nil
}

// markRescan makes the account of a removed deposit list its signatures
// again, so that the transaction is reported seen again if it is
// re-included in another slot.
func (w *Watcher) markRescan(dep chains.Deposit) {
	ata, ok := w.ataOf[dep.To]
	if !ok {
		return
	}
	acc, ok := w.accounts[ata]
	if !ok {
		return
	}
	acc.rescan = true
	acc.lastSig = solana.Signature{}
	acc.lastSlot = 0
	acc.floor = min(acc.floor, saturatingSub(dep.Block, w.lookback))
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

// pruneFinals forgets final deposits too old to be found again by a scan.
func (w *Watcher) pruneFinals() {
	horizon := 4*w.lookback + w.hotSlots
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
