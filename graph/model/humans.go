package model

import (
	"time"

	"github.com/google/uuid"

	"agentpay/ent/user"
)

// The agent's view of humans (graph/humans.graphql). Written by hand and
// bound in gqlgen.yml: autobind would otherwise bind the ent rows of the
// same names, which hold neither the computed status nor the user's name.

// Pairing is a pairing with a human user, as the agent sees it.
type Pairing struct {
	ID          uuid.UUID     `json:"id"`
	UserID      uuid.UUID     `json:"userId"`
	Username    string        `json:"username"`
	DisplayName string        `json:"displayName"`
	Status      PairingStatus `json:"status"`
	KycVerified bool          `json:"kycVerified"`
	Message     string        `json:"message"`
	CreatedAt   time.Time     `json:"createdAt"`
	DecidedAt   *time.Time    `json:"decidedAt,omitempty"`
	ExpiresAt   *time.Time    `json:"expiresAt,omitempty"`
}

// Invitation is an e-mailed invitation, shown once to the inviting agent.
type Invitation struct {
	ID        uuid.UUID `json:"id"`
	Email     string    `json:"email"`
	InviteURL string    `json:"inviteUrl"`
	ExpiresAt time.Time `json:"expiresAt"`
	Message   string    `json:"message"`
}

// AccountEvent is one account event.
type AccountEvent struct {
	ID        int64          `json:"id"`
	Kind      string         `json:"kind"`
	Data      map[string]any `json:"data"`
	CreatedAt time.Time      `json:"createdAt"`
}

// Viewer is the signed-in human.
type Viewer struct {
	ID             uuid.UUID           `json:"id"`
	Username       string              `json:"username"`
	DisplayName    string              `json:"displayName"`
	Email          string              `json:"email"`
	IdentityStatus user.IdentityStatus `json:"identityStatus"`
	Wallets        []*ViewerWallet     `json:"wallets"`
}

// ViewerPairing is a pairing with an agent, as the human sees it.
type ViewerPairing struct {
	ID            uuid.UUID     `json:"id"`
	AgentID       uuid.UUID     `json:"agentId"`
	AgentUsername string        `json:"agentUsername"`
	Status        PairingStatus `json:"status"`
	Message       string        `json:"message"`
	CreatedAt     time.Time     `json:"createdAt"`
	DecidedAt     *time.Time    `json:"decidedAt,omitempty"`
	ExpiresAt     *time.Time    `json:"expiresAt,omitempty"`
}
