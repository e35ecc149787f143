package agentpay

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"entgo.io/contrib/entgql"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/predicate"
	"agentpay/ent/webhookevent"
)

// Event kinds (spec 6.2).
const (
	EventPaymentDetected     = "payment.detected"
	EventPaymentConfirming   = "payment.confirming"
	EventPaymentConfirmed    = "payment.confirmed"
	EventPaymentFailed       = "payment.failed"
	EventSessionExpired      = "session.expired"
	EventSettlementCompleted = "settlement.completed"
	EventRefundCreated       = "refund.created"
	EventRefundCompleted     = "refund.completed"
	EventRefundFailed        = "refund.failed"
	// EventWebhookTest is the event a merchant sends itself to try its
	// webhook endpoint (SendTestWebhook); it is about nothing.
	EventWebhookTest = "webhook.test"
)

var eventKinds = []string{
	EventPaymentDetected, EventPaymentConfirming, EventPaymentConfirmed,
	EventPaymentFailed, EventSessionExpired, EventSettlementCompleted,
	EventRefundCreated, EventRefundCompleted, EventRefundFailed,
	EventWebhookTest,
}

// EventInput is an event to record.
type EventInput struct {
	MerchantID uuid.UUID
	// SessionID links the event to its checkout session, when it has one.
	SessionID *uuid.UUID
	// Type is one of the Event* kinds.
	Type     string
	Livemode bool
	Data     EventData
	// At is the payload's timestamp; zero means now.
	At time.Time

	// merchant is the event's merchant (MerchantID) as already read in the
	// caller's transaction, so a caller recording several events of one
	// merchant in it (a payment's detected, confirming and confirmed) reads
	// it once; nil: RecordEvent reads it.
	merchant *ent.Merchant
}

// EventData is the payload's "data" object. The fields of spec 6.3 come
// first, in the spec's order; empty strings and nil amounts are left out
// (the spec lists every field for payment.confirmed, other kinds carry what
// applies to them); metadata is always present ({} when nil). Extra holds the
// event-specific fields (payment.failed's reason and amounts, settlement's
// gross, fee, net and payout reference...), written after the standard ones
// in key order; decimal.Decimal values anywhere in Extra are written as JSON
// numbers, like the standard amounts.
type EventData struct {
	SessionExternalID string
	PaymentExternalID string
	AmountUSD         *decimal.Decimal
	AmountToken       *decimal.Decimal
	Token             string
	Chain             string
	TxHash            string
	// InternalReference is set, and TxHash empty, for a payment settled on
	// the internal ledger (settle_internal.go): the data then carries
	// "tx_hash": null and "internal_reference".
	InternalReference string
	FromAddress       string
	// Metadata is the session's metadata: a map, a json.RawMessage or any
	// value encoding/json accepts.
	Metadata any
	Extra    map[string]any
}

type eventDataJSON struct {
	SessionExternalID string          `json:"session_external_id,omitempty"`
	PaymentExternalID string          `json:"payment_external_id,omitempty"`
	AmountUSD         json.RawMessage `json:"amount_usd,omitempty"`
	AmountToken       json.RawMessage `json:"amount_token,omitempty"`
	Token             string          `json:"token,omitempty"`
	Chain             string          `json:"chain,omitempty"`
	TxHash            json.RawMessage `json:"tx_hash,omitempty"`
	FromAddress       string          `json:"from_address,omitempty"`
	Metadata          json.RawMessage `json:"metadata"`
	InternalReference string          `json:"internal_reference,omitempty"`
}

var standardDataKeys = []string{
	"session_external_id", "payment_external_id", "amount_usd", "amount_token",
	"token", "chain", "tx_hash", "from_address", "metadata", "internal_reference",
}

