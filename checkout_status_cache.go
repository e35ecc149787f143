package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"agentpay/internal/authcache"
	"agentpay/internal/statusbus"
	"agentpay/internal/store"
)

// The checkout status cache: what CheckoutStatus read of a session, kept
// per process and dropped by the status bus (internal/statusbus) when a
// transaction of any process commits a change to it, so a session read by
// many polls costs one database read per change instead of one per poll
// (issue 26: the status poll was 0.45 of a bare handler).
//
// What the answer shows changes only in transactions that publish on the
// bus: a session's status, chain and token with its status
// (publishSessionStatus: select, cancel, expire, the deposit transitions),
// its payments' amounts, statuses and confirmations with
// publishSessionChanged (every payment write of checkout_payments.go). A process
// caches only while it watches both topics (CacheCheckoutStatuses, which
// `agentpay serve` starts); a read racing a change's commit is not stored
// (authcache's epochs). How stale an answer may be:
//
//   - This process's own changes: never (the publishing transaction drops
//     the session as it commits, dropOnCommit, before the bus's
//     notification comes back).
//   - Another process's (the worker's): until its NOTIFY arrives, the
//     time PostgreSQL takes to deliver it after the commit.
//   - While the listener connection is lost: the bus tells the watcher at
//     once, which forgets everything; what is read until the connection is
//     back may miss changes of the outage, and is forgotten again on
//     reconnection. StatusCacheTTL bounds all of it (an entry is never
//     served longer than that after its read began).

// sessionChangedTopic is the bus topic of changes to a session's payments
// that leave its status as it is (an amount seen, a confirmation, a late
// payment, a reorg), keyed by the session's external id. The message
// means nothing; the status cache drops the session.
const sessionChangedTopic statusbus.Topic = "session_changed"

// DefaultStatusCacheTTL is how long a cached checkout status is served at
// most (Config.StatusCacheTTL): a bound on what a lost notification can
// leave stale, longer than the page's 3-second poll so a poll mostly reads
// memory.
const DefaultStatusCacheTTL = 10 * time.Second

// statusCache is the checkout status cache of a process.
type statusCache struct {
	cache *authcache.Cache[cachedStatus]
	// watching counts the CacheCheckoutStatuses in force: cached only while
	// positive.
	watching atomic.Int32
}

// cachedStatus is a session's status as read, without what the
// configuration adds (Required).
type cachedStatus struct {
	externalID string
	st         CheckoutStatus
	livemode   bool
	merchantID uuid.UUID
}

// statusOwnerSpace names the cache owners of sessions: the bus knows a
// session by its external id, authcache an owner by UUID.
var statusOwnerSpace = uuid.MustParse("4f0c1c52-9d5e-4f3e-a7a8-6b2a1d0e8c11")

func statusOwner(externalID string) uuid.UUID {
	return uuid.NewSHA1(statusOwnerSpace, []byte(externalID))
}

func newStatusCache(cfg Config) *statusCache {
	return &statusCache{cache: authcache.New(cfg.StatusCacheTTL, cfg.Clock,
		func(c cachedStatus) uuid.UUID { return statusOwner(c.externalID) },
		func(c cachedStatus) cachedStatus { return c })}
}

// CacheCheckoutStatuses lets CheckoutStatus answer from memory until ctx
// ends, while this process hears every session change on the status bus
// (on PostgreSQL the process's listener connection stays open meanwhile).
// It returns once both topics are heard, or the error that prevents it
// (nothing is cached then).
func (s *Service) CacheCheckoutStatuses(ctx context.Context) error {
	if s.cfg.StatusCacheTTL <= 0 {
		return nil
	}
	c := s.statuses
	drop := func(key, _ string) {
		if key == statusbus.Resync {
			c.cache.AllChanged()
			return
		}
		c.cache.OwnerChanged(statusOwner(key))
	}
	ctx, cancel := context.WithCancel(ctx)
	for _, topic := range []statusbus.Topic{sessionStatusTopic, sessionChangedTopic} {
		if err := s.bus.Watch(ctx, topic, drop); err != nil {
			cancel()
			return fmt.Errorf("caching checkout statuses: %w", err)
		}
	}
	c.cache.AllChanged() // nothing read before the watch began is served
	c.watching.Add(1)
	go func() {
		defer cancel()
		<-ctx.Done()
		if c.watching.Add(-1) == 0 {
			c.cache.AllChanged()
		}
	}()
	return nil
}

// publishSessionChanged announces, from inside the transaction that makes
// it, a change of what a session's status answer shows other than its
// status (its payments): the status caches of every process drop the
// session once it commits. Once per session and transaction.
func (d *depositTx) publishSessionChanged(ctx context.Context, externalID string) error {
	if d.changed == nil {
		d.changed = map[string]bool{}
	}
	if d.changed[externalID] {
		return nil
	}
	if err := d.s.bus.Publish(ctx, d.sqlTx, sessionChangedTopic, externalID, "payments"); err != nil {
		return fmt.Errorf("publishing session change: %w", err)
	}
	d.s.statuses.dropOnCommit(ctx, d.sqlTx, externalID)
	d.changed[externalID] = true
	return nil
}

// dropOnCommit drops a session from this process's cache as soon as sqlTx
// (the WithTx transaction in ctx) commits, without waiting for the bus's
// notification (asynchronous on PostgreSQL): the process that commits a
// change never answers from before it. Outside such a transaction, at
// once (the notification then drops what a read racing the commit
// stored).
func (c *statusCache) dropOnCommit(ctx context.Context, sqlTx *sql.Tx, externalID string) {
	drop := func() { c.cache.OwnerChanged(statusOwner(externalID)) }
	if !store.AfterCommit(ctx, sqlTx, drop) {
		drop()
	}
}

// statusOf reads a session's status, from the cache when it is on; nil
// when there is no such session (never cached: a session created by
// another process shows at once).
func (s *Service) statusOf(ctx context.Context, externalID string) (*statusAcc, error) {
	c := s.statuses
	if c.watching.Load() <= 0 {
		return s.readStatusAcc(ctx, externalID)
	}
	if v, ok := c.cache.Get(externalID); ok {
		return &statusAcc{st: v.st, livemode: v.livemode, merchantID: v.merchantID, folded: true}, nil
	}
	r := c.cache.Begin()
	acc, err := s.readStatusAcc(ctx, externalID)
	if err != nil || acc == nil {
		return acc, err
	}
	acc.fold()
	c.cache.Put(r, externalID, cachedStatus{externalID: externalID, st: acc.st, livemode: acc.livemode, merchantID: acc.merchantID})
	return acc, nil
}
