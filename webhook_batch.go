package agentpay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"agentpay/ent/webhookdelivery"
	"agentpay/internal/webhooksend"
)

// Batches of deliveries (issue 26). A delivery job of a receiver that answers
// (proven, webhook_receivers.go) does not try its own delivery alone: it
// claims up to webhookBatchMax of the merchant's due deliveries of the mode
// in one statement (webhooksend.Claim, its own first), reads them in one
// more, tries them on the merchant's cap of lanes at once, and records the
// tries as they end (shared statements, webhook_tries.go). One River fetch
// and completion so deliver many webhooks, and a receiver that answers at
// once never meets the cap's turning away and snoozing, which is for
// receivers that hold their tries.
//
// The claim is a lease written in the delivery's next_attempt_at (until
// webhookLease from the claim): no other batch takes a claimed delivery,
// and a batch whose process dies leaves its untried deliveries due again
// when the lease ends. Each delivery keeps its own River job, which is what
// brings it back: a job whose delivery another batch holds, or whose next
// try is not due, waits until its next_attempt_at (snoozed) and then finds
// it done (nothing to do) or due (claims it). So at-least-once holds
// through any crash: a delivery is pending with a job until a try is
// recorded; a try is recorded once, by the batch that made it, and only if
// the delivery is still pending then (webhookTry). No try of a batch starts
// after webhookBatchWindow, so every try (WebhookTimeout) ends and is
// recorded before the lease does; what a batch did not try (its cap turned
// it away, its receiver turned slow, its window closed) it gives back at
// once (webhooksend.Release). A worker stopping mid-batch gives back what
// it had not posted too; only the tries its stop cut mid-post wait for the
// lease's end, as after a crash.
//
// On PostgreSQL a try that finishes its delivery (succeeded, or failed for
// good) removes the delivery's River job in the statement that records it,
// unless River is running it (webhooksend.RecordPostgres), and the claim
// defers its deliveries' waiting jobs to the lease's end (webhooksend.Claim;
// Release brings them back): the jobs of a batch's deliveries were
// otherwise each fetched, read and snoozed for nothing, and fetched again at
// the lease's end. On SQLite those statements cost more than they saved
// (webhooksend.Claim says why), and the jobs come back as before.
//
// New and slow receivers are tried one delivery a job, as before: a new
// receiver gets one try at a time anyway, and a slow one's tries must not
// hold a batch's lease.
const (
	// webhookBatchMax is how many deliveries one job claims at most: a
	// tenth of a second of a receiver taking 1,000 a second.
	webhookBatchMax = 100
	// webhookLease is how long a claimed delivery is held.
	webhookLease = WebhookRunTimeout
	// webhookBatchWindow: no try of a batch starts later than this after
	// its claim, leaving WebhookTimeout for the try and 10 s to record it
	// within the lease.
	webhookBatchWindow = webhookLease - WebhookTimeout - 10*time.Second
	// webhookBatchRecheck is about when a job whose due delivery a batch
	// of this process will take looks again.
	webhookBatchRecheck = time.Second
	// webhookGiveBackTimeout bounds a claim and giving back a stopping
	// batch's unposted deliveries (a statement each), which the stop does
	// not cut; past it they wait for their lease's end.
	webhookGiveBackTimeout = 5 * time.Second
)

// WebhookBatchResult is what one DeliverWebhookBatch call did.
type WebhookBatchResult struct {
	// Own is what became of the job's own delivery, when Wait is 0.
	Own WebhookDeliveryResult
	// Others are the tries made of the batch's other deliveries.
	Others []WebhookDeliveryResult
	// Wait: the own delivery is held by another batch or its next try is
	// not due yet; ask again after Wait (nothing of it was sent).
	Wait time.Duration
}

