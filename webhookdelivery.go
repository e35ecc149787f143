package agentpay

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/lib/pq"
	"github.com/riverqueue/river"

	"agentpay/ent"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
	"agentpay/internal/jobs"
	"agentpay/internal/store"
	"agentpay/webhook"
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
	// webhookBodyMax is how much of an answer's body is read (and thrown
	// away, so the connection can be reused); the rest is not waited for.
	webhookBodyMax = 64 << 10
	webhookURLMax  = 2048
	webhookUA      = "agentpay-webhooks/1"
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
	d, err := tx.WebhookDelivery.Create().
		SetEventID(ev.ID).
		SetURL(url).
		SetNextAttemptAt(s.now().UTC()).
		Save(ctx)
	if err != nil {
		return nil, err
	}
	opts := &river.InsertOpts{MaxAttempts: s.webhookTries() + webhookJobSpareAttempts}
	args := jobs.DeliverWebhookArgs{DeliveryID: d.ID, MerchantID: ev.MerchantID, Livemode: ev.Livemode}
	if _, err := s.cfg.Jobs.InsertTx(ctx, sqlTx, args, opts); err != nil {
		return nil, fmt.Errorf("agentpay: enqueueing webhook delivery: %w", err)
	}
	return d, nil
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
	var d *ent.WebhookDelivery
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		var err error
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
	// (webhooklimits.go), so nothing was sent and no try is counted; ask
	// again after WebhookBusyDelay. Not Done.
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
	slot, tryCtx, ok := s.enterWebhookSlot(ctx, d.merchantID, d.livemode)
	if !ok {
		res.Busy = true
		return res, nil
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
		return WebhookDeliveryResult{}, err
	}
	start := time.Now()
	var code int
	sendErr := err // no secret to sign with: a failed try, nothing sent
	if err == nil && d.url == "" {
		sendErr = errNoWebhookURL
	}
	if sendErr == nil {
		code, sendErr = postWebhook(tryCtx, s.webhookClient(d.livemode), d, at, secret, previous...)
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
		return WebhookDeliveryResult{}, ctx.Err()
	}
	duration = attemptDuration(sendErr, duration)

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

// webhookTry is one try to record: the attempt row and the delivery's new
// state.
type webhookTry struct {
	attemptID     uuid.UUID
	deliveryID    uuid.UUID
	at            time.Time
	statusCode    int
	duration      time.Duration
	errText       string
	status        webhookdelivery.Status
	nextAttemptAt *time.Time // nil once the delivery is done
	now           time.Time
	// number, merchantID, livemode and eventID place the try in its
	// merchant's feed (merchantfeed.go), written with it.
	number     int
	merchantID uuid.UUID
	livemode   bool
	eventID    uuid.UUID
}

// recordWebhookTry writes the attempt and updates the delivery (attempts+1,
// status, next or completion time) together, if the delivery is still
// pending. applied is false when it no longer was (another run finished
// it); the attempt is logged either way.
//
// On PostgreSQL it is part of one statement shared with the tries recorded
// at the same time (webhookTryWrites); on SQLite, where a round trip costs
// nothing, an ent transaction.
func (s *Service) recordWebhookTry(ctx context.Context, t webhookTry) (*ent.WebhookAttempt, bool, error) {
	t.attemptID = uuid.New()
	a := &ent.WebhookAttempt{
		ID: t.attemptID, CreatedAt: t.now, UpdatedAt: t.now, DeliveryID: t.deliveryID,
		StatusCode: t.statusCode, DurationMs: t.duration.Milliseconds(), Error: t.errText, At: t.at,
	}
	if s.cfg.DB.IsPostgres() {
		// When ctx ends first the batch may still commit the try: the
		// caller's job runs again and finds the delivery as that commit
		// left it.
		applied, err := webhookTryWrites.Do(ctx, s.cfg.DB, t)
		if err != nil {
			return nil, false, err
		}
		return a, applied, nil
	}
	applied := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		var err error
		a, err = tx.WebhookAttempt.Create().
			SetID(a.ID).
			SetDeliveryID(t.deliveryID).
			SetStatusCode(t.statusCode).
			SetDurationMs(a.DurationMs).
			SetError(t.errText).
			SetAt(t.at).
			Save(ctx)
		if err != nil {
			return err
		}
		u := tx.WebhookDelivery.Update().
			Where(webhookdelivery.ID(t.deliveryID), webhookdelivery.StatusEQ(webhookdelivery.StatusPending)).
			AddAttempts(1).
			SetLastAttemptAt(t.at).
			SetStatus(t.status)
		if t.nextAttemptAt != nil {
			u.SetNextAttemptAt(*t.nextAttemptAt)
		} else {
			u.ClearNextAttemptAt().SetCompletedAt(t.now)
		}
		n, err := u.Save(ctx)
		if err != nil {
			return err
		}
		applied = n > 0
		return s.recordFeedLine(ctx, tx, sqlTx, t.merchantID, t.livemode, t.eventID, FeedDeliveryAttempt, feedAttemptData(t))
	})
	return a, applied, err
}

