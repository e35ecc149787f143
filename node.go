package agentpay

import (
	"context"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
)

type callerAgentKey struct{}

// WithCallerAgent records the authenticated agent making a request, the
// caller whose objects Node may show.
func WithCallerAgent(ctx context.Context, agent *ent.Agent) context.Context {
	return context.WithValue(ctx, callerAgentKey{}, agent)
}

// CallerAgent returns the agent recorded by WithCallerAgent, or nil.
func CallerAgent(ctx context.Context) *ent.Agent {
	a, _ := ctx.Value(callerAgentKey{}).(*ent.Agent)
	return a
}

// Node resolves a Relay global id. Every object belongs to an agent or a
// merchant, and a caller may only see its own: an authenticated agent (see
// WithCallerAgent) sees itself, its wallets and the transfers it sent or
// received; an authenticated merchant (WithCallerMerchant) its own objects
// in its key's mode (merchantNode); anything else, and anything for an anonymous caller, is not
// found, the same answer as an id that does not exist, so the lookup leaks
// nothing about other accounts.
func (s *Service) Node(ctx context.Context, id uuid.UUID) (ent.Noder, error) {
	agent := CallerAgent(ctx)
	if agent == nil {
		if m := CallerMerchant(ctx); m != nil {
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
