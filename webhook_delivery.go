package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"agentpay/ent"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
	"agentpay/internal/jobs"
	"agentpay/internal/store"
	"agentpay/internal/webhooksend"
)

const (
	// WebhookTimeout bounds one try: connecting, sending, the answer's
	// headers and reading its body. A receiver slower than this has failed
	// that try.
	WebhookTimeout = 10 * time.Second
	// webhookJobSpareAttempts are River attempts beyond the delivery's tries,
	// for errors before any HTTP request (database unavailable...): the
	// delivery's own count decides when it has failed, not River's.
	webhookJobSpareAttempts = 10
	// webhookErrorMax bounds the error text kept per attempt.
	webhookErrorMax = 500
)

// DefaultWebhookRetryDelays is the retry schedule of spec 6.4, used when
// Config.WebhookRetryDelays is empty.
func DefaultWebhookRetryDelays() []time.Duration {
	return []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, 2 * time.Hour}
}

func (s *Service) webhookRetryDelays() []time.Duration {
	if len(s.cfg.WebhookRetryDelays) > 0 {
		return s.cfg.WebhookRetryDelays
	}
	return DefaultWebhookRetryDelays()
}

// webhookTries is how many times a delivery is tried before it is failed:
// the first try plus one per retry delay.
func (s *Service) webhookTries() int { return len(s.webhookRetryDelays()) + 1 }

// newDelivery starts a delivery series of an event to url and enqueues its
// job in the same transaction.
func (s *Service) newDelivery(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, ev *ent.WebhookEvent, url string) (*ent.WebhookDelivery, error) {
	if s.cfg.Jobs == nil {
		return nil, errors.New("agentpay: Config.Jobs is required to deliver webhooks")
	}
	// The job first: the delivery keeps its id, so the batch that records
	// the delivery's last try removes the job with it (webhook_batch.go).
	id := uuid.New()
	opts := &river.InsertOpts{MaxAttempts: s.webhookTries() + webhookJobSpareAttempts}
	args := jobs.DeliverWebhookArgs{DeliveryID: id, MerchantID: ev.MerchantID, Livemode: ev.Livemode}
	job, err := s.cfg.Jobs.InsertTx(ctx, sqlTx, args, opts)
	if err != nil {
		return nil, fmt.Errorf("agentpay: enqueueing webhook delivery: %w", err)
	}
	// Every time of the row by the service's clock: the retention
	// (webhook_retention.go) keeps an event for its deliveries created
	// within it by that clock.
	now := s.now().UTC()
	create := tx.WebhookDelivery.Create().
		SetID(id).
		SetEventID(ev.ID).
		SetURL(url).
		SetMerchantID(ev.MerchantID).
		SetLivemode(ev.Livemode).
		SetCreatedAt(now.Truncate(time.Microsecond)).
		SetUpdatedAt(now.Truncate(time.Microsecond)).
		SetNextAttemptAt(now)
	if job != nil && job.Job != nil {
		create.SetJobID(job.Job.ID)
	}
	return create.Save(ctx)
}

// RedeliverWebhook starts a new delivery series of one of the merchant's
// events to its current webhook URL of the event's mode: the same payload
// bytes (same event id), a fresh set of tries. Another merchant's event is
// ErrNotFound; a merchant with no webhook URL in that mode is a validation
// error; past the redelivery limits (allowRedelivery) a *RateLimitError. A
// refusal creates nothing.
func (s *Service) RedeliverWebhook(ctx context.Context, merchantID, eventID uuid.UUID) (*ent.WebhookDelivery, error) {
	ev, err := s.cfg.DB.Ent.WebhookEvent.Query().
		Where(webhookevent.ID(eventID), webhookevent.MerchantID(merchantID)).
		WithMerchant().
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: event %s", ErrNotFound, eventID)
	}
	if err != nil {
		return nil, err
	}
	url := WebhookURLOf(ev.Edges.Merchant, sessionModeOf(ev.Livemode))
	if url == "" {
		return nil, Invalid("webhook_url", "is not set: there is nowhere to deliver the event")
	}
	if err := s.allowRedelivery(ctx, ev); err != nil {
		return nil, err
	}
	if s.redeliveryRead != nil {
		s.redeliveryRead(ev.ID)
	}
	var d *ent.WebhookDelivery
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		// The event again, locked: the retention job (webhook_retention.go)
		// may have deleted it since the read above, and the delivery of a
		// deleted event would break its foreign key (a 500). Gone, it is not
		// found, as if the read had come after the prune. Locked, the
		// prune's batch, which locks its events and reads them again, leaves
		// it for this delivery.
		_, err := store.ForUpdate(s.cfg.DB, tx.WebhookEvent.Query().Where(webhookevent.ID(ev.ID))).Only(ctx)
		if ent.IsNotFound(err) {
			return fmt.Errorf("%w: event %s", ErrNotFound, eventID)
		}
		if err != nil {
			return fmt.Errorf("reading webhook event: %w", err)
		}
		d, err = s.newDelivery(ctx, tx, sqlTx, ev, url)
		return err
	})
	return d, err
}

