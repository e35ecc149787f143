package agentpay

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"entgo.io/contrib/entgql"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/merchantkey"
	"agentpay/ent/payment"
	"agentpay/ent/predicate"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
)

// Merchant queries for dashboards (the GraphQL merchant API): the caller's
// sessions and payments as Relay pages with filters (its webhook events:
// events.go), and
// the Relay node lookup for merchant callers. Like the REST views, every
// query is scoped to the authenticated merchant and the mode of its key:
// another merchant's object, or one of the other mode, is not found.

type callerMerchantKey struct{}

// WithCallerMerchant records the authenticated merchant (and the mode of
// its key) making a request, the caller whose objects Node may show.
func WithCallerMerchant(ctx context.Context, auth *MerchantAuth) context.Context {
	return context.WithValue(ctx, callerMerchantKey{}, auth)
}

// CallerMerchant returns the merchant recorded by WithCallerMerchant, or nil.
func CallerMerchant(ctx context.Context) *MerchantAuth {
	a, _ := ctx.Value(callerMerchantKey{}).(*MerchantAuth)
	return a
}

// ownSessions is the one predicate that says which sessions a merchant
// caller sees: its own, in its key's mode.
func ownSessions(auth *MerchantAuth) predicate.CheckoutSession {
	return checkoutsession.And(
		checkoutsession.MerchantID(auth.Merchant.ID),
		checkoutsession.Livemode(auth.Livemode()),
	)
}

// SessionsOf is every session the caller sees (its merchant's, in its
// key's mode).
func (s *Service) SessionsOf(auth *MerchantAuth) *ent.CheckoutSessionQuery {
	return s.cfg.DB.Ent.CheckoutSession.Query().Where(ownSessions(auth))
}

// PaymentsOf is every payment the caller sees: those of its sessions.
func (s *Service) PaymentsOf(auth *MerchantAuth) *ent.PaymentQuery {
	return s.cfg.DB.Ent.Payment.Query().Where(payment.HasSessionWith(ownSessions(auth)))
}

// PageArgs are the Relay arguments of a page: first/after walk forward,
// last/before backward. first and last are 0 to MaxSessionListLimit; a
// page that names neither gets the first DefaultSessionListLimit.
type PageArgs struct {
	After  *entgql.Cursor[uuid.UUID]
	First  *int
	Before *entgql.Cursor[uuid.UUID]
	Last   *int
}

func (p PageArgs) normalise() (PageArgs, error) {
	for name, n := range map[string]*int{"first": p.First, "last": p.Last} {
		if n != nil && (*n < 0 || *n > MaxSessionListLimit) {
			return p, Invalid(name, "must be between 0 and %d", MaxSessionListLimit)
		}
	}
	if p.First == nil && p.Last == nil {
		n := DefaultSessionListLimit
		p.First = &n
	}
	return p, nil
}

// SessionFilter narrows the caller's sessions. Empty fields do not filter.
type SessionFilter struct {
	// Statuses keeps sessions in any of these states.
	Statuses []checkoutsession.Status
	// CreatedFrom keeps sessions created at or after it; CreatedTo those
	// created before it (a half-open range, so consecutive ranges never
	// count a session twice).
	CreatedFrom, CreatedTo *time.Time
}

func (f SessionFilter) predicates() ([]predicate.CheckoutSession, error) {
	var ps []predicate.CheckoutSession
	if len(f.Statuses) > 0 {
		for _, st := range f.Statuses {
			if err := checkoutsession.StatusValidator(st); err != nil {
				return nil, Invalid("status", "%q is not a session status", st)
			}
		}
		ps = append(ps, checkoutsession.StatusIn(f.Statuses...))
	}
	if f.CreatedFrom != nil && f.CreatedTo != nil && f.CreatedTo.Before(*f.CreatedFrom) {
		return nil, Invalid("createdTo", "must not be before createdFrom")
	}
	// Times are stored in UTC; comparing in UTC keeps SQLite's text
	// comparison right.
	if f.CreatedFrom != nil {
		ps = append(ps, checkoutsession.CreatedAtGTE(f.CreatedFrom.UTC()))
	}
	if f.CreatedTo != nil {
		ps = append(ps, checkoutsession.CreatedAtLT(f.CreatedTo.UTC()))
	}
	return ps, nil
}

// SessionsPage is one Relay page of the caller's sessions (SessionsOf)
// matching f, by order (newest first when nil; ties by id).
func (s *Service) SessionsPage(ctx context.Context, auth *MerchantAuth, f SessionFilter, page PageArgs, order *ent.CheckoutSessionOrder) (*ent.CheckoutSessionConnection, error) {
	page, err := page.normalise()
	if err != nil {
		return nil, err
	}
	ps, err := f.predicates()
	if err != nil {
		return nil, err
	}
	if order == nil {
		order = &ent.CheckoutSessionOrder{Field: ent.CheckoutSessionOrderFieldCreatedAt, Direction: entgql.OrderDirectionDesc}
	}
	return s.SessionsOf(auth).Where(ps...).
		Paginate(ctx, page.After, page.First, page.Before, page.Last, ent.WithCheckoutSessionOrder(order))
}

