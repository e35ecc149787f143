package rest

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/httpx"
)

// The merchant's webhook log: its events in the key's
// mode, newest first, each with its deliveries; one event with its payload
// and every attempt; and redelivery (a new delivery series, 201).

// mountWebhookRoutes serves /checkout/webhooks/...; the router it is given
// already requires X-Checkout-Secret-Key.
func (s *server) mountWebhookRoutes(r chi.Router) {
	r.Get("/webhooks/events", s.listWebhookEvents)
	r.Get("/webhooks/events/{id}", s.getWebhookEvent)
	r.Post("/webhooks/events/{id}/redeliver", s.redeliverWebhookEvent)
}

type webhookAttemptBody struct {
	At         time.Time `json:"at"`
	StatusCode *int      `json:"status_code"`
	DurationMs int64     `json:"duration_ms"`
	Error      *string   `json:"error"`
}

type webhookDeliveryBody struct {
	ID            string                `json:"id"`
	URL           string                `json:"url"`
	Status        string                `json:"status"`
	Attempts      int                   `json:"attempts"`
	NextAttemptAt *time.Time            `json:"next_attempt_at"`
	CompletedAt   *time.Time            `json:"completed_at"`
	CreatedAt     time.Time             `json:"created_at"`
	AttemptLog    *[]webhookAttemptBody `json:"attempt_log,omitempty"`
}

type webhookEventBody struct {
	ID                string                `json:"id"`
	Event             string                `json:"event"`
	SessionExternalID *string               `json:"session_external_id"`
	Livemode          bool                  `json:"livemode"`
	CreatedAt         time.Time             `json:"created_at"`
	Payload           json.RawMessage       `json:"payload,omitempty"`
	Deliveries        []webhookDeliveryBody `json:"deliveries"`
}

type webhookEventListBody struct {
	Data    []webhookEventBody `json:"data"`
	Total   int                `json:"total"`
	Limit   int                `json:"limit"`
	Offset  int                `json:"offset"`
	HasMore bool               `json:"has_more"`
}

func newWebhookDeliveryBody(d *ent.WebhookDelivery, withAttempts bool) webhookDeliveryBody {
	out := webhookDeliveryBody{
		ID: d.ID.String(), URL: d.URL, Status: string(d.Status), Attempts: d.Attempts,
		NextAttemptAt: utcPtr(d.NextAttemptAt), CompletedAt: utcPtr(d.CompletedAt),
		CreatedAt: d.CreatedAt.UTC(),
	}
	if withAttempts {
		log := make([]webhookAttemptBody, len(d.Edges.AttemptLog))
		for i, a := range d.Edges.AttemptLog {
			log[i] = webhookAttemptBody{
				At: a.At.UTC(), StatusCode: agentpay.AttemptStatusCode(a), DurationMs: a.DurationMs,
				Error: renderREST(agentpay.AttemptError(a)),
			}
		}
		out.AttemptLog = &log
	}
	return out
}

// newWebhookEventBody shows an event; full adds the payload as sent and
// every delivery's attempts.
func newWebhookEventBody(e *ent.WebhookEvent, full bool) webhookEventBody {
	out := webhookEventBody{
		ID: e.ID.String(), Event: e.EventType, Livemode: e.Livemode, CreatedAt: e.CreatedAt.UTC(),
		Deliveries: make([]webhookDeliveryBody, len(e.Edges.Deliveries)),
	}
	out.SessionExternalID = nullable(agentpay.WebhookEventSessionExternalID(e, e.Edges.Session))
	if full {
		out.Payload = json.RawMessage(e.Payload)
	}
	for i, d := range e.Edges.Deliveries {
		out.Deliveries[i] = newWebhookDeliveryBody(d, full)
	}
	return out
}

// webhookEventID reads {id}; a malformed id is an unknown event (404).
func webhookEventID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		return uuid.Nil, agentpay.ErrNotFound
	}
	return id, nil
}

func (s *server) listWebhookEvents(w http.ResponseWriter, r *http.Request) {
	limit, err := queryInt(r, "limit")
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	offset, err := queryInt(r, "offset")
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	page, err := s.svc.ListWebhookEvents(r.Context(), merchantFrom(r.Context()), agentpay.ListParams{Limit: limit, Offset: offset})
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	out := webhookEventListBody{
		Data:  make([]webhookEventBody, len(page.Events)),
		Total: page.Total, Limit: page.Limit, Offset: page.Offset,
		HasMore: page.HasMore,
	}
	for i, e := range page.Events {
		out.Data[i] = newWebhookEventBody(e, false)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) getWebhookEvent(w http.ResponseWriter, r *http.Request) {
	id, err := webhookEventID(r)
	if err == nil {
		var e *ent.WebhookEvent
		if e, err = s.svc.WebhookEvent(r.Context(), merchantFrom(r.Context()), id); err == nil {
			writeJSON(w, http.StatusOK, newWebhookEventBody(e, true))
			return
		}
	}
	writeError(w, r, s.logger, areaMerchant, err)
}

func (s *server) redeliverWebhookEvent(w http.ResponseWriter, r *http.Request) {
	id, err := webhookEventID(r)
	if err == nil {
		var d *ent.WebhookDelivery
		if d, err = s.svc.RedeliverOwnWebhook(r.Context(), merchantFrom(r.Context()), id); err == nil {
			writeJSON(w, http.StatusCreated, newWebhookDeliveryBody(d, false))
			return
		}
	}
	writeError(w, r, s.logger, areaMerchant, err)
}

// renderREST is a stored text with the actions it names written as REST
// routes (agentpay.Action), nil for none.
func renderREST(text *string) *string {
	if text == nil {
		return nil
	}
	out := httpx.RenderREST(*text)
	return &out
}
