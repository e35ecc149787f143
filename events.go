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

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
)

// Event kinds (spec 6.2).
const (
	EventPaymentDetected     = "payment.detected"
	EventPaymentConfirming   = "payment.confirming"
	EventPaymentConfirmed    = "payment.confirmed"
	EventPaymentFailed       = "payment.failed"
	EventSessionExpired      = "session.expired"
	EventSettlementCompleted = "settlement.completed"
)

var eventKinds = []string{
	EventPaymentDetected, EventPaymentConfirming, EventPaymentConfirmed,
	EventPaymentFailed, EventSessionExpired, EventSettlementCompleted,
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
	TxHash            string          `json:"tx_hash,omitempty"`
	FromAddress       string          `json:"from_address,omitempty"`
	Metadata          json.RawMessage `json:"metadata"`
}

var standardDataKeys = []string{
	"session_external_id", "payment_external_id", "amount_usd", "amount_token",
	"token", "chain", "tx_hash", "from_address", "metadata",
}

// MarshalJSON writes the data object as described on EventData.
func (d EventData) MarshalJSON() ([]byte, error) {
	out := eventDataJSON{
		SessionExternalID: d.SessionExternalID,
		PaymentExternalID: d.PaymentExternalID,
		Token:             d.Token,
		Chain:             d.Chain,
		TxHash:            d.TxHash,
		FromAddress:       d.FromAddress,
		Metadata:          json.RawMessage("{}"),
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
// pending delivery to the merchant's webhook_url as it is now, and the River
// job that sends it. A merchant without a webhook URL gets the event
// recorded (visible in the dashboard) and no delivery.
func (s *Service) RecordEvent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, ev EventInput) (*ent.WebhookEvent, error) {
	if tx == nil || sqlTx == nil {
		return nil, errors.New("agentpay: RecordEvent needs the caller's transaction (WithTx)")
	}
	if !slices.Contains(eventKinds, ev.Type) {
		return nil, fmt.Errorf("agentpay: unknown event type %q", ev.Type)
	}
	m, err := tx.Merchant.Get(ctx, ev.MerchantID)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: merchant %s", ErrNotFound, ev.MerchantID)
	}
	if err != nil {
		return nil, err
	}
	at := ev.At
	if at.IsZero() {
		at = time.Now()
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
		SetMerchantID(m.ID).
		SetNillableSessionID(ev.SessionID).
		SetEventType(ev.Type).
		SetPayload(payload).
		SetLivemode(ev.Livemode).
		Save(ctx)
	if err != nil {
		return nil, err
	}
	if m.WebhookURL == "" {
		return e, nil
	}
	if _, err := s.newDelivery(ctx, tx, sqlTx, e.ID, m.WebhookURL); err != nil {
		return nil, err
	}
	return e, nil
}
