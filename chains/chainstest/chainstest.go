// Package chainstest is the conformance suite of the chains interfaces:
// what the service relies on from every adapter, whatever the chain. Each
// adapter's tests run it against their devnet (chains/devnet); what only one
// chain has (EIP-3009 authorizations, Solana reference accounts, reorgs,
// RPC economy) stays in that adapter's own tests.
package chainstest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// Chain is an adapter under test, connected to a running devnet whose
// blocks (or slots) come by themselves.
type Chain struct {
	// Network is the chain as the service gets it: a ledger whose gas payer
	// holds what it needs, the deposit watcher factory and watchlist, and
	// the confirmations the watcher requires.
	Network chains.Network
	// Reopen connects another ledger to the same chain, as a restarted
	// process would.
	Reopen func(t testing.TB) chains.Ledger
	// Wallets are the chain family's keys and addresses.
	Wallets chains.Wallets
	// Fund sends amount base units of USDC from the devnet's faucet to
	// address and returns once the transfer is included. A zero amount
	// sends a zero-value transfer, as anyone can.
	Fund func(ctx context.Context, address string, amount *big.Int) (txHash string, err error)
	// OtherToken is another token on the same chain, with USDC's decimals
	// (one the devnet creates): what moves it is never USDC.
	OtherToken Token
	// Connect connects the chain as the service does (USDC, the gas payer)
	// through the node at rpcURL, each call to it bounded by rpcTimeout.
	Connect func(t testing.TB, rpcURL string, rpcTimeout time.Duration) chains.Network
	// RPCURL is the devnet's JSON-RPC endpoint (HTTP).
	RPCURL string
}

// Token is a token on a chain under test: a ledger connected to it (the
// same gas payer) and its faucet.
type Token struct {
	Ledger chains.Ledger
	// Fund gives address amount base units of the token and returns once
	// included.
	Fund func(ctx context.Context, address string, amount *big.Int) (txHash string, err error)
}

// timeout bounds each check; devnets answer in well under a second.
const timeout = 2 * time.Minute

// TestLedger checks a ledger: balances, transfers paid by the gas payer,
// a Ref moving the funds once and found again by FindTransfer, and
// refusals the service can tell apart with the chains sentinels.
func TestLedger(t *testing.T, c Chain) {
	t.Run("Balance", func(t *testing.T) { testBalance(t, c) })
	t.Run("Transfer", func(t *testing.T) { testTransfer(t, c) })
	t.Run("RefMovesFundsOnce", func(t *testing.T) { testRefMovesFundsOnce(t, c) })
	t.Run("FindTransferChecksWhatMoved", func(t *testing.T) { testFindTransferChecksWhatMoved(t, c) })
	t.Run("Refusals", func(t *testing.T) { testRefusals(t, c) })
}

func testBalance(t *testing.T, c Chain) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l := c.Network.Ledger
	require.NotEmpty(t, l.Token())
	require.Equal(t, int32(6), l.Decimals())
	head, err := l.Head(ctx)
	require.NoError(t, err)
	require.Positive(t, head)

	_, addr := newKey(t, c)
	require.NoError(t, l.ValidateAddress(addr))
	requireBalance(t, l, addr, 0)
	_, err = c.Fund(ctx, addr, big.NewInt(1_500_000))
	require.NoError(t, err)
	requireBalance(t, l, addr, 1_500_000)

	require.ErrorIs(t, l.ValidateAddress("not an address"), chains.ErrInvalidAddress)
	_, err = l.Balance(ctx, "not an address")
	require.ErrorIs(t, err, chains.ErrInvalidAddress)
}