// RedeliverOwnWebhook is RedeliverWebhook for an authenticated merchant:
// an event of the other mode is ErrNotFound too.
func (s *Service) RedeliverOwnWebhook(ctx context.Context, auth *MerchantAuth, eventID uuid.UUID) (*ent.WebhookDelivery, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, err
	}
	ok, err := s.WebhookEventsOf(auth).Where(webhookevent.ID(eventID)).Exist(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading webhook event: %w", err)
	}
	if !ok {
		return nil, errNoSuchWebhookEvent
	}
	return s.RedeliverWebhook(ctx, auth.Merchant.ID, eventID)
}

// WebhookDeliveryResult is what one DeliverWebhook call did.
type WebhookDeliveryResult struct {
	DeliveryID uuid.UUID
	// Livemode is the delivery's mode.
	Livemode bool
	// Status and Tries are the delivery's state after the call.
	Status webhookdelivery.Status
	Tries  int
	// Attempt is the try made by this call; nil when nothing was sent
	// (the delivery had already succeeded or failed).
	Attempt *ent.WebhookAttempt
	// Done: no further try will be made (succeeded, failed, or nothing to do).
	Done bool
	// Busy: the merchant's tries in flight in this mode are at the cap
	// (webhook_limits.go), so nothing was sent and no try is counted; ask
	// again after WebhookBusyWait. Not Done.
	Busy bool
	// RetryAt is when the next try is due, when not Done nor Busy.
	RetryAt time.Time
	// Err is why this call's try failed (nil on success).
	Err error
}

// DeliverWebhook makes one try of a pending delivery: POST the event's
// stored payload to the delivery's URL, signed, and record the attempt. A
// delivery already succeeded or failed is left alone (Done, nothing sent);
// one whose merchant is at its cap of tries in flight too (Busy).
// The returned error is for failures before any try (unknown delivery:
// ErrNotFound; database or vault errors); a failed try is reported in the
// result, with RetryAt, or Done when it was the last one.
func (s *Service) DeliverWebhook(ctx context.Context, deliveryID uuid.UUID) (WebhookDeliveryResult, error) {
	d, err := s.loadDeliveryToSend(ctx, deliveryID)
	if err != nil {
		return WebhookDeliveryResult{}, err
	}
	res := WebhookDeliveryResult{DeliveryID: deliveryID, Livemode: d.livemode, Status: d.status, Tries: d.tries}
	if d.status != webhookdelivery.StatusPending {
		res.Done = true
		return res, nil
	}
	sent, err := s.sendWebhookTry(ctx, d)
	if err != nil {
		return WebhookDeliveryResult{}, err
	}
	if sent == nil {
		res.Busy = true
		return res, nil
	}
	return s.recordWebhookSent(ctx, deliveryID, d, sent)
}

// webhookSent is a try that was made (or failed unsent), to record.
type webhookSent struct {
	at       time.Time
	code     int
	sendErr  error
	duration time.Duration
}

