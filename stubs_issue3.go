package agentpay

// Temporary contract of the agent API (issue 3): each function here is
// deleted by the engineer who implements it in its own file. This file must
// be gone before the issue is resolved.

import (
	"context"
	"errors"

	"agentpay/ent"
)

var errNotYet = errors.New("not implemented yet")

// --- agents.go / trust.go ---
func (s *Service) QuickRegister(ctx context.Context, username string) (*Registration, error) {
	return nil, errNotYet
}
func (s *Service) Authenticate(ctx context.Context, apiKey string) (*ent.Agent, error) {
	return nil, errNotYet
}
func (s *Service) AgentByID(ctx context.Context, id string) (*AgentProfile, error) {
	return nil, errNotYet
}
func (s *Service) AgentByUsername(ctx context.Context, username string) (*AgentProfile, error) {
	return nil, errNotYet
}
func (s *Service) CheckUsername(ctx context.Context, username string) (bool, error) {
	return false, errNotYet
}
func (s *Service) Leaderboard(ctx context.Context, sortBy string, limit int) ([]*ent.Agent, error) {
	return nil, errNotYet
}
func (s *Service) Stats(ctx context.Context) (*AgentStats, error)      { return nil, errNotYet }
func (s *Service) Treasury(ctx context.Context) (*TreasuryInfo, error) { return nil, errNotYet }
func (s *Service) Profile(ctx context.Context, agent *ent.Agent) (*AgentProfile, error) {
	return nil, errNotYet
}
func (s *Service) Limits(ctx context.Context, agent *ent.Agent) (*AgentLimits, error) {
	return nil, errNotYet
}
func (s *Service) Wallets(ctx context.Context, agent *ent.Agent) ([]*ent.Wallet, error) {
	return nil, errNotYet
}
func (s *Service) RegenerateAPIKey(ctx context.Context, agent *ent.Agent) (string, error) {
	return "", errNotYet
}

type Registration struct{}
type AgentProfile struct{}
type AgentStats struct{}
type TreasuryInfo struct{}
type AgentLimits struct{}

// --- transfers.go / balances.go ---
func (s *Service) Send(ctx context.Context, agent *ent.Agent, req SendRequest) (*SendResult, error) {
	return nil, errNotYet
}
func (s *Service) Balance(ctx context.Context, agent *ent.Agent) (*Balance, error) {
	return nil, errNotYet
}

type SendRequest struct{}
type SendResult struct{}
type Balance struct{}

// --- ratelimit.go ---
func (s *Service) AllowAgent(ctx context.Context, agent *ent.Agent) (RateDecision, error) {
	return RateDecision{Allowed: true}, nil
}
func (s *Service) AllowIP(ctx context.Context, ip string, kind RateKind) (RateDecision, error) {
	return RateDecision{Allowed: true}, nil
}

type RateDecision struct{ Allowed bool }
type RateKind string

// --- eip712.go ---
func (s *Service) SignatureMessage(ctx context.Context, username, walletAddress string) (*SignatureMessage, error) {
	return nil, errNotYet
}
func (s *Service) Register(ctx context.Context, req RegisterRequest) (*Registration, error) {
	return nil, errNotYet
}
func (s *Service) VerifyWallet(ctx context.Context, agent *ent.Agent, req VerifyWalletRequest) (*ent.Wallet, error) {
	return nil, errNotYet
}

type SignatureMessage struct{}
type RegisterRequest struct{}
type VerifyWalletRequest struct{}

const (
	RateRequest      RateKind = "request"
	RateRegistration RateKind = "registration"
)