// A key holding USDC and nothing else sends it: the gas payer pays.
func testTransfer(t *testing.T, c Chain) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l := c.Network.Ledger
	srcKey, src := fundedKey(t, c, 5_000_000)
	_, dst := newKey(t, c)

	sub, err := l.Transfer(ctx, chains.TransferRequest{Key: srcKey, To: dst, Amount: big.NewInt(1_234_567), Ref: randomRef(t)})
	require.NoError(t, err)
	require.Equal(t, src, sub.From)
	r, err := l.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, r.State, r.Err)
	require.Positive(t, r.Block)
	again, err := l.Receipt(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, again.State)
	require.Equal(t, r.Block, again.Block)

	requireBalance(t, l, src, 5_000_000-1_234_567)
	requireBalance(t, l, dst, 1_234_567)
}

// The same request sent again while pending and once included answers the
// transaction already sent (or ErrAlreadyUsed) and moves nothing more; a
// ledger that did not send it finds it by its Ref alone.
func testRefMovesFundsOnce(t *testing.T, c Chain) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l := c.Network.Ledger
	req, q := newTransfer(t, c)
	src, dst := q.From, q.To

	_, found, err := l.FindTransfer(ctx, q)
	require.NoError(t, err)
	require.False(t, found, "nothing sent yet")

	sub, err := l.Transfer(ctx, req)
	require.NoError(t, err)
	requireSameTransfer(t, l, req, sub)
	r, err := l.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, r.State, r.Err)
	requireSameTransfer(t, l, req, sub)
	requireBalance(t, l, src, 2_000_000)
	requireBalance(t, l, dst, 1_000_000)

	other := c.Reopen(t)
	hash, found, err := other.FindTransfer(ctx, q)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, sub.TxHash, hash)
	anotherRef := q
	anotherRef.Ref = randomRef(t)
	_, found, err = other.FindTransfer(ctx, anotherRef)
	require.NoError(t, err)
	require.False(t, found, "another Ref")
	bad := q
	bad.From = "not an address"
	_, _, err = other.FindTransfer(ctx, bad)
	require.ErrorIs(t, err, chains.ErrInvalidAddress)
}

// FindTransfer counts a transaction carrying the Ref only when it moved
// exactly the transfer asked about: USDC, from its source, to its
// recipient, its amount. Anyone can put a Ref on a transaction of their own
// (a Solana reference is a public key), and a decoy taken for the transfer
// would make the service record a payment it never made (and never send
// it).
func testFindTransferChecksWhatMoved(t *testing.T, c Chain) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l := c.Network.Ledger
	req, q := newTransfer(t, c)
	src, dst := q.From, q.To

	// Decoys carrying the Ref before the transfer is sent: the same amount
	// to the same recipient from another wallet, and from the source but
	// in another token.
	decoyKey, _ := fundedKey(t, c, 1_000_000)
	requireIncluded(t, c.Reopen(t), chains.TransferRequest{Key: decoyKey, To: dst, Amount: req.Amount, Ref: req.Ref})
	_, err := c.OtherToken.Fund(ctx, src, big.NewInt(1_000_000))
	require.NoError(t, err)
	requireIncluded(t, c.OtherToken.Ledger, req)
	_, found, err := l.FindTransfer(ctx, q)
	require.NoError(t, err)
	require.False(t, found, "only decoys carry the Ref")

	sub := requireIncluded(t, l, req)
	hash, found, err := c.Reopen(t).FindTransfer(ctx, q)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, sub.TxHash, hash)
	for name, wrong := range map[string]chains.TransferQuery{
		"another recipient": {From: src, To: newAddress(t, c), Amount: req.Amount, Ref: req.Ref},
		"more":              {From: src, To: dst, Amount: big.NewInt(1_000_001), Ref: req.Ref},
		"less":              {From: src, To: dst, Amount: big.NewInt(999_999), Ref: req.Ref},
	} {
		_, found, err := l.FindTransfer(ctx, wrong)
		require.NoError(t, err, name)
		require.False(t, found, name)
	}
	requireBalance(t, l, dst, 2_000_000)
}

// requireIncluded sends req with l and waits for its inclusion.
func requireIncluded(t *testing.T, l chains.Ledger, req chains.TransferRequest) chains.Submitted {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sub, err := l.Transfer(ctx, req)
	require.NoError(t, err)
	r, err := l.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, r.State, r.Err)
	return sub
}