// sendWebhookTry makes one try of d, a pending delivery, under its
// merchant's cap: nil when the cap turned it away (nothing sent). The
// returned error is ctx's when it ended mid-try (worker shutdown: not the
// receiver's fault, not counted), or a vault error before any try.
func (s *Service) sendWebhookTry(ctx context.Context, d *deliveryToSend) (*webhookSent, error) {
	slot, tryCtx, ok := s.enterWebhookSlot(ctx, d.merchantID, d.livemode)
	if !ok {
		return nil, nil
	}
	left := false
	leave := func() {
		if !left {
			left = true
			s.leaveWebhookSlot(slot)
		}
	}
	defer leave()
	// The try is dated (signed, recorded, retried from) by the service's
	// clock; how long it took is measured on the real one.
	at := s.now()
	secret, previous, err := s.signingSecrets(d.merchantID, sessionModeOf(d.livemode), d.endpoint, at)
	if err != nil && !errors.Is(err, errNoWebhookSecret) {
		return nil, err
	}
	start := time.Now()
	var code int
	sendErr := err // no secret to sign with: a failed try, nothing sent
	if err == nil && d.url == "" {
		sendErr = errNoWebhookURL
	}
	// Whether any of the request reached the wire: a try the worker's stop
	// ends before that was not posted (errWebhookNotPosted).
	var wrote atomic.Bool
	tryCtx = httptrace.WithClientTrace(tryCtx, &httptrace.ClientTrace{WroteHeaderField: func(string, []string) { wrote.Store(true) }})
	if sendErr == nil {
		code, sendErr = webhooksend.Post(tryCtx, s.webhookClient(d.livemode), webhooksend.Request{
			URL: d.url, Payload: d.payload,
			Sign: webhooksend.StandardSignature(secret, d.eventID.String(), at, d.payload, previous...),
		})
	}
	duration := time.Since(start)
	// The receiver's part is over: its places (the merchant's cap, the
	// slow lane) go to the next try now, not after the try is recorded,
	// which is the database's time, not the receiver's. Held through the
	// recording, a receiver that answers at once got no more than the cap
	// over the recording's latency (279 deliveries/s for one merchant).
	slot.end()
	cut := errors.Is(context.Cause(tryCtx), errWebhookCut)
	leave()
	if sendErr != nil && cut {
		// Ended at WebhookSlowAfter for want of a place among slow
		// receivers: a failed try of this receiver.
		code, sendErr = 0, errWebhookCut
	}
	if ctx.Err() != nil {
		// Stopped (worker shutdown) or out of time mid-try: not the
		// receiver's fault, so not counted; the job runs again.
		if !wrote.Load() {
			return nil, fmt.Errorf("%w: %w", errWebhookNotPosted, ctx.Err())
		}
		return nil, ctx.Err()
	}
	return &webhookSent{at: at, code: code, sendErr: sendErr, duration: webhooksend.Duration(sendErr, duration)}, nil
}

// errWebhookNotPosted: a try ended (its context) before any of its request
// was written; the receiver got nothing of it.
var errWebhookNotPosted = errors.New("webhook try not posted")

// recordWebhookSent records the try sent of delivery d and says what it
// did: the delivery's state after it, when the next try is due.
func (s *Service) recordWebhookSent(ctx context.Context, deliveryID uuid.UUID, d *deliveryToSend, sent *webhookSent) (WebhookDeliveryResult, error) {
	res := WebhookDeliveryResult{DeliveryID: deliveryID, Livemode: d.livemode, Status: d.status, Tries: d.tries}
	at, code, sendErr, duration := sent.at, sent.code, sent.sendErr, sent.duration
	now := s.now().UTC()
	try := d.tries + 1
	res.Err = sendErr
	var errText string
	if sendErr != nil {
		errText = truncateUTF8(sendErr.Error(), webhookErrorMax)
	}
	delays := s.webhookRetryDelays()
	switch {
	case sendErr == nil:
		res.Status, res.Done = webhookdelivery.StatusSucceeded, true
	case try > len(delays):
		res.Status, res.Done = webhookdelivery.StatusFailed, true
	default:
		res.RetryAt = now.Add(delays[try-1])
	}
	t := webhookTry{
		deliveryID: deliveryID, at: at.UTC(), statusCode: code,
		duration: duration, errText: errText, status: res.Status, now: now,
		number: try, merchantID: d.merchantID, livemode: d.livemode, eventID: d.eventID,
	}
	if !res.Done {
		t.nextAttemptAt = &res.RetryAt
	}
	attempt, applied, err := s.recordWebhookTry(ctx, t)
	if err != nil {
		return WebhookDeliveryResult{}, fmt.Errorf("agentpay: recording webhook attempt: %w", err)
	}
	res.Attempt, res.Tries = attempt, try
	if !applied {
		// Another run of the same delivery finished it meanwhile: this try
		// is still logged, the delivery keeps that run's outcome.
		cur, err := s.cfg.DB.Ent.WebhookDelivery.Get(ctx, deliveryID)
		if err != nil {
			return WebhookDeliveryResult{}, err
		}
		res.Status, res.Tries, res.Done, res.RetryAt = cur.Status, cur.Attempts, true, time.Time{}
	}
	switch {
	case !res.Done:
		s.logger.InfoContext(ctx, "webhook try failed", "delivery", deliveryID, "event", d.eventID, "try", try, "retry_at", res.RetryAt, "err", errText)
	case res.Status == webhookdelivery.StatusFailed:
		s.logger.WarnContext(ctx, "webhook delivery failed", "delivery", deliveryID, "event", d.eventID, "tries", res.Tries, "err", errText)
	}
	return res, nil
}

