package agentpay

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/chaincursor"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
)

// ScanResult is what one scan of a chain found.
type ScanResult struct {
	Next   uint64
	Events []chains.DepositEvent
	// Head is the chain's head as the scan read it (0 when unknown): with
	// Next, how far the scan is behind the chain.
	Head uint64
}

// ScanDeposits advances the deposit watcher of one chain in one mode: it
// resumes from the saved cursor, polls the chain for the watched deposit
// addresses, records what changed (payments and session transitions with
// their webhook events, see checkout_payments.go) and saves the new cursor in the same
// transaction. It watches the treasury and the custodial wallets too, and
// records what reaches them from outside, once final, as fundings
// (treasury_fundings.go); those are not in the result's Events, which are the
// deposit addresses'. A crash between poll and commit re-scans the same blocks
// rather than skipping them, and the watcher reports each change once per
// state, so nothing is lost or counted twice.
func (s *Service) ScanDeposits(ctx context.Context, mode Mode, chain chains.Name) (ScanResult, error) {
	return s.ScanDepositsWith(ctx, mode, chain, nil)
}

// ScanDepositsWith is ScanDeposits that also runs inTx (when not nil) in the
// scan's transaction, after the cursor is saved: the worker completes the
// scan's job there (river.JobCompleteTx), so the job is finished the moment
// the scan's changes are committed, and the chain's next scan can be
// enqueued at once rather than after River records the completion on its
// own, in batches, up to hundreds of milliseconds later (the chain's scan
// is unique while running). inTx failing rolls the scan back, as any other
// failure in the transaction.
func (s *Service) ScanDepositsWith(ctx context.Context, mode Mode, chain chains.Name, inTx func(ctx context.Context, tx *sql.Tx) error) (ScanResult, error) {
	network, ok := s.networks(mode)[chain]
	if !ok || network.NewWatcher == nil {
		return ScanResult{}, Invalid("chain", "%s is not available in %s mode", chain, mode)
	}
	if err := s.ensureCursor(ctx, mode, chain); err != nil {
		return ScanResult{}, err
	}
	saved, err := s.loadCursor(ctx, mode, chain)
	if err != nil {
		return ScanResult{}, err
	}
	key := string(mode) + "/" + string(chain)
	w, err := s.watchers.get(ctx, key, saved, network.NewWatcher)
	if err != nil {
		return ScanResult{}, fmt.Errorf("deposit watcher %s: %w", key, err)
	}
	// What is watched is read inside the poll, after the watcher has read
	// the head (chains.LazyWatchlist): read here, before the poll, an
	// address issued and paid meanwhile would be missed for good.
	var (
		addrs   []string
		holders inboundWatch
	)
	watchlist := chains.NewLazyWatchlist(func() (chains.Watchlist, error) {
		var err error
		if addrs, err = s.watchedAddresses(ctx, mode, chain); err != nil {
			return nil, err
		}
		// The holders are watched too: what reaches them from outside is
		// recorded as a funding (treasury_fundings.go), for the books.
		if holders, err = s.inboundHolders(ctx, mode, chain); err != nil {
			return nil, err
		}
		watched := append([]string(nil), addrs...)
		for _, a := range holders {
			watched = append(watched, a)
		}
		return network.NewWatchlist(watched), nil
	})
	polled, err := w.Poll(ctx, watchlist)
	if err == nil {
		// A poll that matched no transfer has not read the list; its
		// events (confirmations of known deposits) still need it.
		_, err = watchlist.Load()
	}
	if err != nil {
		s.watchers.drop(key)
		return ScanResult{}, fmt.Errorf("deposit scan %s: %w", key, err)
	}
	var events, toHolders []chains.DepositEvent
	for _, ev := range polled {
		if _, ok := holders[s.wallets(chain).NormalizeAddress(ev.Deposit.To)]; ok {
			toHolders = append(toHolders, ev)
		} else {
			events = append(events, ev)
		}
	}
	fundings := s.readInbound(holders, chain, toHolders)
	head := w.Head()
	if head > 0 {
		s.heads.Put(headKey{mode, chain}, head) // what the chains' readers are shown
	}
	state := w.State()
	byNorm := make(map[string]string, len(addrs))
	for _, a := range addrs {
		byNorm[s.wallets(chain).NormalizeAddress(a)] = a
	}
	var apply *depositTx // the last try's, whose changes committed
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		apply = &depositTx{s: s, tx: tx, sqlTx: sqlTx, mode: mode, chain: chain,
			decimals: USDCDecimals, addrs: byNorm}
		if network.Ledger != nil {
			apply.decimals = network.Ledger.Decimals()
		}
		if err := apply.preload(ctx, events); err != nil {
			return err
		}
		for _, ev := range events {
			s.logger.InfoContext(ctx, "deposit", "chain", chain, "mode", mode, "kind", ev.Kind,
				"tx", ev.Deposit.TxHash, "to", ev.Deposit.To, "amount", ev.Deposit.Amount,
				"confirmations", ev.Confirmations, "required", ev.Required)
			// Payments and session transitions (checkout_payments.go), in the same
			// transaction as the cursor: a crash re-applies the events,
			// which changes nothing the second time.
			if err := apply.apply(ctx, ev); err != nil {
				return fmt.Errorf("deposit %s (%s): %w", ev.Deposit.Key(), ev.Kind, err)
			}
		}
		if err := s.recordInbound(ctx, tx, mode, chain, fundings); err != nil {
			return err
		}
		if err := saveCursor(ctx, tx, mode, chain, state); err != nil {
			return err
		}
		if inTx != nil {
			return inTx(ctx, sqlTx)
		}
		return nil
	})
	if err != nil {
		s.watchers.drop(key)
		return ScanResult{}, err
	}
	for _, status := range apply.statuses {
		s.observer().PaymentStatus(string(mode), string(chain), status)
	}
	return ScanResult{Next: state.Next, Events: events, Head: head}, nil
}