func newAddress(t testing.TB, c Chain) string {
	t.Helper()
	_, addr := newKey(t, c)
	return addr
}

// newTransfer is a transfer of 1 USDC from a new key holding 3 to a new
// address, with a new Ref, and what FindTransfer would ask about it.
func newTransfer(t *testing.T, c Chain) (chains.TransferRequest, chains.TransferQuery) {
	t.Helper()
	srcKey, src := fundedKey(t, c, 3_000_000)
	req := chains.TransferRequest{Key: srcKey, To: newAddress(t, c), Amount: big.NewInt(1_000_000), Ref: randomRef(t)}
	return req, chains.TransferQuery{From: src, To: req.To, Amount: req.Amount, Ref: req.Ref}
}

// requireSameTransfer sends req again: it must answer sub or ErrAlreadyUsed.
func requireSameTransfer(t *testing.T, l chains.Ledger, req chains.TransferRequest, sub chains.Submitted) {
	t.Helper()
	again, err := l.Transfer(context.Background(), req)
	if err != nil {
		require.ErrorIs(t, err, chains.ErrAlreadyUsed)
		require.NotErrorIs(t, err, chains.ErrRefused)
		return
	}
	require.Equal(t, sub, again)
}

// Refusals are told apart with errors.Is alone, and nothing moves.
func testRefusals(t *testing.T, c Chain) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l := c.Network.Ledger
	srcKey, src := fundedKey(t, c, 1_000_000)
	_, dst := newKey(t, c)
	transfer := func(key []byte, to string, units int64) error {
		t.Helper()
		sub, err := l.Transfer(ctx, chains.TransferRequest{Key: key, To: to, Amount: big.NewInt(units), Ref: randomRef(t)})
		require.Error(t, err)
		require.Empty(t, sub.TxHash, "a refused transfer has no transaction")
		return err
	}

	err := transfer(srcKey, dst, 1_000_001)
	require.ErrorIs(t, err, chains.ErrInsufficientFunds, "more than the balance")
	require.ErrorIs(t, err, chains.ErrRefused)
	emptyKey, _ := newKey(t, c)
	err = transfer(emptyKey, dst, 1)
	require.ErrorIs(t, err, chains.ErrInsufficientFunds, "a key that never held USDC")
	require.ErrorIs(t, err, chains.ErrRefused)

	err = transfer(srcKey, "not an address", 1)
	require.ErrorIs(t, err, chains.ErrInvalidAddress)
	require.ErrorIs(t, err, chains.ErrRefused)
	require.ErrorIs(t, transfer(srcKey, dst, 0), chains.ErrRefused, "a zero amount")
	require.ErrorIs(t, transfer(srcKey, dst, -1), chains.ErrRefused, "a negative amount")

	requireBalance(t, l, src, 1_000_000)
	requireBalance(t, l, dst, 0)
}

