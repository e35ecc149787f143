package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/merchantfeedentry"
	"agentpay/ent/webhookevent"
	"agentpay/internal/statusbus"
)

// A merchant's live feed (the merchantEvents subscription, so a dashboard
// never polls): every event recorded for it (what its webhooks receive)
// and every try of delivering one. Each line is a row (MerchantFeedEntry)
// written in the transaction of what it reports, RecordEvent's or the
// try's (recordWebhookTry), by whichever process runs it; its id is a
// sequence, so a reader resumes after the last one it saw. The same
// transaction publishes the id on the status bus under the merchant and
// mode, and a subscriber re-reads the feed after its last id on every
// message, as the account events do (accountevents.go): a missed message
// delays a line, never drops it. One gap remains, as for account events:
// on PostgreSQL two transactions of one merchant may commit in the other
// order than their ids, and a subscriber that already read the later line
// does not go back for the earlier one (a resume from an older cursor, or
// the webhookEvents query, shows it).
//
// A slow subscriber costs no memory: its watch holds at most one page
// (MaxMerchantFeedPage) and blocks until the page is taken; what it has
// not read yet waits in the table.

// Merchant feed line kinds.
const (
	FeedEvent           = "event"
	FeedDeliveryAttempt = "delivery_attempt"
)

// MaxMerchantFeedPage is the most lines one read answers, and the most a
// subscriber resuming from a cursor is sent of what it missed.
const MaxMerchantFeedPage = 100

// merchantEventsTopic is the bus topic of the feed, keyed by merchant and
// mode (merchantFeedKey); the message is the line's id.
const merchantEventsTopic statusbus.Topic = "merchant_events"

func merchantFeedKey(merchantID uuid.UUID, livemode bool) string {
	return merchantID.String() + "." + string(sessionModeOf(livemode))
}

// FeedAttempt is a delivery try as the feed reports it.
type FeedAttempt struct {
	DeliveryID uuid.UUID `json:"delivery_id"`
	// Number is 1 for a delivery's first try.
	Number int `json:"number"`
	// StatusCode is 0 when no answer came.
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"`
	// Result is succeeded, failed (no try left) or retrying.
	Result      string     `json:"result"`
	DurationMs  int64      `json:"duration_ms"`
	NextRetryAt *time.Time `json:"next_retry_at,omitempty"`
	At          time.Time  `json:"at"`
}

// MerchantFeedItem is one line of the feed as the merchant reads it.
type MerchantFeedItem struct {
	Cursor    int64
	Kind      string
	EventID   uuid.UUID
	EventType string
	Livemode  bool
	// CreatedAt is the event's timestamp (the webhook body's).
	CreatedAt time.Time
	// Data is the webhook body's data object, as sent.
	Data json.RawMessage
	// Attempt is the try, for FeedDeliveryAttempt.
	Attempt *FeedAttempt
}

// recordFeedEvent adds a recorded event to its merchant's feed in the
// caller's transaction (RecordEvent's).
func (s *Service) recordFeedEvent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, e *ent.WebhookEvent) error {
	return s.recordFeedLine(ctx, tx, sqlTx, e.MerchantID, e.Livemode, e.ID, FeedEvent, "{}")
}

func (s *Service) recordFeedLine(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, merchantID uuid.UUID, livemode bool, eventID uuid.UUID, kind, data string) error {
	row, err := tx.MerchantFeedEntry.Create().
		SetMerchantID(merchantID).
		SetLivemode(livemode).
		SetEventID(eventID).
		SetKind(kind).
		SetData(data).
		SetCreatedAt(s.now().UTC().Truncate(time.Microsecond)).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("merchant feed: %w", err)
	}
	if err := s.bus.Publish(ctx, sqlTx, merchantEventsTopic, merchantFeedKey(merchantID, livemode), strconv.FormatInt(row.ID, 10)); err != nil {
		return fmt.Errorf("publishing merchant feed: %w", err)
	}
	return nil
}

// feedAttemptData is a try's feed line data (JSON).
func feedAttemptData(t webhookTry) string {
	a := FeedAttempt{
		DeliveryID: t.deliveryID, Number: t.number, StatusCode: t.statusCode, Error: t.errText,
		Result: string(t.status), DurationMs: t.duration.Milliseconds(), NextRetryAt: t.nextAttemptAt, At: t.at,
	}
	if t.nextAttemptAt != nil {
		a.Result = "retrying"
	}
	b, _ := json.Marshal(a) // plain fields: cannot fail
	return string(b)
}

