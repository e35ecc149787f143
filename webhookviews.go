package agentpay

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
)

// Webhook views (issue 4 item 6): a merchant sees its events, each with its
// deliveries and their attempts, and redelivers one. Everything is scoped to
// the authenticated merchant and the mode of its key: another merchant's
// event, or one of the other mode, is ErrNotFound.

// WebhookEventListParams pages the event list. Limit 0 means the default.
type WebhookEventListParams struct {
	Limit, Offset int
}

// WebhookEventPage is one page of a merchant's events, newest first, each
// with its deliveries (oldest first) loaded.
type WebhookEventPage struct {
	Events        []*ent.WebhookEvent
	Total         int
	Limit, Offset int
}

var errNoSuchWebhookEvent = fmt.Errorf("%w: no such event", ErrNotFound)

func (s *Service) webhookEventQuery(auth *MerchantAuth) *ent.WebhookEventQuery {
	return s.cfg.DB.Ent.WebhookEvent.Query().Where(
		webhookevent.MerchantID(auth.Merchant.ID),
		webhookevent.Livemode(auth.Livemode()),
	)
}

// ListWebhookEvents lists the caller's events in the caller's mode, newest
// first (ties by id). limit is 1 to MaxSessionListLimit (0:
// DefaultSessionListLimit); offset at least 0.
func (s *Service) ListWebhookEvents(ctx context.Context, auth *MerchantAuth, p WebhookEventListParams) (*WebhookEventPage, error) {
	if p.Limit == 0 {
		p.Limit = DefaultSessionListLimit
	}
	if p.Limit < 1 || p.Limit > MaxSessionListLimit {
		return nil, Invalid("limit", "must be between 1 and %d", MaxSessionListLimit)
	}
	if p.Offset < 0 {
		return nil, Invalid("offset", "must be at least 0")
	}
	q := s.webhookEventQuery(auth)
	total, err := q.Clone().Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("counting webhook events: %w", err)
	}
	list, err := q.
		WithSession().
		WithDeliveries(func(dq *ent.WebhookDeliveryQuery) {
			dq.Order(ent.Asc(webhookdelivery.FieldCreatedAt), ent.Asc(webhookdelivery.FieldID))
		}).
		Order(ent.Desc(webhookevent.FieldCreatedAt), ent.Desc(webhookevent.FieldID)).
		Limit(p.Limit).
		Offset(p.Offset).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing webhook events: %w", err)
	}
	return &WebhookEventPage{Events: list, Total: total, Limit: p.Limit, Offset: p.Offset}, nil
}

// WebhookEvent reads one of the caller's events in the caller's mode, with
// its session, its deliveries (oldest first) and their attempts (in order).
func (s *Service) WebhookEvent(ctx context.Context, auth *MerchantAuth, eventID uuid.UUID) (*ent.WebhookEvent, error) {
	ev, err := s.webhookEventQuery(auth).
		Where(webhookevent.ID(eventID)).
		WithSession().
		WithDeliveries(func(dq *ent.WebhookDeliveryQuery) {
			dq.Order(ent.Asc(webhookdelivery.FieldCreatedAt), ent.Asc(webhookdelivery.FieldID)).
				WithAttemptLog(func(aq *ent.WebhookAttemptQuery) {
					aq.Order(webhookattempt.ByAt(), webhookattempt.ByCreatedAt())
				})
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

// RedeliverOwnWebhook is RedeliverWebhook for an authenticated merchant:
// an event of the other mode is ErrNotFound too.
func (s *Service) RedeliverOwnWebhook(ctx context.Context, auth *MerchantAuth, eventID uuid.UUID) (*ent.WebhookDelivery, error) {
	ok, err := s.webhookEventQuery(auth).Where(webhookevent.ID(eventID)).Exist(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading webhook event: %w", err)
	}
	if !ok {
		return nil, errNoSuchWebhookEvent
	}
	return s.RedeliverWebhook(ctx, auth.Merchant.ID, eventID)
}