// TestWatcher checks a deposit watcher: deposits to watched addresses are
// reported seen, then final once with the required confirmations; a watcher
// resumed from the saved state (as JSON, as the service keeps it) carries
// on, finding what arrived while none ran, and reports nothing twice.
// Deposits to other addresses are not reported, nor transfers of another
// token or of nothing at all: a zero-value transfer taken for a payment
// would tie up a session (no chain change, no cancel) for nothing.
func TestWatcher(t *testing.T, c Chain) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, owner := newKey(t, c)
	_, unwatched := newKey(t, c)
	list := c.Network.NewWatchlist([]string{owner})
	log := NewDepositLog(t, c.Network.Ledger.Chain(), c.Network.Confirmations)

	w1, err := c.Network.NewWatcher(ctx, chains.WatcherState{})
	require.NoError(t, err)
	require.Zero(t, w1.Head(), "no poll yet")
	before, err := c.Network.Ledger.Head(ctx)
	require.NoError(t, err)
	evs, err := w1.Poll(ctx, list)
	require.NoError(t, err)
	require.Empty(t, evs, "nothing deposited yet")
	require.GreaterOrEqual(t, w1.Head(), before, "the head the poll read")

	// Neither a zero-value USDC transfer nor another token is a deposit:
	// anyone can send either to any address.
	_, err = c.Fund(ctx, owner, big.NewInt(0))
	require.NoError(t, err)
	_, err = c.OtherToken.Fund(ctx, owner, big.NewInt(300))
	require.NoError(t, err)
	first, err := c.Fund(ctx, owner, big.NewInt(100))
	require.NoError(t, err)
	_, err = c.Fund(ctx, unwatched, big.NewInt(5))
	require.NoError(t, err)
	log.PollUntil(ctx, w1, list, pollEvery, func() bool { _, ok := log.Deposit(first); return ok })

	// The watcher stops; a deposit arrives while none runs.
	saved, err := json.Marshal(w1.State())
	require.NoError(t, err)
	second, err := c.Fund(ctx, owner, big.NewInt(200))
	require.NoError(t, err)
	var st chains.WatcherState
	require.NoError(t, json.Unmarshal(saved, &st))
	w2, err := c.Network.NewWatcher(ctx, st)
	require.NoError(t, err)
	log.PollUntil(ctx, w2, list, pollEvery, func() bool { return log.Final(first, second) })

	require.Equal(t, 2, log.Seen(), "only deposits of USDC, of some value, to the watched address")
	for tx, amount := range map[string]int64{first: 100, second: 200} {
		d, _ := log.Deposit(tx)
		require.Equal(t, c.Wallets.NormalizeAddress(owner), c.Wallets.NormalizeAddress(d.To), tx)
		require.Equal(t, big.NewInt(amount).String(), d.Amount.String(), tx)
		require.Positive(t, d.Block, tx)
	}
	// Later polls report nothing more.
	for range 3 {
		evs, err := w2.Poll(ctx, list)
		require.NoError(t, err)
		require.Empty(t, evs)
		log.Wait(ctx, pollEvery)
	}
	require.Empty(t, w2.State().Pending)
}

// pollEvery is how often TestWatcher polls: about a devnet block.
const pollEvery = 50 * time.Millisecond

// DepositLog gathers a watcher's events by deposit and checks the reporting
// rules as they come: seen once, confirmations growing below the
// requirement, final once at or past it, nothing after final, nothing
// removed (a devnet does not reorg by itself).
type DepositLog struct {
	t        *testing.T
	chain    chains.Name
	required uint64
	seen     map[string]chains.Deposit // by deposit key
	conf     map[string][]uint64       // as reported, by deposit key
	final    map[string]bool
	byTx     map[string]string // tx hash -> deposit key
	events   int
}

// NewDepositLog checks the events of a watcher of chain requiring required
// confirmations.
func NewDepositLog(t *testing.T, chain chains.Name, required uint64) *DepositLog {
	return &DepositLog{t: t, chain: chain, required: required, seen: map[string]chains.Deposit{},
		conf: map[string][]uint64{}, final: map[string]bool{}, byTx: map[string]string{}}
}

// Add checks and records a poll's events.
func (l *DepositLog) Add(evs []chains.DepositEvent) {
	t := l.t
	t.Helper()
	for _, ev := range evs {
		l.events++
		key := ev.Deposit.Key()
		require.Equal(t, l.chain, ev.Deposit.Chain)
		require.Equal(t, l.required, ev.Required)
		require.False(t, l.final[key], "%s reported after final", key)
		prev := l.conf[key]
		switch ev.Kind {
		case chains.DepositSeen:
			_, dup := l.seen[key]
			require.False(t, dup, "deposit %s seen twice", key)
			l.seen[key] = ev.Deposit
			l.byTx[ev.Deposit.TxHash] = key
		case chains.DepositConfirmations:
			require.Contains(t, l.seen, key, "confirmations before seen")
			require.Greater(t, ev.Confirmations, prev[len(prev)-1], "confirmations must grow")
			require.Less(t, ev.Confirmations, ev.Required)
		case chains.DepositFinal:
			require.Contains(t, l.seen, key, "final before seen")
			require.GreaterOrEqual(t, ev.Confirmations, ev.Required)
			l.final[key] = true
		default:
			t.Fatalf("deposit %s: unexpected %s on a chain without reorgs", key, ev.Kind)
		}
		l.conf[key] = append(prev, ev.Confirmations)
	}
}

