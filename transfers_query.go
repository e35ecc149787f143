package agentpay

import (
	"context"

	"entgo.io/contrib/entgql"
	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/transfer"
)

// TransfersOf is every transfer an agent takes part in: those it sent (in
// any state) and those sent to it. It is the one place that says which
// transfers an agent may see; TransfersPage and Node narrow it further.
func (s *Service) TransfersOf(agent *ent.Agent) *ent.TransferQuery {
	return s.cfg.DB.Ent.Transfer.Query().Where(transfer.Or(
		transfer.FromAgentID(agent.ID),
		transfer.ToAgentID(agent.ID),
	))
}

// Page sizes of an agent's transfers: a page asks for at most
// MaxTransfersPage, and one that names no size (neither first nor last)
// gets the first DefaultTransfersPage.
const (
	DefaultTransfersPage = 20
	MaxTransfersPage     = 100
)

// TransfersPage is one Relay page of the agent's transfers (TransfersOf),
// by order (newest first when nil).
func (s *Service) TransfersPage(ctx context.Context, agent *ent.Agent,
	after *entgql.Cursor[uuid.UUID], first *int, before *entgql.Cursor[uuid.UUID], last *int,
	order *ent.TransferOrder,
) (*ent.TransferConnection, error) {
	for name, n := range map[string]*int{"first": first, "last": last} {
		if n != nil && (*n < 0 || *n > MaxTransfersPage) {
			return nil, Invalid(name, "must be between 0 and %d", MaxTransfersPage)
		}
	}
	if first == nil && last == nil {
		n := DefaultTransfersPage
		first = &n
	}
	if order == nil {
		order = &ent.TransferOrder{Field: ent.TransferOrderFieldCreatedAt, Direction: entgql.OrderDirectionDesc}
	}
	return s.TransfersOf(agent).Paginate(ctx, after, first, before, last, ent.WithTransferOrder(order))
}
