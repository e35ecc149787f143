package rest

import (
	"net/http"
	"time"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/httpx"
)

// myWalletBody is one of the agent's own wallets.
type myWalletBody struct {
	Address   string    `json:"address"`
	Chain     string    `json:"chain"`
	Kind      string    `json:"kind"` // custodial or external
	Verified  bool      `json:"verified"`
	Primary   bool      `json:"primary"`
	CreatedAt time.Time `json:"created_at"`
}

func newMyWalletBody(a *ent.Agent, w *ent.Wallet) myWalletBody {
	return myWalletBody{
		Address:   w.Address,
		Chain:     w.Chain,
		Kind:      string(w.Kind),
		Verified:  w.Verified,
		Primary:   agentpay.IsPrimaryWallet(a, w),
		CreatedAt: w.CreatedAt.UTC(),
	}
}

func newMyWalletBodies(a *ent.Agent, ws agentpay.AgentWallets) []myWalletBody {
	out := make([]myWalletBody, 0, len(ws.All))
	for _, w := range ws.All {
		out = append(out, newMyWalletBody(a, w))
	}
	return out
}

type verificationBody struct {
	PartnerVerified        bool `json:"partner_verified"`
	ExternalWalletVerified bool `json:"external_wallet_verified"`
	HumanVerified          bool `json:"human_verified"`
}

type myStatsBody struct {
	Transactions      int64        `json:"transactions"`
	VolumeSentUSD     httpx.Amount `json:"volume_sent_usd"`
	VolumeReceivedUSD httpx.Amount `json:"volume_received_usd"`
	FeesPaidUSD       httpx.Amount `json:"fees_paid_usd"`
}

// profileBody is the agent's own full profile: GET /agents/me/profile.
type profileBody struct {
	AgentID         string           `json:"agent_id"`
	Username        string           `json:"username"`
	Tier            string           `json:"tier"`
	TrustScore      int              `json:"trust_score"`
	WalletAddress   string           `json:"wallet_address"`
	WalletChain     string           `json:"wallet_chain"`
	Wallets         []myWalletBody   `json:"wallets"`
	InviteCode      string           `json:"invite_code"`
	InviteURL       string           `json:"invite_url"`
	Verification    verificationBody `json:"verification"`
	Stats           myStatsBody      `json:"stats"`
	APIKeyRotatedAt *time.Time       `json:"api_key_rotated_at"`
	CreatedAt       time.Time        `json:"created_at"`
}

// myProfile: GET /agents/me/profile.
func (s *server) myProfile(w http.ResponseWriter, r *http.Request) {
	p, err := s.svc.Profile(r.Context(), agentFrom(r.Context()))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	a := p.Agent
	body := profileBody{
		AgentID:    a.ID.String(),
		Username:   a.Username,
		Tier:       string(a.Tier),
		TrustScore: a.TrustScore,
		Wallets:    newMyWalletBodies(a, p.Wallets),
		InviteCode: a.InviteCode,
		InviteURL:  p.InviteURL,
		Verification: verificationBody{
			PartnerVerified:        a.PartnerVerified,
			ExternalWalletVerified: a.ExternalWalletVerified,
			HumanVerified:          a.HumanVerified,
		},
		Stats: myStatsBody{
			Transactions:      a.TxCount,
			VolumeSentUSD:     usd(a.VolumeSent),
			VolumeReceivedUSD: usd(a.VolumeReceived),
			FeesPaidUSD:       usd(a.FeesPaid),
		},
		CreatedAt: a.CreatedAt.UTC(),
	}
	if pw := p.Wallets.Primary; pw != nil {
		body.WalletAddress, body.WalletChain = pw.Address, pw.Chain
	}
	if a.APIKeyRotatedAt != nil {
		t := a.APIKeyRotatedAt.UTC()
		body.APIKeyRotatedAt = &t
	}
	writeJSON(w, http.StatusOK, body)
}

// myLimits: GET /agents/me/limits.
func (s *server) myLimits(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	l, err := s.svc.Limits(r.Context(), a)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, httpx.LimitsOf(a, l))
}

// walletsBody: GET /agents/me/wallets.
type walletsBody struct {
	AgentID       string         `json:"agent_id"`
	WalletAddress string         `json:"wallet_address"`
	WalletChain   string         `json:"wallet_chain"`
	Wallets       []myWalletBody `json:"wallets"`
}

// myWallets: GET /agents/me/wallets.
func (s *server) myWallets(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	ws, err := s.svc.Wallets(r.Context(), a)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	body := walletsBody{AgentID: a.ID.String(), Wallets: newMyWalletBodies(a, ws)}
	if pw := ws.Primary; pw != nil {
		body.WalletAddress, body.WalletChain = pw.Address, pw.Chain
	}
	writeJSON(w, http.StatusOK, body)
}

type regenerateBody struct {
	APIKey  string `json:"api_key"`
	Message string `json:"message"`
}

// regenerateAPIKey: POST /agents/me/regenerate-api-key.
func (s *server) regenerateAPIKey(w http.ResponseWriter, r *http.Request) {
	key, err := s.svc.RegenerateAPIKey(r.Context(), agentFrom(r.Context()))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, regenerateBody{
		APIKey:  key,
		Message: agentpay.RegeneratedKeyMessage,
	})
}