// DeliverWebhookBatch tries delivery deliveryID of the merchant's mode, and
// with it the merchant's other due deliveries of the mode when its receiver
// is proven (see the top of this file): it claims them a batch at a time,
// its own first, until none is due or its window closes. One batch of a
// merchant's mode runs at a time in a process (its lanes are the cap): a
// job that finds one running is Busy, and finds its delivery done when it
// comes back. merchantID uuid.Nil (a job from before the batches) tries
// the one delivery (DeliverWebhook). The error is for failures before the
// own delivery's try, or recording it.
//
// onTried, when not nil, is told each of the other deliveries' tries as it
// is recorded (the worker's metrics), not when the batch ends, which can
// be webhookBatchWindow later.
func (s *Service) DeliverWebhookBatch(ctx context.Context, deliveryID, merchantID uuid.UUID, livemode bool, onTried func(WebhookDeliveryResult)) (WebhookBatchResult, error) {
	key := webhookGateKey{merchantID: merchantID, livemode: livemode}
	if merchantID == uuid.Nil || s.webhookReceivers.class(key) != receiverProven {
		return s.deliverWebhookAlone(ctx, deliveryID)
	}
	if _, running := s.webhookBatching.LoadOrStore(key, true); running {
		// The running batch takes the delivery if it is due; its job comes
		// back after the batch's turn (Busy), or when it is next due.
		return s.webhookNotClaimed(ctx, deliveryID, true)
	}
	defer s.webhookBatching.Delete(key)

	b := &webhookBatch{s: s, key: key, deadline: time.Now().Add(webhookBatchWindow), own: deliveryID, onTried: onTried,
		results: map[uuid.UUID]WebhookDeliveryResult{}, errs: map[uuid.UUID]error{}}
	cur, err := b.claim(ctx, deliveryID)
	if err != nil {
		return WebhookBatchResult{}, err
	}
	own := len(cur.ids) > 0 && cur.ids[0] == deliveryID
	// The next chunk is claimed and read while the lanes try this one: the
	// database's round trips overlap the receiver's.
	for len(cur.ids) > 0 {
		done := make(chan bool, 1)
		go func(c webhookChunk) { done <- b.try(ctx, c) }(cur)
		var next webhookChunk
		if b.going(ctx) {
			if next, err = b.claim(ctx, uuid.Nil); err != nil {
				s.logger.WarnContext(ctx, "claiming webhook deliveries", "err", err)
			}
		}
		if tried := <-done; !tried && len(next.ids) > 0 {
			// The cap turned every lane away (single tries hold it):
			// what was claimed ahead goes back.
			b.giveBack(ctx, next.ids, next.lease)
			break
		}
		cur = next
	}
	b.records.Wait()

	var out WebhookBatchResult
	for id, r := range b.results {
		if id != deliveryID {
			out.Others = append(out.Others, r)
		}
	}
	if own {
		if err := b.errs[deliveryID]; err != nil {
			return out, err
		}
		r, ok := b.results[deliveryID]
		if !ok {
			// Given back untried (its receiver turned slow): its turn
			// comes as a busy delivery's does.
			r = WebhookDeliveryResult{DeliveryID: deliveryID, Livemode: livemode, Status: webhookdelivery.StatusPending, Busy: true}
		}
		out.Own = r
		return out, nil
	}
	// Not claimed: done, held by another process's batch, not due yet,
	// or being claimed by another process right now.
	res, err := s.webhookNotClaimed(ctx, deliveryID, false)
	res.Others = out.Others
	return res, err
}

// deliverWebhookAlone claims the one delivery and tries it
// (DeliverWebhook): the claim keeps a batch from taking it meanwhile.
func (s *Service) deliverWebhookAlone(ctx context.Context, deliveryID uuid.UUID) (WebhookBatchResult, error) {
	now := s.now().UTC()
	lease := now.Add(webhookLease).Truncate(time.Microsecond)
	ok, err := webhooksend.ClaimOne(ctx, s.cfg.DB, deliveryID, now, lease)
	if err != nil {
		return WebhookBatchResult{}, fmt.Errorf("agentpay: claiming webhook delivery: %w", err)
	}
	if !ok {
		return s.webhookNotClaimed(ctx, deliveryID, false)
	}
	res, err := s.DeliverWebhook(ctx, deliveryID)
	if ctx.Err() == nil && (res.Busy || (err != nil && res.Attempt == nil)) {
		// Not tried: due again now, not at the lease's end.
		if rerr := webhooksend.ReleaseOne(ctx, s.cfg.DB, deliveryID, lease, s.now()); rerr != nil {
			s.logger.WarnContext(ctx, "giving back a webhook delivery", "delivery", deliveryID, "err", rerr)
		}
	}
	return WebhookBatchResult{Own: res}, err
}

