package agentpay

import (
	"context"

	"github.com/google/uuid"

	"agentpay/ent"
)

// Node resolves a Relay global id. Every object belongs to an agent or a
// merchant, and a caller may only see its own; until a caller identity is
// attached to the context (agent and merchant authentication), no object is
// visible, so the lookup answers not found rather than leaking another
// account's data.
func (s *Service) Node(ctx context.Context, id uuid.UUID) (ent.Noder, error) {
	return nil, ErrNotFound
}