// Deposit is the deposit transaction tx made, as first seen.
func (l *DepositLog) Deposit(tx string) (chains.Deposit, bool) {
	d, ok := l.seen[l.byTx[tx]]
	return d, ok
}

// Confirmations lists the confirmations reported for tx's deposit, in order.
func (l *DepositLog) Confirmations(tx string) []uint64 { return l.conf[l.byTx[tx]] }

// Final reports whether the deposits of every transaction txs were final.
func (l *DepositLog) Final(txs ...string) bool {
	for _, tx := range txs {
		if key, ok := l.byTx[tx]; !ok || !l.final[key] {
			return false
		}
	}
	return true
}

// Seen is how many deposits were seen.
func (l *DepositLog) Seen() int { return len(l.seen) }

// PollUntil polls w every interval until done.
func (l *DepositLog) PollUntil(ctx context.Context, w chains.Watcher, list chains.Watchlist, every time.Duration, done func() bool) {
	t := l.t
	t.Helper()
	for !done() {
		evs, err := w.Poll(ctx, list)
		require.NoError(t, err)
		l.Add(evs)
		l.Wait(ctx, every)
	}
}

// Wait sleeps d, failing the test if ctx ends first.
func (l *DepositLog) Wait(ctx context.Context, d time.Duration) {
	l.t.Helper()
	select {
	case <-ctx.Done():
		l.t.Fatalf("timed out: %d events, seen %d, final %v", l.events, len(l.seen), l.final)
	case <-time.After(d):
	}
}

// TestWallets checks a family's keys and addresses.
func TestWallets(t *testing.T, w chains.Wallets) {
	key, addr, err := w.NewKey()
	require.NoError(t, err)
	key2, addr2, err := w.NewKey()
	require.NoError(t, err)
	require.NotEqual(t, key, key2)
	require.NotEqual(t, addr, addr2)
	got, err := w.AddressOf(key)
	require.NoError(t, err)
	require.Equal(t, addr, got, "a new key's address is its own")
	canonical, err := w.ParseAddress(addr)
	require.NoError(t, err)
	require.Equal(t, addr, canonical, "addresses are answered in canonical form")
	require.Equal(t, w.NormalizeAddress(addr), w.NormalizeAddress(w.NormalizeAddress(addr)))
	for _, bad := range []string{"", "not an address", addr + "0"} {
		_, err := w.ParseAddress(bad)
		require.ErrorIs(t, err, chains.ErrInvalidAddress, bad)
	}

	seed := make([]byte, 64)
	_, err = rand.Read(seed)
	require.NoError(t, err)
	k0, a0, err := w.DeriveKey(seed, 0)
	require.NoError(t, err)
	again, againAddr, err := w.DeriveKey(seed, 0)
	require.NoError(t, err)
	require.Equal(t, k0, again, "derivation is a function of seed and index")
	require.Equal(t, a0, againAddr)
	got, err = w.AddressOf(k0)
	require.NoError(t, err)
	require.Equal(t, a0, got)
	_, a1, err := w.DeriveKey(seed, 1)
	require.NoError(t, err)
	require.NotEqual(t, a0, a1)
	_, aMax, err := w.DeriveKey(seed, 1<<31-1)
	require.NoError(t, err)
	require.NotEqual(t, a0, aMax)
	_, _, err = w.DeriveKey(seed, 1<<31)
	require.Error(t, err, "indexes are below 2^31")
}

