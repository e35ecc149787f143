package rest

import (
	"net/http"
	"time"

	"agentpay"
	"agentpay/ent"
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
	Transactions      int64  `json:"transactions"`
	VolumeSentUSD     Amount `json:"volume_sent_usd"`
	VolumeReceivedUSD Amount `json:"volume_received_usd"`
	FeesPaidUSD       Amount `json:"fees_paid_usd"`
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

type rateLimitsBody struct {
	RequestsPerMinute int `json:"requests_per_minute"`
	RequestsPerHour   int `json:"requests_per_hour"`
}

type sendLimitsBody struct {
	PerSendUSD        Amount    `json:"per_send_usd"`
	DailyUSD          Amount    `json:"daily_usd"`
	SentTodayUSD      Amount    `json:"sent_today_usd"`
	RemainingTodayUSD Amount    `json:"remaining_today_usd"`
	DayResetsAt       time.Time `json:"day_resets_at"`
}

type permissionsBody struct {
	Send          bool `json:"send"`
	Receive       bool `json:"receive"`
	CardPurchases bool `json:"card_purchases"`
}

type nextTierBody struct {
	Tier         string `json:"tier"`
	MinScore     int    `json:"min_score"`
	PointsNeeded int    `json:"points_needed"`
}

type trustActionBody struct {
	Action string `json:"action"`
	Points int    `json:"points"`
	Earned int    `json:"earned"`
	Done   bool   `json:"done"`
	How    string `json:"how"`
}

type tierBody struct {
	Tier              string `json:"tier"`
	MinScore          int    `json:"min_score"`
	RequestsPerMinute int    `json:"requests_per_minute"`
	RequestsPerHour   int    `json:"requests_per_hour"`
	PerSendUSD        Amount `json:"per_send_usd"`
	DailyUSD          Amount `json:"daily_usd"`
}

// limitsBody: GET /agents/me/limits.
type limitsBody struct {
	AgentID     string            `json:"agent_id"`
	Tier        string            `json:"tier"`
	TrustScore  int               `json:"trust_score"`
	RateLimits  rateLimitsBody    `json:"rate_limits"`
	SendLimits  sendLimitsBody    `json:"send_limits"`
	Permissions permissionsBody   `json:"permissions"`
	NextTier    *nextTierBody     `json:"next_tier"`
	RaiseTier   []trustActionBody `json:"raise_tier"`
	Tiers       []tierBody        `json:"tiers"`
}

// myLimits: GET /agents/me/limits.
func (s *server) myLimits(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	l, err := s.svc.Limits(r.Context(), a)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	body := limitsBody{
		AgentID:    a.ID.String(),
		Tier:       l.Tier,
		TrustScore: l.TrustScore,
		RateLimits: rateLimitsBody{RequestsPerMinute: l.Limits.PerMinute, RequestsPerHour: l.Limits.PerHour},
		SendLimits: sendLimitsBody{
			PerSendUSD:        Amount{l.Limits.PerSend},
			DailyUSD:          Amount{l.Limits.Daily},
			SentTodayUSD:      Amount{l.SentToday},
			RemainingTodayUSD: Amount{l.RemainingToday},
			DayResetsAt:       l.DayResetsAt.UTC(),
		},
		Permissions: permissionsBody{Send: l.CanSend, Receive: l.CanReceive, CardPurchases: l.CardPurchases},
		RaiseTier:   make([]trustActionBody, 0, len(l.Raise)),
		Tiers:       make([]tierBody, 0, len(agentpay.Tiers)),
	}
	if l.NextTier != "" {
		body.NextTier = &nextTierBody{Tier: l.NextTier, MinScore: l.NextTierScore, PointsNeeded: l.NextTierScore - l.TrustScore}
	}
	for _, act := range l.Raise {
		body.RaiseTier = append(body.RaiseTier, trustActionBody{
			Action: act.Action, Points: act.Points, Earned: act.Earned, Done: act.Done, How: act.How,
		})
	}
	for _, t := range agentpay.Tiers {
		tl := agentpay.LimitsFor(t)
		body.Tiers = append(body.Tiers, tierBody{
			Tier: t, MinScore: agentpay.TierFloor(t),
			RequestsPerMinute: tl.PerMinute, RequestsPerHour: tl.PerHour,
			PerSendUSD: Amount{tl.PerSend}, DailyUSD: Amount{tl.Daily},
		})
	}
	writeJSON(w, http.StatusOK, body)
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