// How long a deposit address is watched (design.md section 3: a payment
// after its session ended is recorded, held for refund, never lost): while
// its session is open, for Config.LatePaymentWindow after the session
// ended (confirmed, expired or cancelled), and until every payment recorded
// on it is swept (treasury_sweeps.go; deposit_addresses.swept). After that the scan stops
// reading it: every address ever issued would otherwise be loaded and
// matched against on every scan for ever (the watchers follow transfers,
// so the chains are not asked per address, but the set still grows). A
// payment made to it later is not seen by the service; the funds stay at an
// address whose key the service can always derive (DepositAddressKey), for
// an operator to recover by hand.
//
// When the session ended is copied to its addresses (session_ended_at) by
// EndDepositWatches, after the fact: until then an address counts as its
// session's open one, which errs on watching longer.

// DefaultLatePaymentWindow is Config.LatePaymentWindow's default: a day, for
// a payer whose wallet broadcast late or who paid an old page, at the cost
// of a day of reads of each address a session was given.
const DefaultLatePaymentWindow = 24 * time.Hour

func (s *Service) latePaymentWindow() time.Duration {
	if s.cfg.LatePaymentWindow > 0 {
		return s.cfg.LatePaymentWindow
	}
	return DefaultLatePaymentWindow
}

// watchedAddresses lists the deposit addresses of a chain and mode the scan
// watches: those of open sessions, of sessions ended less than the
// late-payment window ago, and those with a payment not swept yet.
func (s *Service) watchedAddresses(ctx context.Context, mode Mode, chain chains.Name) ([]string, error) {
	since := s.now().Add(-s.latePaymentWindow())
	return s.cfg.DB.Ent.DepositAddress.Query().
		Where(
			depositaddress.Chain(string(chain)),
			depositaddress.Or(
				depositaddress.SessionEndedAtIsNil(),
				depositaddress.SessionEndedAtGT(since),
				// Not swept yet: watched until it is (an address with no
				// payment has nothing to sweep).
				depositaddress.And(depositaddress.Swept(false), depositaddress.HasPaymentsWith(paymentToSweep())),
			),
			depositaddress.HasSessionWith(checkoutsession.Livemode(mode == ModeLive)),
		).
		Select(depositaddress.FieldAddress).
		Strings(ctx)
}

// endWatchBatch bounds the sessions EndDepositWatches handles per chain and
// run; a backlog is worked off over the following runs.
const endWatchBatch = 500

// EndDepositWatches copies, to the deposit addresses of sessions that have
// ended, when their session ended, so the scan stops watching them once the
// late-payment window has passed. The expire_sessions job runs it after
// each expiry run; it is idempotent. It answers how many addresses it
// marked.
func (s *Service) EndDepositWatches(ctx context.Context) (int, error) {
	marked := 0
	for _, chain := range chains.All {
		ended, err := s.cfg.DB.Ent.CheckoutSession.Query().
			Where(
				checkoutsession.StatusIn(endedStatuses...),
				checkoutsession.HasDepositAddressesWith(
					depositaddress.Chain(string(chain)),
					depositaddress.SessionEndedAtIsNil(),
				),
			).
			Limit(endWatchBatch).
			All(ctx)
		if err != nil {
			return marked, fmt.Errorf("listing ended sessions on %s: %w", chain, err)
		}
		for _, sess := range ended {
			at, ok := sessionEndedAt(sess)
			if !ok {
				// Ended without its time recorded: watched the window
				// from now, never less.
				at = s.now().UTC()
			}
			n, err := s.cfg.DB.Ent.DepositAddress.Update().
				Where(depositaddress.SessionID(sess.ID), depositaddress.SessionEndedAtIsNil()).
				SetSessionEndedAt(at).
				Save(ctx)
			if err != nil {
				return marked, fmt.Errorf("ending the watch of session %s: %w", sess.ExternalID, err)
			}
			marked += n
		}
	}
	return marked, nil
}