func newKey(t testing.TB, c Chain) ([]byte, string) {
	t.Helper()
	key, addr, err := c.Wallets.NewKey()
	require.NoError(t, err)
	return key, addr
}

// fundedKey is a new key holding units of USDC and nothing else.
func fundedKey(t testing.TB, c Chain, units int64) ([]byte, string) {
	t.Helper()
	key, addr := newKey(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := c.Fund(ctx, addr, big.NewInt(units))
	require.NoError(t, err)
	return key, addr
}

func randomRef(t testing.TB) [32]byte {
	t.Helper()
	var r [32]byte
	_, err := rand.Read(r[:])
	require.NoError(t, err)
	return r
}

func requireBalance(t testing.TB, l chains.Ledger, address string, units int64) {
	t.Helper()
	got, err := l.Balance(context.Background(), address)
	require.NoError(t, err)
	require.Equal(t, big.NewInt(units).String(), got.String(), "balance of %s", address)
}

// TestRPCDeadline checks that no call to a node that takes requests and
// never answers holds its caller past the RPC deadline, even a caller whose
// own context never ends: ledger reads, transfers, lookups and watcher
// polls all fail in time.
func TestRPCDeadline(t *testing.T, c Chain) {
	const deadline = 300 * time.Millisecond
	ctx := context.Background() // no deadline of the caller's
	url, hang := HangingProxy(t, c.RPCURL)
	n := c.Connect(t, url, deadline)
	w, err := n.NewWatcher(ctx, chains.WatcherState{})
	require.NoError(t, err)
	srcKey, src := fundedKey(t, c, 1_000_000)
	_, dst := newKey(t, c)
	fundTx, err := c.Fund(ctx, dst, big.NewInt(1))
	require.NoError(t, err)
	req := chains.TransferRequest{Key: srcKey, To: dst, Amount: big.NewInt(1_000), Ref: randomRef(t)}
	list := n.NewWatchlist([]string{dst})

	hang()
	l := n.Ledger
	for name, call := range map[string]func() error{
		"Head":     func() error { _, err := l.Head(ctx); return err },
		"Balance":  func() error { _, err := l.Balance(ctx, src); return err },
		"Transfer": func() error { _, err := l.Transfer(ctx, req); return err },
		"Receipt":  func() error { _, err := l.Receipt(ctx, fundTx); return err },
		"FindTransfer": func() error {
			_, _, err := l.FindTransfer(ctx, chains.TransferQuery{From: src, To: dst, Amount: req.Amount, Ref: req.Ref})
			return err
		},
		"Poll": func() error { _, err := w.Poll(ctx, list); return err },
	} {
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			require.Error(t, err, name)
			require.Less(t, time.Since(start), 10*deadline, name)
		case <-time.After(time.Minute):
			t.Fatalf("%s still waits on a hung node after a minute", name)
		}
	}
}

// HangingProxy forwards HTTP requests to target until hang is called; from
// then on it holds every request unanswered until its client gives up (or
// the test ends), as a node that accepts connections and never answers.
func HangingProxy(t testing.TB, target string) (url string, hang func()) {
	t.Helper()
	u, err := neturl.Parse(target)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var hung atomic.Bool
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hung.Load() {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: frees held requests
	return srv.URL, func() { hung.Store(true) }
}

// HeadCounter is a ledger that counts its Head calls (each one a call to
// the node), for tests of what reading heads costs.
type HeadCounter struct {
	chains.Ledger
	calls atomic.Int64
}

// CountHeads wraps l.
func CountHeads(l chains.Ledger) *HeadCounter { return &HeadCounter{Ledger: l} }

// Head counts the call and asks the ledger.
func (h *HeadCounter) Head(ctx context.Context) (uint64, error) {
	h.calls.Add(1)
	return h.Ledger.Head(ctx)
}

// Calls is how many Head calls were made.
func (h *HeadCounter) Calls() int64 { return h.calls.Load() }
