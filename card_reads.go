package agentpay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqljson"
	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/ent/user"
)

// Reading card requests (cards.go has the lifecycle): the agent's and
// the human's lists, and the one read that shows an issued card's details.

// cardView reads a request's parties' names.
func (s *Service) cardView(ctx context.Context, r *ent.CardRequest) (*CardRequestView, error) {
	a, err := s.cfg.DB.Ent.Agent.Get(ctx, r.AgentID)
	if err != nil {
		return nil, fmt.Errorf("card request %s: agent: %w", r.ID, err)
	}
	u, err := s.cfg.DB.Ent.User.Get(ctx, r.UserID)
	if err != nil {
		return nil, fmt.Errorf("card request %s: user: %w", r.ID, err)
	}
	v := &CardRequestView{Request: r, AgentUsername: a.Username, Username: u.Username}
	if v.Deciders, err = s.UsernamesOf(ctx, cardDeciders(r)); err != nil {
		return nil, err
	}
	if v.ApprovedBy, err = s.UsernamesOf(ctx, r.ApprovedBy); err != nil {
		return nil, err
	}
	return v, nil
}

// MaxCardRequestsListed is the most requests a list answers.
const MaxCardRequestsListed = 200

// AgentCardRequests lists the agent's requests, newest first.
func (s *Service) AgentCardRequests(ctx context.Context, a *ent.Agent) ([]*CardRequestView, error) {
	return s.listCardRequests(ctx, s.cfg.DB.Ent.CardRequest.Query().Where(cardrequest.AgentID(a.ID)))
}

// UserCardRequests lists the requests the user decides (made to them, or
// held by their spending policy), newest first.
func (s *Service) UserCardRequests(ctx context.Context, u *ent.User) ([]*CardRequestView, error) {
	return s.listCardRequests(ctx, s.cfg.DB.Ent.CardRequest.Query().Where(cardrequest.Or(
		cardrequest.UserID(u.ID),
		func(sel *entsql.Selector) {
			sel.Where(sqljson.ValueContains(sel.C(cardrequest.FieldDeciders), u.ID.String()))
		},
	)))
}

func (s *Service) listCardRequests(ctx context.Context, q *ent.CardRequestQuery) ([]*CardRequestView, error) {
	rs, err := q.WithAgent().WithUser().
		Order(ent.Desc(cardrequest.FieldCreatedAt), ent.Desc(cardrequest.FieldID)).
		Limit(MaxCardRequestsListed).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading card requests: %w", err)
	}
	// The deciders' names, read once for the page.
	var ids []uuid.UUID
	for _, r := range rs {
		ids = append(ids, cardDeciders(r)...)
	}
	names := map[uuid.UUID]string{}
	if len(ids) > 0 {
		us, err := s.cfg.DB.Ent.User.Query().Where(user.IDIn(ids...)).Select(user.FieldID, user.FieldUsername).All(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading deciders: %w", err)
		}
		for _, u := range us {
			names[u.ID] = u.Username
		}
	}
	nameAll := func(ids []uuid.UUID) []string {
		out := make([]string, 0, len(ids))
		for _, id := range ids {
			if n, ok := names[id]; ok {
				out = append(out, n)
			}
		}
		return out
	}
	out := make([]*CardRequestView, len(rs))
	for i, r := range rs {
		out[i] = &CardRequestView{Request: r, AgentUsername: r.Edges.Agent.Username, Username: r.Edges.User.Username,
			Deciders: nameAll(cardDeciders(r)), ApprovedBy: nameAll(r.ApprovedBy)}
	}
	return out, nil
}

func parseCardRequestID(id string) (uuid.UUID, error) {
	rid, err := uuid.Parse(id)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: no card request %q", ErrNotFound, id)
	}
	return rid, nil
}

// AgentCardRequest is one of the agent's requests. The first read after
// the card is issued answers its details (Details) and marks them shown;
// every later read answers the last four digits only.
func (s *Service) AgentCardRequest(ctx context.Context, a *ent.Agent, id string) (*CardRequestView, error) {
	view, err := s.PeekAgentCardRequest(ctx, a, id)
	if err != nil {
		return nil, err
	}
	r := view.Request
	if r.Status != cardrequest.StatusApproved || r.CardSealed == nil || r.CardRevealedAt != nil {
		return view, nil
	}
	// Shown once: only the read whose update takes the unrevealed row
	// answers the details, however many race.
	now := s.now().UTC().Truncate(time.Microsecond)
	n, err := s.cfg.DB.Ent.CardRequest.Update().
		Where(cardrequest.ID(r.ID), cardrequest.CardRevealedAtIsNil(), cardrequest.CardSealedNotNil()).
		SetCardRevealedAt(now).Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("revealing card: %w", err)
	}
	if n == 0 {
		return view, nil
	}
	plain, err := s.cfg.Vault.Open(*r.CardSealed, cardSealAD(r.ID))
	if err != nil {
		return nil, fmt.Errorf("card request %s: opening card: %w", r.ID, err)
	}
	defer clear(plain)
	var d CardDetails
	if err := json.Unmarshal(plain, &d); err != nil {
		return nil, fmt.Errorf("card request %s: reading card: %w", r.ID, err)
	}
	view.Request.CardRevealedAt = &now
	view.Details = &d
	return view, nil
}

// PeekAgentCardRequest is one of the agent's requests without its card's
// details: a read that must not spend the one reveal (an MCP client
// cancelling its task, say).
func (s *Service) PeekAgentCardRequest(ctx context.Context, a *ent.Agent, id string) (*CardRequestView, error) {
	rid, err := parseCardRequestID(id)
	if err != nil {
		return nil, err
	}
	r, err := s.cfg.DB.Ent.CardRequest.Query().Where(cardrequest.ID(rid), cardrequest.AgentID(a.ID)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: no card request %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading card request: %w", err)
	}
	return s.cardView(ctx, r)
}

// cardSealAD binds a sealed card to its request: the details sealed for
// one request cannot be opened as another's.
func cardSealAD(id uuid.UUID) []byte { return []byte("agentpay/card/" + id.String()) }