// webhookNotClaimed is what becomes of a job's delivery that its job did
// not claim: nothing to do when it is done; otherwise wait until it is
// next due (its next try, or the end of the lease of the batch holding it),
// or, when it is due, Busy if a batch of its merchant runs in this process
// (batchRunning, which will take it), a short wait if not (another process
// is claiming it).
func (s *Service) webhookNotClaimed(ctx context.Context, deliveryID uuid.UUID, batchRunning bool) (WebhookBatchResult, error) {
	now := s.now().UTC()
	d, err := s.loadDeliveryToSend(ctx, deliveryID)
	if err != nil {
		return WebhookBatchResult{}, err
	}
	var out WebhookBatchResult
	out.Own = WebhookDeliveryResult{DeliveryID: deliveryID, Livemode: d.livemode, Status: d.status, Tries: d.tries}
	switch {
	case d.status != webhookdelivery.StatusPending:
		out.Own.Done = true
	case d.nextAttemptAt != nil && d.nextAttemptAt.After(now):
		// Bounded: the job's wait is on the real clock, the lease on
		// the service's.
		out.Wait = min(max(d.nextAttemptAt.Sub(now), 10*time.Millisecond), webhookLease+time.Second)
	case batchRunning:
		// The batch will take it: come back once it has (the batch's
		// chunks take tens of milliseconds each), not at the paced turn
		// of a busy merchant's single tries, which for a fast receiver
		// is milliseconds and made every waiting job a fetch and a read
		// again and again.
		out.Wait = webhookBatchRecheck/2 + rand.N(webhookBatchRecheck/2)
	default:
		out.Wait = WebhookBusyDelay(0)
	}
	return out, nil
}

// webhookBatch is one running batch of a merchant's mode.
type webhookBatch struct {
	s        *Service
	key      webhookGateKey
	deadline time.Time
	// records are the tries being recorded; results the recorded ones;
	// errs why a delivery was neither tried nor given back (a try that
	// ctx ended, a vault error) or its try not recorded: those wait for
	// the lease's end.
	records sync.WaitGroup
	mu      sync.Mutex
	results map[uuid.UUID]WebhookDeliveryResult
	errs    map[uuid.UUID]error
	// own is the job's own delivery; onTried is told each other one's
	// recorded try (DeliverWebhookBatch).
	own     uuid.UUID
	onTried func(WebhookDeliveryResult)
}

// webhookChunk is one claim of a batch: the deliveries and their rows.
type webhookChunk struct {
	ids   []uuid.UUID
	rows  map[uuid.UUID]*webhooksend.Delivery
	lease time.Time
}

// going: the batch may claim more.
func (b *webhookBatch) going(ctx context.Context) bool {
	return ctx.Err() == nil && time.Now().Before(b.deadline) && b.s.webhookReceivers.class(b.key) == receiverProven
}

// claim claims the merchant's next due deliveries (first first, when not
// uuid.Nil) and reads them. An error reading them leaves them to their
// lease's end.
func (b *webhookBatch) claim(ctx context.Context, first uuid.UUID) (webhookChunk, error) {
	s := b.s
	now := s.now().UTC()
	// Microseconds: what PostgreSQL keeps, so Release finds the lease it
	// wrote.
	c := webhookChunk{lease: now.Add(webhookLease).Truncate(time.Microsecond)}
	// Not ended by the worker's stop: a claim cut after its commit would
	// hold deliveries no one knows of until the lease's end; what it
	// returns after the stop is given back by the lanes (try).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), webhookGiveBackTimeout)
	defer cancel()
	ids, err := webhooksend.Claim(ctx, s.cfg.DB, b.key.merchantID, b.key.livemode, first, now, c.lease, webhookBatchMax)
	if err != nil {
		return webhookChunk{}, fmt.Errorf("agentpay: claiming webhook deliveries: %w", err)
	}
	if len(ids) == 0 {
		return webhookChunk{}, nil
	}
	c.rows, err = webhooksend.LoadMany(ctx, s.cfg.DB, ids)
	if err != nil {
		return webhookChunk{}, fmt.Errorf("agentpay: reading webhook deliveries: %w", err)
	}
	c.ids = ids
	return c, nil
}

