package rest

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/httpx"
)

// walletRef is a wallet as the registration object lists it (spec 2.1).
type walletRef struct {
	Address string `json:"address"`
	Chain   string `json:"chain"`
}

// registrationBody is the agent registration object of spec 2.1, answered by
// quick-register and register.
type registrationBody struct {
	AgentID       string            `json:"agent_id"`
	Username      string            `json:"username"`
	APIKey        string            `json:"api_key"`
	WalletAddress string            `json:"wallet_address"`
	WalletChain   string            `json:"wallet_chain"`
	Wallets       []walletRef       `json:"wallets"`
	InviteURL     string            `json:"invite_url"`
	InviteCode    string            `json:"invite_code"`
	Message       string            `json:"message"`
	Endpoints     map[string]string `json:"endpoints"`
}

func newRegistrationBody(reg *agentpay.Registration) registrationBody {
	primary := reg.PrimaryWallet()
	body := registrationBody{
		AgentID:       reg.Agent.ID.String(),
		Username:      reg.Agent.Username,
		APIKey:        reg.APIKey,
		WalletAddress: primary.Address,
		WalletChain:   primary.Chain,
		Wallets:       make([]walletRef, 0, len(reg.Wallets)),
		InviteURL:     reg.InviteURL,
		InviteCode:    reg.Agent.InviteCode,
		Message:       reg.Message,
		Endpoints:     reg.Endpoints,
	}
	for _, w := range reg.Wallets {
		body.Wallets = append(body.Wallets, walletRef{Address: w.Address, Chain: w.Chain})
	}
	return body
}

type quickRegisterRequest struct {
	Username string `json:"username"`
}

// quickRegister: POST /agents/quick-register.
func (s *server) quickRegister(w http.ResponseWriter, r *http.Request) {
	var req quickRegisterRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	reg, err := s.svc.QuickRegister(r.Context(), req.Username)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusCreated, newRegistrationBody(reg))
}

// agentStatsBody is an agent's activity: completed sends and volumes.
type agentStatsBody struct {
	Transactions      int64        `json:"transactions"`
	VolumeSentUSD     httpx.Amount `json:"volume_sent_usd"`
	VolumeReceivedUSD httpx.Amount `json:"volume_received_usd"`
}

// publicProfileBody is what anyone can read about an agent.
type publicProfileBody struct {
	AgentID       string         `json:"agent_id"`
	Username      string         `json:"username"`
	Tier          string         `json:"tier"`
	TrustScore    int            `json:"trust_score"`
	WalletAddress string         `json:"wallet_address"`
	WalletChain   string         `json:"wallet_chain"`
	Wallets       []walletRef    `json:"wallets"`
	Stats         agentStatsBody `json:"stats"`
	CreatedAt     time.Time      `json:"created_at"`
}

func newPublicProfileBody(p *agentpay.AgentProfile) publicProfileBody {
	a := p.Agent
	body := publicProfileBody{
		AgentID:    a.ID.String(),
		Username:   a.Username,
		Tier:       string(a.Tier),
		TrustScore: a.TrustScore,
		Wallets:    []walletRef{},
		Stats:      newAgentStatsBody(a),
		CreatedAt:  a.CreatedAt.UTC(),
	}
	if pw := p.Wallets.Primary; pw != nil {
		body.WalletAddress, body.WalletChain = pw.Address, pw.Chain
	}
	for _, w := range p.Wallets.Payable() {
		body.Wallets = append(body.Wallets, walletRef{Address: w.Address, Chain: w.Chain})
	}
	return body
}

func newAgentStatsBody(a *ent.Agent) agentStatsBody {
	return agentStatsBody{
		Transactions:      a.TxCount,
		VolumeSentUSD:     usd(a.VolumeSent),
		VolumeReceivedUSD: usd(a.VolumeReceived),
	}
}

// usd shows USDC base units as a USD amount.
func usd(units int64) httpx.Amount {
	return httpx.Amount{Decimal: agentpay.USDCAmount(units)}
}

// agentByID: GET /agents/{agent_id}.
func (s *server) agentByID(w http.ResponseWriter, r *http.Request) {
	p, err := s.svc.AgentByID(r.Context(), chi.URLParam(r, "agent_id"))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, newPublicProfileBody(p))
}

// agentByUsername: GET /agents/by-username/{username}.
func (s *server) agentByUsername(w http.ResponseWriter, r *http.Request) {
	p, err := s.svc.AgentByUsername(r.Context(), chi.URLParam(r, "username"))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, newPublicProfileBody(p))
}

// usernameAvailabilityBody is spec 2.4.
type usernameAvailabilityBody struct {
	Username  string `json:"username"`
	Available bool   `json:"available"`
}

// checkUsername: GET /agents/check-username/{username}.
func (s *server) checkUsername(w http.ResponseWriter, r *http.Request) {
	username := chi.URLParam(r, "username")
	free, err := s.svc.CheckUsername(r.Context(), username)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, usernameAvailabilityBody{Username: username, Available: free})
}

type leaderboardEntry struct {
	Rank         int          `json:"rank"`
	AgentID      string       `json:"agent_id"`
	Username     string       `json:"username"`
	Tier         string       `json:"tier"`
	TrustScore   int          `json:"trust_score"`
	VolumeUSD    httpx.Amount `json:"volume_usd"`
	Transactions int64        `json:"transactions"`
}

