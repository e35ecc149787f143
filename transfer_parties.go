package agentpay

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/predicate"
	"agentpay/ent/transfer"
	"agentpay/ent/user"
	"agentpay/ent/wallet"
)

// holder is a party whose custodial wallets a transfer leaves or reaches:
// an agent or a human user. A transfer's sender is one (an agent's send, a
// user's withdrawal), and so is its recipient, except that a withdrawal
// pays an external address: its recipient is the zero holder (none).
type holder struct {
	agentID, userID *uuid.UUID
	username        string
}

func agentHolder(a *ent.Agent) holder { return holder{agentID: &a.ID, username: a.Username} }

func userHolder(u *ent.User) holder { return holder{userID: &u.ID, username: u.Username} }

// none: no party (a withdrawal's recipient, an external address).
func (h holder) none() bool { return h.agentID == nil && h.userID == nil }

// wallets selects the holder's custodial wallets.
func (h holder) wallets(db *ent.Client) *ent.WalletQuery {
	q := db.Wallet.Query().Where(wallet.KindEQ(wallet.KindCustodial))
	if h.agentID != nil {
		return q.Where(wallet.AgentID(*h.agentID))
	}
	return q.Where(wallet.UserID(*h.userID))
}

// sent selects the transfers the holder sent.
func (h holder) sent() predicate.Transfer {
	if h.agentID != nil {
		return transfer.FromAgentID(*h.agentID)
	}
	return transfer.FromUserID(*h.userID)
}

// party is the holder as the party its account events are for.
func (h holder) party() Party {
	if h.agentID != nil {
		return AgentParty(*h.agentID)
	}
	return UserParty(*h.userID)
}

// resolveRecipient finds the agent (or, for send-to-user, the user) named
// by req; none is ErrNotFound.
func (s *Service) resolveRecipient(ctx context.Context, req SendRequest) (holder, error) {
	if req.ToUser {
		u, err := s.cfg.DB.Ent.User.Query().Where(user.Username(req.ToUsername)).Only(ctx)
		if ent.IsNotFound(err) {
			return holder{}, fmt.Errorf("%w: no user named %q", ErrNotFound, req.ToUsername)
		}
		if err != nil {
			return holder{}, fmt.Errorf("send: reading recipient: %w", err)
		}
		return userHolder(u), nil
	}
	a, err := s.cfg.DB.Ent.Agent.Query().Where(agent.Username(req.ToUsername)).Only(ctx)
	if ent.IsNotFound(err) {
		return holder{}, fmt.Errorf("%w: no agent named %q", ErrNotFound, req.ToUsername)
	}
	if err != nil {
		return holder{}, fmt.Errorf("send: reading recipient: %w", err)
	}
	return agentHolder(a), nil
}

// holderOf reads the agent or user of the ids (the zero holder for none).
func (s *Service) holderOf(ctx context.Context, agentID, userID *uuid.UUID) (holder, error) {
	switch {
	case agentID != nil:
		a, err := s.cfg.DB.Ent.Agent.Get(ctx, *agentID)
		if err != nil {
			return holder{}, err
		}
		return agentHolder(a), nil
	case userID != nil:
		u, err := s.cfg.DB.Ent.User.Get(ctx, *userID)
		if err != nil {
			return holder{}, err
		}
		return userHolder(u), nil
	}
	return holder{}, nil
}

// recipientOf is whom a recorded transfer pays (none for a withdrawal).
func (s *Service) recipientOf(ctx context.Context, t *ent.Transfer) (holder, error) {
	h, err := s.holderOf(ctx, t.ToAgentID, t.ToUserID)
	if err != nil {
		return holder{}, fmt.Errorf("recipient: %w", err)
	}
	return h, nil
}

// senderOf is who sent a recorded transfer.
func (s *Service) senderOf(ctx context.Context, t *ent.Transfer) (holder, error) {
	if t.FromAgentID == nil && t.FromUserID == nil {
		return holder{}, fmt.Errorf("transfer %s has no sender", t.ID)
	}
	h, err := s.holderOf(ctx, t.FromAgentID, t.FromUserID)
	if err != nil {
		return holder{}, fmt.Errorf("sender: %w", err)
	}
	return h, nil
}