// MerchantFeed lists the caller's feed (its mode's) after the cursor
// after, oldest first, at most MaxMerchantFeedPage lines.
func (s *Service) MerchantFeed(ctx context.Context, auth *MerchantAuth, after int64) ([]MerchantFeedItem, error) {
	if after < 0 {
		return nil, Invalid("after", "must be a cursor (0 or more)")
	}
	rows, err := s.ownFeed(auth).Where(merchantfeedentry.IDGT(after)).
		Order(ent.Asc(merchantfeedentry.FieldID)).Limit(MaxMerchantFeedPage).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading merchant feed: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.EventID
	}
	evs, err := s.WebhookEventsOf(auth).Where(webhookevent.IDIn(distinct(ids)...)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading merchant feed events: %w", err)
	}
	byID := make(map[uuid.UUID]*ent.WebhookEvent, len(evs))
	for _, e := range evs {
		byID[e.ID] = e
	}
	out := make([]MerchantFeedItem, 0, len(rows))
	for _, r := range rows {
		e := byID[r.EventID]
		if e == nil {
			continue // deleted by the retention job since the lines were read (webhook_retention.go)
		}
		var body struct {
			Data      json.RawMessage `json:"data"`
			Timestamp time.Time       `json:"timestamp"`
		}
		if err := json.Unmarshal(e.Payload, &body); err != nil {
			return nil, fmt.Errorf("merchant feed: event %s payload: %w", e.ID, err)
		}
		item := MerchantFeedItem{
			Cursor: r.ID, Kind: r.Kind, EventID: e.ID, EventType: e.EventType,
			Livemode: e.Livemode, CreatedAt: body.Timestamp, Data: body.Data,
		}
		if r.Kind == FeedDeliveryAttempt {
			item.Attempt = new(FeedAttempt)
			if err := json.Unmarshal([]byte(r.Data), item.Attempt); err != nil {
				return nil, fmt.Errorf("merchant feed line %d: %w", r.ID, err)
			}
		}
		out = append(out, item)
	}
	return out, nil
}

// ownFeed is the caller's feed: its own lines, in its key's mode.
func (s *Service) ownFeed(auth *MerchantAuth) *ent.MerchantFeedEntryQuery {
	return s.cfg.DB.Ent.MerchantFeedEntry.Query().Where(
		merchantfeedentry.MerchantID(auth.Merchant.ID),
		merchantfeedentry.Livemode(auth.Livemode()),
	)
}

// WatchMerchantEvents sends the caller's feed lines after the cursor after
// (the newest MaxMerchantFeedPage of them at most; nil: only those
// committed from now on), then each new one as it is committed, on any
// process, until ctx ends or the caller's credential does
// (livecredentials.go): the feeds' one watch loop, watchFeed.
func (s *Service) WatchMerchantEvents(ctx context.Context, auth *MerchantAuth, after *int64) (<-chan MerchantFeedItem, error) {
	if after != nil && *after < 0 {
		return nil, Invalid("after", "must be a cursor (0 or more)")
	}
	return watchFeed(ctx, s, feedWatch[MerchantFeedItem]{
		name: "merchant events", topic: merchantEventsTopic, key: merchantFeedKey(auth.Merchant.ID, auth.Livemode()),
		// The watch ends with its credential: a dashboard session's end,
		// the secret key rolled, the merchant deactivated.
		holds: s.merchantAuthHolds(auth),
		start: func(ctx context.Context) (int64, error) { return s.feedStart(ctx, auth, after) },
		page: func(ctx context.Context, last int64) ([]MerchantFeedItem, error) {
			return s.MerchantFeed(ctx, auth, last)
		},
		pageSize: MaxMerchantFeedPage,
		cursor:   func(it MerchantFeedItem) int64 { return it.Cursor },
	})
}

// feedStart is the cursor a watch reads after: the newest line's without
// after; with it, after, or later so that at most MaxMerchantFeedPage
// lines are replayed.
func (s *Service) feedStart(ctx context.Context, auth *MerchantAuth, after *int64) (int64, error) {
	q := s.ownFeed(auth).Order(ent.Desc(merchantfeedentry.FieldID))
	if after == nil {
		ids, err := q.Limit(1).IDs(ctx)
		if err != nil || len(ids) == 0 {
			return 0, err
		}
		return ids[0], nil
	}
	// The oldest of the newest MaxMerchantFeedPage lines after after.
	ids, err := q.Where(merchantfeedentry.IDGT(*after)).Offset(MaxMerchantFeedPage - 1).Limit(1).IDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading merchant feed: %w", err)
	}
	if len(ids) == 0 {
		return *after, nil
	}
	return ids[0] - 1, nil
}
