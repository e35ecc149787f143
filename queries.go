package agentpay

import (
	"context"
	"errors"
	"math/big"
	"time"

	"entgo.io/contrib/entgql"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/merchantkey"
	"agentpay/ent/payment"
	"agentpay/ent/predicate"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
)

// What a caller may read, and the GraphQL connections over it: the
// callers (WithCallerAgent, WithCallerMerchant), the scopes (TransfersOf,
// SessionsOf, PaymentsOf; events.go's WebhookEventsOf), the Relay pages
// with their filters, and the node lookup.

type callerMerchantKey struct{}

// WithCallerMerchant records the authenticated merchant (and the mode of
// its key) making a request, the caller whose objects Node may show.
func WithCallerMerchant(ctx context.Context, auth *MerchantAuth) context.Context {
	return context.WithValue(ctx, callerMerchantKey{}, auth)
}

// callerMerchant returns the merchant recorded by WithCallerMerchant, or nil.
func callerMerchant(ctx context.Context) *MerchantAuth {
	a, _ := ctx.Value(callerMerchantKey{}).(*MerchantAuth)
	return a
}

type callerAgentKey struct{}

// WithCallerAgent records the authenticated agent making a request, the
// caller whose objects Node may show.
func WithCallerAgent(ctx context.Context, agent *ent.Agent) context.Context {
	return context.WithValue(ctx, callerAgentKey{}, agent)
}

// callerAgent returns the agent recorded by WithCallerAgent, or nil.
func callerAgent(ctx context.Context) *ent.Agent {
	a, _ := ctx.Value(callerAgentKey{}).(*ent.Agent)
	return a
}

// Node resolves a Relay global id for the caller in ctx: an authenticated
// agent (WithCallerAgent) sees itself, its wallets and the transfers it
// sent or received; an authenticated merchant (WithCallerMerchant) its own
// objects in its key's mode (merchantNode). Anything else, and anything for
// an anonymous caller, is not found, like an id that does not exist.
func (s *Service) Node(ctx context.Context, id uuid.UUID) (ent.Noder, error) {
	agent := callerAgent(ctx)
	if agent == nil {
		if m := callerMerchant(ctx); m != nil {
			return s.merchantNode(ctx, m, id)
		}
		return nil, ErrNotFound
	}
	client := s.cfg.DB.Ent
	if id == agent.ID {
		return notFoundAs(client.Agent.Get(ctx, id))
	}
	w, err := client.Wallet.Query().Where(wallet.ID(id), wallet.AgentID(agent.ID)).Only(ctx)
	if err == nil || !ent.IsNotFound(err) {
		return notFoundAs(w, err)
	}
	return notFoundAs(s.TransfersOf(agent).Where(transfer.ID(id)).Only(ctx))
}