// webhookTryWrites records the tries of concurrent deliveries together on
// PostgreSQL (store.Batched, group commit): a try that finishes while
// another batch is being written joins the next one, which writes every
// waiting try's attempt and delivery state in one statement
// (recordWebhookTriesPostgres) and one commit, at most 500 tries a statement.
// Recording a try waited on the WAL flush of its own commit (LWLock
// WALWrite, IO WALSync in pg_stat_activity); one flush now covers a batch.
// Each try is still committed before DeliverWebhook returns, so its job
// completes only once its outcome is durable. The answer, by delivery, is
// whether the delivery was still pending.
var webhookTryWrites = store.NewBatched(store.BatchSpec[uuid.UUID, webhookTry, bool]{
	SQL:  recordWebhookTriesPostgres,
	Args: webhookTriesArgs,
	Scan: func(rows *sql.Rows, applied map[uuid.UUID]bool) error {
		var id uuid.NullUUID // NULL: a feed line's notification
		if err := rows.Scan(&id); err != nil {
			return err
		}
		if id.Valid {
			applied[id.UUID] = true
		}
		return nil
	},
	Key:     func(t webhookTry) uuid.UUID { return t.deliveryID },
	Max:     500,
	Timeout: 30 * time.Second,
})

// webhookTriesArgs are recordWebhookTriesPostgres' arrays for tries.
func webhookTriesArgs(tries []webhookTry) []any {
	n := len(tries)
	var (
		deliveries, statuses, errs = make([]string, n), make([]string, n), make([]string, n)
		attempts                   = make([]string, n)
		ats, nows                  = make([]string, n), make([]string, n)
		nexts, completions         = make([]sql.NullString, n), make([]sql.NullString, n)
		codes, durations           = make([]int64, n), make([]int64, n)
		merchants, events, feeds   = make([]string, n), make([]string, n), make([]string, n)
		livemodes                  = make([]bool, n)
	)
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	for i, t := range tries {
		deliveries[i], attempts[i], statuses[i], errs[i] = t.deliveryID.String(), t.attemptID.String(), string(t.status), t.errText
		ats[i], nows[i] = ts(t.at), ts(t.now)
		codes[i], durations[i] = int64(t.statusCode), t.duration.Milliseconds()
		merchants[i], livemodes[i], events[i], feeds[i] = t.merchantID.String(), t.livemode, t.eventID.String(), feedAttemptData(t)
		if t.nextAttemptAt != nil {
			nexts[i] = sql.NullString{String: ts(*t.nextAttemptAt), Valid: true}
		} else {
			completions[i] = sql.NullString{String: ts(t.now), Valid: true}
		}
	}
	return []any{pq.StringArray(deliveries), pq.StringArray(ats), pq.StringArray(statuses), pq.Array(nexts), pq.Array(completions),
		pq.StringArray(nows), pq.StringArray(attempts), pq.Array(codes), pq.Array(durations), pq.StringArray(errs),
		pq.StringArray(merchants), pq.BoolArray(livemodes), pq.StringArray(events), pq.StringArray(feeds)}
}