func (s *Service) loadCursor(ctx context.Context, mode Mode, chain chains.Name) (*chains.WatcherState, error) {
	row, err := s.cfg.DB.Ent.ChainCursor.Query().
		Where(chaincursor.Chain(string(chain)), chaincursor.ModeEQ(chaincursor.Mode(mode))).
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := &chains.WatcherState{}
	// The column holds the whole WatcherState as JSON; cursors saved before
	// that hold only the pending deposits, as a JSON array.
	switch raw := bytes.TrimSpace(row.Pending); {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] == '[':
		err = json.Unmarshal(raw, &st.Pending)
	default:
		err = json.Unmarshal(raw, st)
	}
	if err != nil {
		return nil, fmt.Errorf("chain cursor %s/%s: %w", mode, chain, err)
	}
	// next_block is written with the JSON in one update; the column is
	// what other queries read, so it is the authority.
	st.Next = uint64(row.NextBlock)
	return st, nil
}

// ensureCursor starts a chain's scan cursor at the chain's head if it has
// none yet. Checkout selects call it before handing out an address and
// scans before building a watcher, so whichever comes first fixes where
// scanning starts, never after a payment to an address already given out.
// Concurrent callers race on the unique (chain, mode) index; the first
// insert wins and the others leave it be.
func (s *Service) ensureCursor(ctx context.Context, mode Mode, chain chains.Name) error {
	exists, err := s.cfg.DB.Ent.ChainCursor.Query().
		Where(chaincursor.Chain(string(chain)), chaincursor.ModeEQ(chaincursor.Mode(mode))).
		Exist(ctx)
	if err != nil || exists {
		return err
	}
	network := s.networks(mode)[chain]
	if network.Ledger == nil {
		return nil // the watcher starts at its own idea of the head
	}
	head, err := network.Ledger.Head(ctx)
	if err != nil {
		return fmt.Errorf("%s head: %w", chain, err)
	}
	state, err := json.Marshal(chains.WatcherState{Next: head})
	if err != nil {
		return err
	}
	err = s.cfg.DB.Ent.ChainCursor.Create().
		SetChain(string(chain)).
		SetMode(chaincursor.Mode(mode)).
		SetNextBlock(int64(head)).
		SetPending(state).
		Exec(ctx)
	if ent.IsConstraintError(err) {
		return nil
	}
	return err
}

func saveCursor(ctx context.Context, tx *ent.Tx, mode Mode, chain chains.Name, st chains.WatcherState) error {
	// The whole state (pending deposits, reorg checkpoints...) goes in the
	// pending column; Next also goes in next_block.
	pending, err := json.Marshal(st)
	if err != nil {
		return err
	}
	n, err := tx.ChainCursor.Update().
		Where(chaincursor.Chain(string(chain)), chaincursor.ModeEQ(chaincursor.Mode(mode))).
		SetNextBlock(int64(st.Next)).
		SetPending(pending).
		Save(ctx)
	if err != nil || n > 0 {
		return err
	}
	return tx.ChainCursor.Create().
		SetChain(string(chain)).
		SetMode(chaincursor.Mode(mode)).
		SetNextBlock(int64(st.Next)).
		SetPending(pending).
		Exec(ctx)
}

// watcherCache keeps each chain's watcher between scans (building one costs
// RPC calls); a watcher whose position differs from the saved cursor (another
// worker process scanned since) is rebuilt from the cursor.
type watcherCache struct {
	mu sync.Mutex
	m  map[string]chains.Watcher
}

func newWatcherCache() *watcherCache { return &watcherCache{m: map[string]chains.Watcher{}} }

func (c *watcherCache) get(ctx context.Context, key string, saved *chains.WatcherState, build chains.WatcherFactory) (chains.Watcher, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.m[key]; ok && (saved == nil || w.State().Next == saved.Next) {
		return w, nil
	}
	var st chains.WatcherState
	if saved != nil {
		st = *saved
	}
	w, err := build(ctx, st)
	if err != nil {
		return nil, err
	}
	closeWatcher(c.m[key])
	c.m[key] = w
	return w, nil
}

func (c *watcherCache) drop(key string) {
	c.mu.Lock()
	closeWatcher(c.m[key])
	delete(c.m, key)
	c.mu.Unlock()
}

// closeWatcher releases a watcher's connection when it holds one.
func closeWatcher(w chains.Watcher) {
	if c, ok := w.(interface{ Close() }); ok {
		c.Close()
	}
}