// deliveryToSend is what one try needs, read in one query.
type deliveryToSend struct {
	status webhookdelivery.Status
	tries  int
	// url is where this try goes: the merchant's webhook URL of the
	// event's mode now, not the one the delivery was created with, so a
	// retry after the merchant moves its receiver reaches the new one ("" when
	// the merchant has since removed it: the try fails unsent).
	url        string
	eventID    uuid.UUID
	payload    []byte
	livemode   bool
	merchantID uuid.UUID
	// nextAttemptAt is when it is due, or until when a batch holds it
	// (webhook_batch.go).
	nextAttemptAt *time.Time
	// endpoint holds the sealed secrets of the event's mode (its url is
	// unused: url above is the same, read with them).
	endpoint webhookEndpoint
}

// loadDeliveryToSend reads a delivery with its event's payload and its
// merchant's webhook settings in one query, shared with the deliveries read
// at the same time (webhooksend.Load: this is the hot path of delivery).
// The URL and secrets are those of the event's mode.
func (s *Service) loadDeliveryToSend(ctx context.Context, id uuid.UUID) (*deliveryToSend, error) {
	row, err := webhooksend.Load(ctx, s.cfg.DB, id)
	if err != nil {
		return nil, fmt.Errorf("agentpay: reading webhook delivery: %w", err)
	}
	if row == nil {
		return nil, fmt.Errorf("%w: webhook delivery %s", ErrNotFound, id)
	}
	return deliveryFromRow(row), nil
}

// deliveryFromRow is what one try of row needs: the URL and secrets of its
// event's mode.
func deliveryFromRow(row *webhooksend.Delivery) *deliveryToSend {
	ep := row.Test
	if row.Livemode {
		ep = row.Live
	}
	return &deliveryToSend{
		status: webhookdelivery.Status(row.Status), tries: row.Attempts, url: ep.URL, nextAttemptAt: row.NextAttemptAt,
		eventID: row.EventID, payload: row.Payload, livemode: row.Livemode, merchantID: row.MerchantID,
		endpoint: webhookEndpoint{url: ep.URL, secret: ep.Secret, previous: ep.Previous, previousUntil: ep.PreviousUntil},
	}
}

// AttemptStatusCode is the HTTP status a try was answered with, nil when
// no answer came (timeout, refused connection; stored as 0).
func AttemptStatusCode(a *ent.WebhookAttempt) *int {
	if a.StatusCode == 0 {
		return nil
	}
	code := a.StatusCode
	return &code
}

// AttemptError is why a try failed, nil when it succeeded.
func AttemptError(a *ent.WebhookAttempt) *string {
	if a.Error == "" {
		return nil
	}
	reason := a.Error
	return &reason
}

// WebhookDeliveries is an event's delivery series, oldest first (ties by
// id), the order of the REST webhook log. The caller has already reached
// the event through its own objects.
func (s *Service) WebhookDeliveries(ctx context.Context, eventID uuid.UUID) ([]*ent.WebhookDelivery, error) {
	return deliveriesInOrder(s.cfg.DB.Ent.WebhookDelivery.Query().Where(webhookdelivery.EventID(eventID))).All(ctx)
}

// WebhookAttempts lists a delivery's tries, oldest first.
func (s *Service) WebhookAttempts(ctx context.Context, deliveryID uuid.UUID) ([]*ent.WebhookAttempt, error) {
	return attemptsInOrder(s.cfg.DB.Ent.WebhookAttempt.Query().Where(webhookattempt.DeliveryID(deliveryID))).All(ctx)
}

// deliveriesInOrder orders an event's delivery series: oldest first, ties
// by id.
func deliveriesInOrder(q *ent.WebhookDeliveryQuery) *ent.WebhookDeliveryQuery {
	return q.Order(ent.Asc(webhookdelivery.FieldCreatedAt), ent.Asc(webhookdelivery.FieldID))
}

// attemptsInOrder orders a delivery's tries: oldest first.
func attemptsInOrder(q *ent.WebhookAttemptQuery) *ent.WebhookAttemptQuery {
	return q.Order(webhookattempt.ByAt(), webhookattempt.ByCreatedAt())
}