// recordWebhookTriesPostgres records many tries (PostgreSQL): each writes its
// attempt row, and updates its delivery (attempts + 1, status, next or
// completion time) if it is still pending. Arguments are arrays of, in
// order, delivery ids, attempt times, statuses, next attempts (NULL when
// done), completions (NULL while pending), now, attempt ids, status codes,
// durations (ms), errors, and for the merchant feed (merchantfeed.go)
// merchant ids, livemodes, event ids and line data. It answers the ids of
// the deliveries it updated (those still pending), and a NULL for each feed
// line, whose notification (pg_notify, delivered on commit) it sends.
const recordWebhookTriesPostgres = `WITH i AS (
	SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::timestamptz[], $5::timestamptz[],
		$6::timestamptz[], $7::uuid[], $8::bigint[], $9::bigint[], $10::text[],
		$11::uuid[], $12::boolean[], $13::uuid[], $14::text[])
		AS t(delivery_id, at, status, next_at, completed_at, now, attempt_id, status_code, duration_ms, error,
			merchant_id, livemode, event_id, feed)
), d AS (
	UPDATE webhook_deliveries w
	SET attempts = w.attempts + 1, last_attempt_at = i.at, status = i.status,
		next_attempt_at = i.next_at, completed_at = i.completed_at, updated_at = i.now
	FROM i
	WHERE w.id = i.delivery_id AND w.status = 'pending'
	RETURNING w.id
), a AS (
	INSERT INTO webhook_attempts (id, created_at, updated_at, delivery_id, status_code, duration_ms, error, at)
	SELECT attempt_id, now, now, delivery_id, status_code, duration_ms, error, at FROM i
), f AS (
	INSERT INTO merchant_feed_entries (merchant_id, livemode, event_id, kind, data, created_at)
	SELECT merchant_id, livemode, event_id, 'delivery_attempt', feed, now FROM i
	RETURNING id, merchant_id, livemode
)
SELECT id FROM d
UNION ALL
SELECT NULL FROM (SELECT pg_notify('merchant_events',
	f.merchant_id::text || '.' || CASE WHEN f.livemode THEN 'live' ELSE 'test' END || ':' || f.id::text) FROM f) n`

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
	// endpoint holds the sealed secrets of the event's mode (its url is
	// unused: url above is the same, read with them).
	endpoint webhookEndpoint
}

const deliveryToSendQuery = `SELECT d.status, d.attempts,
	COALESCE(CASE WHEN e.livemode THEN m.webhook_url ELSE m.test_webhook_url END, ''), e.id, e.payload, e.livemode, m.id,
	m.webhook_secret_encrypted, m.webhook_secret_previous_encrypted, m.webhook_secret_previous_expires_at,
	m.test_webhook_secret_encrypted, m.test_webhook_secret_previous_encrypted, m.test_webhook_secret_previous_expires_at
FROM webhook_deliveries d
JOIN webhook_events e ON e.id = d.event_id
JOIN merchants m ON m.id = e.merchant_id
WHERE d.id = `

// loadDeliveryToSend reads a delivery with its event's payload and its
// merchant's sealed secrets in one query (one round trip instead of ent's
// three for the eager-loaded edges: this is the hot path of delivery).
func (s *Service) loadDeliveryToSend(ctx context.Context, id uuid.UUID) (*deliveryToSend, error) {
	q := deliveryToSendQuery + "?"
	if s.cfg.DB.IsPostgres() {
		q = deliveryToSendQuery + "$1"
	}
	rows, err := s.cfg.DB.QueryCached(ctx, q, id)
	if err != nil {
		return nil, fmt.Errorf("agentpay: reading webhook delivery: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("agentpay: reading webhook delivery: %w", err)
		}
		return nil, fmt.Errorf("%w: webhook delivery %s", ErrNotFound, id)
	}
	var (
		d                  deliveryToSend
		status             string
		live, test         webhookEndpoint
		liveUntil, testEnd sql.NullTime
	)
	if err := rows.Scan(&status, &d.tries, &d.url, &d.eventID, &d.payload, &d.livemode, &d.merchantID,
		&live.secret, &live.previous, &liveUntil, &test.secret, &test.previous, &testEnd); err != nil {
		return nil, fmt.Errorf("agentpay: reading webhook delivery: %w", err)
	}
	d.status = webhookdelivery.Status(status)
	d.endpoint = live
	until := liveUntil
	if !d.livemode {
		d.endpoint, until = test, testEnd
	}
	if until.Valid {
		d.endpoint.previousUntil = &until.Time
	}
	return &d, rows.Close()
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

// postWebhook sends one try with client, signed with secret (and previous,
// secrets still in a rotation's overlap), and returns the answer's status
// code (0 when there was none) and why the try failed (nil for a 2xx).
func postWebhook(ctx context.Context, client *http.Client, d *deliveryToSend, at time.Time, secret string, previous ...string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.payload))
	if err != nil {
		return 0, fmt.Errorf("bad webhook URL: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", webhookUA)
	webhook.SetSignatureHeaders(req.Header, secret, d.eventID.String(), at, d.payload, previous...)

	resp, err := client.Do(req)
	if err != nil {
		return 0, webhookSendError(err)
	}
	// Drain a little so the connection can be reused; the body is not kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhookBodyMax))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// The attempt log's errors for a try that found no address to send to.
// They name no address: the log is the merchant's, and what a name resolves
// to inside the service's network, or which resolver answered, is not
// theirs to map.
var (
	errNoWebhookURL    = errors.New("not sent: the webhook URL of this mode was removed; set one and the next retry goes there")
	errNoPublicAddress = errors.New("refused: the webhook URL's host does not resolve to a public address")
	errUnresolvedHost  = errors.New("the webhook URL's host could not be resolved (temporary failure)")
)

// webhookSendError is the error a try's request failed with, as the attempt
// log shows it: a refused or unknown address is errNoPublicAddress, another
// name resolution failure errUnresolvedHost (Go's says which resolver
// failed, an internal address); anything else as net/http says it (it
// names the merchant's URL and what happened to it).
func webhookSendError(err error) error {
	var refused *webhook.NonPublicAddrError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &refused):
		return errNoPublicAddress
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return errNoPublicAddress
	case errors.As(err, &dnsErr):
		return errUnresolvedHost
	}
	return err
}