// AllSessions is every session the caller sees, newest first.
func (s *Service) AllSessions(ctx context.Context, auth *MerchantAuth) ([]*ent.CheckoutSession, error) {
	return s.SessionsOf(auth).
		Order(ent.Desc(checkoutsession.FieldCreatedAt), ent.Desc(checkoutsession.FieldID)).
		All(ctx)
}

// PaymentFilter narrows the caller's payments. Empty fields do not filter.
type PaymentFilter struct {
	// SessionExternalID keeps the payments of one session (none when the
	// session is not the caller's).
	SessionExternalID *string
	// Statuses keeps payments in any of these states.
	Statuses []payment.Status
}

// PaymentsPage is one Relay page of the caller's payments (PaymentsOf)
// matching f, by order (newest first when nil; ties by id).
func (s *Service) PaymentsPage(ctx context.Context, auth *MerchantAuth, f PaymentFilter, page PageArgs, order *ent.PaymentOrder) (*ent.PaymentConnection, error) {
	page, err := page.normalise()
	if err != nil {
		return nil, err
	}
	q := s.PaymentsOf(auth)
	if f.SessionExternalID != nil {
		q = q.Where(payment.HasSessionWith(checkoutsession.ExternalID(*f.SessionExternalID)))
	}
	if len(f.Statuses) > 0 {
		for _, st := range f.Statuses {
			if err := payment.StatusValidator(st); err != nil {
				return nil, Invalid("status", "%q is not a payment status", st)
			}
		}
		q = q.Where(payment.StatusIn(f.Statuses...))
	}
	if order == nil {
		order = &ent.PaymentOrder{Field: ent.PaymentOrderFieldCreatedAt, Direction: entgql.OrderDirectionDesc}
	}
	return q.Paginate(ctx, page.After, page.First, page.Before, page.Last, ent.WithPaymentOrder(order))
}

// PaymentTokenAmount is a payment's token amount (amount_token, base units
// of USDC) as an exact decimal.
func PaymentTokenAmount(p *ent.Payment) decimal.Decimal {
	return FromBaseUnits(big.NewInt(p.AmountToken), USDCDecimals)
}

// CurrentMerchantKeys is the merchant's key pairs in use (one live, one
// test; rolled keys are left out). Secret keys are never stored.
func (s *Service) CurrentMerchantKeys(ctx context.Context, m *ent.Merchant) ([]*ent.MerchantKey, error) {
	keys, err := s.cfg.DB.Ent.MerchantKey.Query().
		Where(merchantkey.MerchantID(m.ID), merchantkey.RevokedAtIsNil()).
		Order(merchantkey.ByKind()).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading merchant keys: %w", err)
	}
	return keys, nil
}

// merchantNode is Node for a merchant caller: the merchant itself, its
// keys in use, and its sessions, their payments and deposit addresses, and
// its webhook events with their deliveries and attempts, all in the mode
// of the caller's key. Anything else is ErrNotFound.
func (s *Service) merchantNode(ctx context.Context, auth *MerchantAuth, id uuid.UUID) (ent.Noder, error) {
	client := s.cfg.DB.Ent
	if id == auth.Merchant.ID {
		return notFoundAs(client.Merchant.Get(ctx, id))
	}
	own := ownSessions(auth)
	events := ownEvents(auth)
	lookups := []func() (ent.Noder, error){
		func() (ent.Noder, error) {
			return notFoundAs(client.CheckoutSession.Query().Where(checkoutsession.ID(id), own).Only(ctx))
		},
		func() (ent.Noder, error) {
			return notFoundAs(client.Payment.Query().Where(payment.ID(id), payment.HasSessionWith(own)).Only(ctx))
		},
		func() (ent.Noder, error) {
			return notFoundAs(client.WebhookEvent.Query().Where(webhookevent.ID(id), events).Only(ctx))
		},
		func() (ent.Noder, error) {
			return notFoundAs(client.WebhookDelivery.Query().
				Where(webhookdelivery.ID(id), webhookdelivery.HasEventWith(events)).Only(ctx))
		},
		func() (ent.Noder, error) {
			return notFoundAs(client.WebhookAttempt.Query().
				Where(webhookattempt.ID(id), webhookattempt.HasDeliveryWith(webhookdelivery.HasEventWith(events))).Only(ctx))
		},
		func() (ent.Noder, error) {
			return notFoundAs(client.DepositAddress.Query().
				Where(depositaddress.ID(id), depositaddress.HasSessionWith(own)).Only(ctx))
		},
		func() (ent.Noder, error) {
			return notFoundAs(client.MerchantKey.Query().
				Where(merchantkey.ID(id), merchantkey.MerchantID(auth.Merchant.ID), merchantkey.RevokedAtIsNil()).Only(ctx))
		},
	}
	for _, lookup := range lookups {
		n, err := lookup()
		if !errors.Is(err, ErrNotFound) {
			return n, err
		}
	}
	return nil, ErrNotFound
}