// Nodes resolves each of ids as Node does, in order, at most MaxPageSize
// at a time (a list of ids is a page like any other).
func (s *Service) Nodes(ctx context.Context, ids []uuid.UUID) ([]ent.Noder, error) {
	if len(ids) > MaxPageSize {
		return nil, Invalid("ids", "must list at most %d ids", MaxPageSize)
	}
	out := make([]ent.Noder, len(ids))
	for i, id := range ids {
		n, err := s.Node(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// notFoundAs turns ent's not-found into ErrNotFound.
func notFoundAs[T ent.Noder](n T, err error) (ent.Noder, error) {
	if ent.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return n, nil
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

// TransfersOf is every transfer an agent takes part in: those it sent (in
// any state) and those sent to it. It is the one place that says which
// transfers an agent may see; TransfersPage and Node narrow it further.
func (s *Service) TransfersOf(agent *ent.Agent) *ent.TransferQuery {
	return s.cfg.DB.Ent.Transfer.Query().Where(transfer.Or(
		transfer.FromAgentID(agent.ID),
		transfer.ToAgentID(agent.ID),
	))
}

// Page sizes of every list and connection: a page asks for at most
// MaxPageSize, and one that names no size gets DefaultPageSize.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// ListParams page a REST list: Limit 1 to MaxPageSize (0: DefaultPageSize),
// Offset at least 0.
type ListParams struct {
	Limit, Offset int
}

func (p ListParams) normalise() (ListParams, error) {
	if p.Limit == 0 {
		p.Limit = DefaultPageSize
	}
	if p.Limit < 1 || p.Limit > MaxPageSize {
		return p, Invalid("limit", "must be between 1 and %d", MaxPageSize)
	}
	if p.Offset < 0 {
		return p, Invalid("offset", "must be at least 0")
	}
	return p, nil
}

// ListPage is where a page of a REST list sits in the whole list: the
// list's length, the limit and offset it was read with, and whether more
// follow it.
type ListPage struct {
	Total, Limit, Offset int
	HasMore              bool
}

// page is the ListPage of n items read with p from a list of total.
func (p ListParams) page(total, n int) ListPage {
	return ListPage{Total: total, Limit: p.Limit, Offset: p.Offset, HasMore: p.Offset+n < total}
}

// PageArgs are the Relay arguments of a page: first/after walk forward,
// last/before backward. first and last are 0 to MaxPageSize; a page that
// names neither gets the first DefaultPageSize.
type PageArgs struct {
	After  *entgql.Cursor[uuid.UUID]
	First  *int
	Before *entgql.Cursor[uuid.UUID]
	Last   *int
}

func (p PageArgs) normalise() (PageArgs, error) {
	for name, n := range map[string]*int{"first": p.First, "last": p.Last} {
		if n != nil && (*n < 0 || *n > MaxPageSize) {
			return p, Invalid(name, "must be between 0 and %d", MaxPageSize)
		}
	}
	if p.First == nil && p.Last == nil {
		n := DefaultPageSize
		p.First = &n
	}
	return p, nil
}

// distinct is vs without repeats, in first-seen order: a filter's values
// are from a fixed set, so its IN list stays as short as the set however
// long the list a client sends.
func distinct[T comparable](vs []T) []T {
	seen := make(map[T]bool, len(vs))
	out := vs[:0:0]
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// SessionFilter narrows the caller's sessions. Empty fields do not filter.
type SessionFilter struct {
	// Statuses keeps sessions in any of these states.
	Statuses []checkoutsession.Status
	// CreatedFrom keeps sessions created at or after it; CreatedTo those
	// created before it (a half-open range, so consecutive ranges never
	// count a session twice).
	CreatedFrom, CreatedTo *time.Time
	// Search keeps the session whose external id it is, and the sessions
	// with a top-level metadata string value equal to it (sessionSearch).
	Search *string
}

func (f SessionFilter) predicates() ([]predicate.CheckoutSession, error) {
	var ps []predicate.CheckoutSession
	if len(f.Statuses) > 0 {
		for _, st := range f.Statuses {
			if err := checkoutsession.StatusValidator(st); err != nil {
				return nil, Invalid("status", "%q is not a session status", st)
			}
		}
		ps = append(ps, checkoutsession.StatusIn(distinct(f.Statuses)...))
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
	if f.Search != nil {
		p, err := s.sessionSearch(*f.Search)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	if order == nil {
		order = &ent.CheckoutSessionOrder{Field: ent.CheckoutSessionOrderFieldCreatedAt, Direction: entgql.OrderDirectionDesc}
	}
	return s.SessionsOf(auth).Where(ps...).
		Paginate(ctx, page.After, page.First, page.Before, page.Last, ent.WithCheckoutSessionOrder(order))
}

// SessionList is one page of every session the caller sees as a plain list,
// newest first (ties by id), the first page.First (the paging rule of
// PageArgs) after page.After, a cursor of SessionsPage in its default
// order. It is the GraphQL Merchant.sessions field, which once listed every
// row; unlike a connection it counts nothing.
func (s *Service) SessionList(ctx context.Context, auth *MerchantAuth, page PageArgs) ([]*ent.CheckoutSession, error) {
	page, err := page.normalise()
	if err != nil {
		return nil, err
	}
	q := s.SessionsOf(auth)
	for _, p := range newestFirstAfter(page.After) {
		q = q.Where(predicate.CheckoutSession(p))
	}
	return q.Order(ent.Desc(checkoutsession.FieldCreatedAt), ent.Desc(checkoutsession.FieldID)).
		Limit(*page.First).All(ctx)
}

// newestFirstAfter selects the rows after cursor in the newest-first order
// (created_at, then id, both descending) of the connections' default order,
// as their pagers do.
func newestFirstAfter(cursor *entgql.Cursor[uuid.UUID]) []func(*entsql.Selector) {
	return entgql.CursorsPredicate(cursor, nil, "id", "created_at", entgql.OrderDirectionDesc)
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
		q = q.Where(payment.StatusIn(distinct(f.Statuses)...))
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

// TransfersPage is one Relay page of the agent's transfers (TransfersOf),
// by order (newest first when nil).
func (s *Service) TransfersPage(ctx context.Context, agent *ent.Agent, page PageArgs, order *ent.TransferOrder) (*ent.TransferConnection, error) {
	page, err := page.normalise()
	if err != nil {
		return nil, err
	}
	if order == nil {
		order = &ent.TransferOrder{Field: ent.TransferOrderFieldCreatedAt, Direction: entgql.OrderDirectionDesc}
	}
	return s.TransfersOf(agent).Paginate(ctx, page.After, page.First, page.Before, page.Last, ent.WithTransferOrder(order))
}