// attemptDuration is how long a try took as the attempt log shows it: 0
// when it found no address to send to, since the time spent resolving the
// name would tell apart the names the service's resolver knows.
func attemptDuration(sendErr error, took time.Duration) time.Duration {
	if errors.Is(sendErr, errNoPublicAddress) || errors.Is(sendErr, errUnresolvedHost) {
		return 0
	}
	return took
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// webhookMayReachPrivate is the rule of where a mode's deliveries may go:
// public addresses only, except test mode when the operator allows more
// (Config.WebhookAllowPrivate, so a developer's local receiver works). Live
// events always stay off private networks. Anyone can register a merchant
// and read its attempt log, so test mode reaching the service's own network
// by default would hand every merchant a probe of it.
func (s *Service) webhookMayReachPrivate(mode Mode) bool {
	return mode == ModeTest && s.cfg.WebhookAllowPrivate
}

// newWebhookClient builds the client that sends a mode's deliveries, held
// to webhookMayReachPrivate when it connects.
func (s *Service) newWebhookClient(mode Mode) *http.Client {
	return s.newWebhookClientWith(mode, nil)
}

// newWebhookClientWith is newWebhookClient looking names up with resolver
// (nil: the system's); tests resolve names their own way with it.
func (s *Service) newWebhookClientWith(mode Mode, resolver *net.Resolver) *http.Client {
	return webhook.NewClient(webhook.ClientOptions{Timeout: WebhookTimeout, PublicOnly: !s.webhookMayReachPrivate(mode), Resolver: resolver})
}

// webhookClient is the client of a delivery's mode.
func (s *Service) webhookClient(livemode bool) *http.Client {
	if livemode {
		return s.liveWebhooks
	}
	return s.testWebhooks
}

// ValidateWebhookURL checks a merchant's webhook URL when it is registered or
// changed: an absolute http or https URL with a host, at most 2,048
// characters; unless privateOK (webhookMayReachPrivate of the mode), not
// "localhost" (or a name under .localhost) and not an IP literal outside the
// public ranges. Names are not resolved here: the address actually dialled
// is checked at every delivery.
func ValidateWebhookURL(raw string, privateOK bool) error {
	const field = "webhook_url"
	if raw == "" || hasSpaceOrControl(raw) {
		return Invalid(field, "must be an http or https URL")
	}
	if len(raw) > webhookURLMax {
		return Invalid(field, "must be at most %d characters long", webhookURLMax)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" {
		return Invalid(field, "must be an http or https URL")
	}
	host := u.Hostname()
	if host == "" {
		return Invalid(field, "must include a host")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return Invalid(field, "has an invalid port")
		}
	}
	if privateOK {
		return nil
	}
	if err := webhook.CheckPublicHost(host); errors.Is(err, webhook.ErrLocalhost) {
		return Invalid(field, "must not point at localhost: webhooks go to public addresses only")
	} else if err != nil {
		return Invalid(field, "must not point at a private, loopback or link-local address: webhooks go to public addresses only")
	}
	return nil
}