// MarshalJSON writes the data object as described on EventData.
func (d EventData) MarshalJSON() ([]byte, error) {
	out := eventDataJSON{
		SessionExternalID: d.SessionExternalID,
		PaymentExternalID: d.PaymentExternalID,
		Token:             d.Token,
		Chain:             d.Chain,
		FromAddress:       d.FromAddress,
		Metadata:          json.RawMessage("{}"),
		InternalReference: d.InternalReference,
	}
	switch {
	case d.InternalReference != "":
		out.TxHash = json.RawMessage("null") // no chain transaction: null, never left out
	case d.TxHash != "":
		out.TxHash, _ = json.Marshal(d.TxHash)
	}
	if d.AmountUSD != nil {
		out.AmountUSD = json.RawMessage(d.AmountUSD.String())
	}
	if d.AmountToken != nil {
		out.AmountToken = json.RawMessage(d.AmountToken.String())
	}
	if d.Metadata != nil {
		m, err := json.Marshal(jsonNumbers(d.Metadata))
		if err != nil {
			return nil, fmt.Errorf("event metadata: %w", err)
		}
		if string(m) != "null" {
			out.Metadata = m
		}
	}
	b, err := json.Marshal(out)
	if err != nil || len(d.Extra) == 0 {
		return b, err
	}
	keys := make([]string, 0, len(d.Extra))
	for k := range d.Extra {
		if slices.Contains(standardDataKeys, k) {
			return nil, fmt.Errorf("event data: extra field %q would shadow a standard field", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	buf := bytes.NewBuffer(b[:len(b)-1]) // without the closing brace
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(jsonNumbers(d.Extra[k]))
		if err != nil {
			return nil, fmt.Errorf("event data %q: %w", k, err)
		}
		buf.WriteByte(',')
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(vb)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// jsonNumbers replaces decimals (in maps and slices too) by their exact JSON
// numbers: shopspring/decimal quotes them by default.
func jsonNumbers(v any) any {
	switch x := v.(type) {
	case decimal.Decimal:
		return json.RawMessage(x.String())
	case *decimal.Decimal:
		if x == nil {
			return nil
		}
		return json.RawMessage(x.String())
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonNumbers(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonNumbers(e)
		}
		return out
	}
	return v
}

// eventPayload is the body every delivery of an event sends.
type eventPayload struct {
	ID        uuid.UUID `json:"id"`
	Event     string    `json:"event"`
	Data      EventData `json:"data"`
	Timestamp string    `json:"timestamp"`
	Livemode  bool      `json:"livemode"`
}

// eventTimestamp is ISO 8601 UTC with milliseconds, e.g.
// 2026-11-25T23:27:16.123Z.
const eventTimestamp = "2006-01-02T15:04:05.000Z07:00"

// RecordEvent writes an event for a merchant inside the caller's transaction
// (tx and sqlTx are the two faces of one transaction, see WithTx): the event
// with its payload (the exact bytes every delivery sends and signs), a
// pending delivery to the merchant's webhook URL of the event's mode as it
// is now, and the River job that sends it. A merchant without a webhook URL
// in that mode gets the event recorded (visible in the dashboard) and no
// delivery.
func (s *Service) RecordEvent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, ev EventInput) (*ent.WebhookEvent, error) {
	if tx == nil || sqlTx == nil {
		return nil, errors.New("agentpay: RecordEvent needs the caller's transaction (WithTx)")
	}
	if !slices.Contains(eventKinds, ev.Type) {
		return nil, fmt.Errorf("agentpay: unknown event type %q", ev.Type)
	}
	m := ev.merchant
	if m == nil || m.ID != ev.MerchantID {
		var err error
		if m, err = eventMerchant(ctx, tx, ev.MerchantID); err != nil {
			return nil, err
		}
	}
	// The row's time is the service's clock, as the payload's: the
	// retention (webhook_retention.go) and the log's order compare it
	// with that clock, not the machine's.
	now := s.now().UTC().Truncate(time.Microsecond)
	at := ev.At
	if at.IsZero() {
		at = now
	}
	id := uuid.New()
	payload, err := json.Marshal(eventPayload{
		ID: id, Event: ev.Type, Data: ev.Data,
		Timestamp: at.UTC().Format(eventTimestamp), Livemode: ev.Livemode,
	})
	if err != nil {
		return nil, fmt.Errorf("agentpay: event payload: %w", err)
	}
	e, err := tx.WebhookEvent.Create().
		SetID(id).
		SetCreatedAt(now).
		SetUpdatedAt(now).
		SetMerchantID(m.ID).
		SetNillableSessionID(ev.SessionID).
		SetEventType(ev.Type).
		SetPayload(payload).
		SetLivemode(ev.Livemode).
		Save(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.recordFeedEvent(ctx, tx, sqlTx, e); err != nil {
		return nil, err
	}
	if err := s.queueACPOrderEvent(ctx, tx, sqlTx, m, ev); err != nil {
		return nil, err
	}
	url := WebhookURLOf(m, sessionModeOf(ev.Livemode))
	if url == "" {
		return e, nil
	}
	if _, err := s.newDelivery(ctx, tx, sqlTx, e, url); err != nil {
		return nil, err
	}
	return e, nil
}

// eventMerchant reads an event's merchant in tx: an unknown one is
// ErrNotFound.
func eventMerchant(ctx context.Context, tx *ent.Tx, id uuid.UUID) (*ent.Merchant, error) {
	m, err := tx.Merchant.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: merchant %s", ErrNotFound, id)
	}
	return m, err
}

// The event log: a merchant reads its events, each with its deliveries and
// their attempts, through REST (ListWebhookEvents, WebhookEvent) and
// GraphQL (WebhookEventsPage, WebhookEventList, WebhookEvent, Node). Every
// read is scoped by ownEvents to the authenticated merchant and the mode of
// its key: another merchant's event, or one of the other mode, is
// ErrNotFound.

var errNoSuchWebhookEvent = fmt.Errorf("%w: no such event", ErrNotFound)

// ownEvents is the one predicate that says which events a merchant caller
// sees: its own, in its key's mode.
func ownEvents(auth *MerchantAuth) predicate.WebhookEvent {
	return webhookevent.And(
		webhookevent.MerchantID(auth.Merchant.ID),
		webhookevent.Livemode(auth.Livemode()),
	)
}

// WebhookEventsOf is every webhook event the caller sees (ownEvents).
func (s *Service) WebhookEventsOf(auth *MerchantAuth) *ent.WebhookEventQuery {
	return s.cfg.DB.Ent.WebhookEvent.Query().Where(ownEvents(auth))
}

// WebhookEventFilter narrows the caller's webhook events. Empty fields do
// not filter.
type WebhookEventFilter struct {
	// EventTypes keeps events of any of these kinds (payment.confirmed...).
	EventTypes []string
	// SessionExternalID keeps the events of one session.
	SessionExternalID *string
}

// webhookEvents is the caller's events matching f (WebhookEventsOf): what
// the REST list and the GraphQL connections page through.
func (s *Service) webhookEvents(auth *MerchantAuth, f WebhookEventFilter) (*ent.WebhookEventQuery, error) {
	q := s.WebhookEventsOf(auth)
	if len(f.EventTypes) > 0 {
		for _, t := range f.EventTypes {
			if !slices.Contains(eventKinds, t) {
				return nil, Invalid("eventType", "%q is not an event kind", t)
			}
		}
		q = q.Where(webhookevent.EventTypeIn(distinct(f.EventTypes)...))
	}
	if f.SessionExternalID != nil {
		q = q.Where(webhookevent.HasSessionWith(checkoutsession.ExternalID(*f.SessionExternalID)))
	}
	return q, nil
}

// newestEventsFirst is the event log's order: newest first, ties by id.
func newestEventsFirst(q *ent.WebhookEventQuery) *ent.WebhookEventQuery {
	return q.Order(ent.Desc(webhookevent.FieldCreatedAt), ent.Desc(webhookevent.FieldID))
}

// WebhookEventPage is one page of a merchant's events, newest first, each
// with its deliveries (oldest first) loaded.
type WebhookEventPage struct {
	Events []*ent.WebhookEvent
	ListPage
}

// ListWebhookEvents lists the caller's events in the caller's mode, newest
// first (ties by id).
func (s *Service) ListWebhookEvents(ctx context.Context, auth *MerchantAuth, p ListParams) (*WebhookEventPage, error) {
	p, err := p.normalise()
	if err != nil {
		return nil, err
	}
	q, err := s.webhookEvents(auth, WebhookEventFilter{})
	if err != nil {
		return nil, err
	}
	total, err := q.Clone().Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("counting webhook events: %w", err)
	}
	list, err := newestEventsFirst(q).
		WithSession().
		WithDeliveries(func(dq *ent.WebhookDeliveryQuery) { deliveriesInOrder(dq) }).
		Limit(p.Limit).
		Offset(p.Offset).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing webhook events: %w", err)
	}
	return &WebhookEventPage{Events: list, ListPage: p.page(total, len(list))}, nil
}

// WebhookEventsPage is one Relay page of the caller's webhook events
// matching f, by order (newest first when nil; ties by id).
func (s *Service) WebhookEventsPage(ctx context.Context, auth *MerchantAuth, f WebhookEventFilter, page PageArgs, order *ent.WebhookEventOrder) (*ent.WebhookEventConnection, error) {
	page, err := page.normalise()
	if err != nil {
		return nil, err
	}
	q, err := s.webhookEvents(auth, f)
	if err != nil {
		return nil, err
	}
	if order == nil {
		order = &ent.WebhookEventOrder{Field: ent.WebhookEventOrderFieldCreatedAt, Direction: entgql.OrderDirectionDesc}
	}
	return q.Paginate(ctx, page.After, page.First, page.Before, page.Last, ent.WithWebhookEventOrder(order))
}

// WebhookEventList is one page of every event the caller sees as a plain
// list, newest first (ties by id), as SessionList: the GraphQL
// Merchant.webhookEvents field.
func (s *Service) WebhookEventList(ctx context.Context, auth *MerchantAuth, page PageArgs) ([]*ent.WebhookEvent, error) {
	page, err := page.normalise()
	if err != nil {
		return nil, err
	}
	q := s.WebhookEventsOf(auth)
	for _, p := range newestFirstAfter(page.After) {
		q = q.Where(predicate.WebhookEvent(p))
	}
	return newestEventsFirst(q).Limit(*page.First).All(ctx)
}

// WebhookEvent reads one of the caller's events in the caller's mode, with
// its session, its deliveries (oldest first) and their attempts (in order).
func (s *Service) WebhookEvent(ctx context.Context, auth *MerchantAuth, eventID uuid.UUID) (*ent.WebhookEvent, error) {
	ev, err := s.WebhookEventsOf(auth).
		Where(webhookevent.ID(eventID)).
		WithSession().
		WithDeliveries(func(dq *ent.WebhookDeliveryQuery) {
			deliveriesInOrder(dq).WithAttemptLog(func(aq *ent.WebhookAttemptQuery) { attemptsInOrder(aq) })
		}).
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, errNoSuchWebhookEvent
	}
	if err != nil {
		return nil, fmt.Errorf("reading webhook event: %w", err)
	}
	return ev, nil
}

// WebhookEventSessionExternalID is the external id of the session an event
// is about: its session's, else the one in its payload (events recorded
// without a session link), else "".
func WebhookEventSessionExternalID(e *ent.WebhookEvent, session *ent.CheckoutSession) string {
	if session != nil {
		return session.ExternalID
	}
	var p struct {
		Data struct {
			SessionExternalID string `json:"session_external_id"`
		} `json:"data"`
	}
	if json.Unmarshal(e.Payload, &p) == nil {
		return p.Data.SessionExternalID
	}
	return ""
}