type leaderboardBody struct {
	SortBy string             `json:"sort_by"`
	Limit  int                `json:"limit"`
	Agents []leaderboardEntry `json:"agents"`
}

// leaderboard: GET /agents/leaderboard?sort_by=&limit=.
func (s *server) leaderboard(w http.ResponseWriter, r *http.Request) {
	limit, err := queryInt(r, "limit")
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	lb, err := s.svc.Leaderboard(r.Context(), r.URL.Query().Get("sort_by"), limit)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	body := leaderboardBody{SortBy: lb.SortBy, Limit: lb.Limit, Agents: make([]leaderboardEntry, 0, len(lb.Agents))}
	for i, a := range lb.Agents {
		body.Agents = append(body.Agents, leaderboardEntry{
			Rank:         i + 1,
			AgentID:      a.ID.String(),
			Username:     a.Username,
			Tier:         string(a.Tier),
			TrustScore:   a.TrustScore,
			VolumeUSD:    usd(a.VolumeSent),
			Transactions: a.TxCount,
		})
	}
	writeJSON(w, http.StatusOK, body)
}

type statsBody struct {
	TotalAgents       int64            `json:"total_agents"`
	ActiveAgents      int64            `json:"active_agents"`
	AgentsByTier      map[string]int64 `json:"agents_by_tier"`
	TotalTransactions int64            `json:"total_transactions"`
	TotalVolumeUSD    httpx.Amount     `json:"total_volume_usd"`
	TotalFeesUSD      httpx.Amount     `json:"total_fees_usd"`
	FeeRate           httpx.Amount     `json:"fee_rate"`
}

// stats: GET /agents/stats.
func (s *server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.svc.Stats(r.Context())
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, statsBody{
		TotalAgents:       st.Agents,
		ActiveAgents:      st.ActiveAgents,
		AgentsByTier:      st.AgentsByTier,
		TotalTransactions: st.Transfers,
		TotalVolumeUSD:    httpx.Amount{Decimal: st.Volume},
		TotalFeesUSD:      httpx.Amount{Decimal: st.Fees},
		FeeRate:           httpx.Amount{Decimal: st.FeeRate},
	})
}

type treasuryWalletBody struct {
	Chain   string `json:"chain"`
	Address string `json:"address"`
	Token   string `json:"token"`
	// Balance is null when Status is "unavailable".
	Balance *httpx.Amount `json:"balance"`
	Status  string        `json:"status"`
	// Gas is what the treasury paid for this chain's transactions, in its
	// native token, next to the send fees it collected there.
	Gas treasuryGasBody `json:"gas"`
}

type treasuryGasBody struct {
	Token            string                  `json:"token"`
	Transactions     int64                   `json:"transactions"`
	Fees             httpx.Amount            `json:"fees"`
	Rent             httpx.Amount            `json:"rent"`
	Total            httpx.Amount            `json:"total"`
	ByPurpose        map[string]httpx.Amount `json:"by_purpose"`
	FeesCollectedUSD httpx.Amount            `json:"fees_collected_usd"`
}

type treasuryBody struct {
	FeeRate               httpx.Amount         `json:"fee_rate"`
	FeePercent            httpx.Amount         `json:"fee_percent"`
	TotalFeesCollectedUSD httpx.Amount         `json:"total_fees_collected_usd"`
	FeeTransfers          int64                `json:"fee_transfers"`
	Wallets               []treasuryWalletBody `json:"wallets"`
	Message               string               `json:"message"`
}

// treasury: GET /agents/treasury.
func (s *server) treasury(w http.ResponseWriter, r *http.Request) {
	t, err := s.svc.Treasury(r.Context())
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	body := treasuryBody{
		FeeRate:               httpx.Amount{Decimal: t.FeeRate},
		FeePercent:            httpx.Amount{Decimal: t.FeeRate.Shift(2)},
		TotalFeesCollectedUSD: httpx.Amount{Decimal: t.FeesCollected},
		FeeTransfers:          t.FeeTransfers,
		Wallets:               make([]treasuryWalletBody, 0, len(t.Wallets)),
		Message:               t.Message,
	}
	for _, tw := range t.Wallets {
		wb := treasuryWalletBody{Chain: string(tw.Chain), Address: tw.Address, Token: tw.Token, Status: tw.Status,
			Gas: treasuryGasBody{
				Token:            tw.Gas.Native,
				Transactions:     tw.Gas.Transactions,
				Fees:             httpx.Amount{Decimal: tw.Gas.Fees},
				Rent:             httpx.Amount{Decimal: tw.Gas.Rent},
				Total:            httpx.Amount{Decimal: tw.Gas.Fees.Add(tw.Gas.Rent)},
				ByPurpose:        make(map[string]httpx.Amount, len(tw.Gas.ByPurpose)),
				FeesCollectedUSD: httpx.Amount{Decimal: tw.Gas.SendFees},
			}}
		for purpose, v := range tw.Gas.ByPurpose {
			wb.Gas.ByPurpose[purpose] = httpx.Amount{Decimal: v}
		}
		if tw.Status == agentpay.TreasuryBalanceOK {
			wb.Balance = &httpx.Amount{Decimal: tw.Balance}
		}
		body.Wallets = append(body.Wallets, wb)
	}
	writeJSON(w, http.StatusOK, body)
}