// giveBack makes ids, none of which was posted, due again now. When ctx
// has ended (the worker stopping) it still does, on a context of its own:
// another worker takes them at once rather than at the lease's end. A try
// cut mid-post by the stop is not among them: it may have reached its
// receiver, and keeps its lease, as after a crash.
func (b *webhookBatch) giveBack(ctx context.Context, ids []uuid.UUID, lease time.Time) {
	if len(ids) == 0 {
		return
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), webhookGiveBackTimeout)
		defer cancel()
	}
	if err := webhooksend.Release(ctx, b.s.cfg.DB, ids, lease, b.s.now()); err != nil {
		// They are due again at the lease's end.
		b.s.logger.WarnContext(ctx, "giving back webhook deliveries", "deliveries", len(ids), "err", err)
	}
}

// try tries the chunk's deliveries on the merchant's cap of lanes; each try
// is recorded as it ends (b.records), and what was not tried is given back.
// tried: at least one try was made.
func (b *webhookBatch) try(ctx context.Context, c webhookChunk) (tried bool) {
	s := b.s
	ids, rows := c.ids, c.rows
	var (
		mu      sync.Mutex
		next    int
		stopped bool
		unsent  []uuid.UUID
		lanes   sync.WaitGroup
	)
	// take is the next delivery to try; false once there is none, or the
	// batch stopped (what is left is given back).
	take := func() (uuid.UUID, bool) {
		mu.Lock()
		defer mu.Unlock()
		if stopped || next == len(ids) {
			return uuid.Nil, false
		}
		next++
		return ids[next-1], true
	}
	giveBack := func(id uuid.UUID, stop bool) {
		mu.Lock()
		defer mu.Unlock()
		unsent = append(unsent, id)
		stopped = stopped || stop
	}
	fail := func(id uuid.UUID, err error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.errs[id] = err
	}
	for range min(s.webhookMerchantConcurrency(), len(ids)) {
		lanes.Add(1)
		go func() {
			defer lanes.Done()
			for {
				id, ok := take()
				if !ok {
					return
				}
				row := rows[id]
				if row == nil {
					continue // removed since (a merchant's data pruned)
				}
				d := deliveryFromRow(row)
				if ctx.Err() != nil {
					// Stopping, and not posted: given back.
					giveBack(id, true)
					continue
				}
				if time.Now().After(b.deadline) || s.webhookReceivers.class(b.key) != receiverProven {
					giveBack(id, true)
					continue
				}
				sent, err := s.sendWebhookTry(ctx, d)
				if errors.Is(err, errWebhookNotPosted) {
					// Stopping, and none of it sent: given back.
					giveBack(id, true)
					continue
				}
				if err != nil {
					fail(id, err)
					continue
				}
				if sent == nil {
					// The cap is full (single tries of the merchant
					// hold it): this lane ends, the others go on.
					giveBack(id, false)
					return
				}
				mu.Lock()
				tried = true
				mu.Unlock()
				b.records.Add(1)
				go func() {
					defer b.records.Done()
					r, err := s.recordWebhookSent(ctx, id, d, sent)
					b.mu.Lock()
					if err != nil {
						b.errs[id] = err
					} else {
						b.results[id] = r
					}
					b.mu.Unlock()
					if err == nil && id != b.own && b.onTried != nil {
						b.onTried(r)
					}
				}()
			}
		}()
	}
	lanes.Wait()
	b.giveBack(ctx, append(unsent, ids[next:]...), c.lease)
	return tried
}
