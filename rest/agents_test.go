package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/evm"
	"agentpay/chains/solana"
	"agentpay/ent/gasspend"
	"agentpay/ent/transfer"
	"agentpay/internal/testenv"
)

// registered is an agent created through the API.
type registered struct {
	ID, Username, APIKey, InviteCode string
	Solana, Base                     string
	Body                             []byte
}

// register creates an agent through POST /agents/quick-register.
func (a *testAPI) register(username string) registered {
	a.t.Helper()
	resp := a.do(http.MethodPost, "/agents/quick-register", map[string]any{"username": username}, nil)
	require.Equal(a.t, http.StatusCreated, resp.Status, string(resp.Body))
	var body registrationBody
	resp.JSON(a.t, &body)
	require.Len(a.t, body.Wallets, 2)
	return registered{
		ID: body.AgentID, Username: body.Username, APIKey: body.APIKey, InviteCode: body.InviteCode,
		Solana: body.Wallets[0].Address, Base: body.Wallets[1].Address, Body: resp.Body,
	}
}

// goldenExtra normalises what the golden regexes cannot see: the invite
// code and a Solana address inside the message text.
func (r registered) goldenExtra() map[string]string {
	return map[string]string{r.InviteCode: "<invite_code>", r.Solana: "<solana-address>"}
}

func TestQuickRegisterShape(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	reg := api.register("golden_agent")
	assertGolden(t, "agents_quick_register", reg.Body, reg.goldenExtra())

	m := map[string]any{}
	require.NoError(t, json.Unmarshal(reg.Body, &m))
	require.Equal(t, "solana", m["wallet_chain"])
	require.Equal(t, reg.Solana, m["wallet_address"])
	require.Equal(t, "http://app.test/invite/"+reg.InviteCode, m["invite_url"])
	require.NoError(t, solana.ValidateAddress(reg.Solana))
	require.NoError(t, evm.ValidateAddress(reg.Base))
}

func TestQuickRegisterUsernameRules(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	api.register("taken")
	const charset = "username: may contain only lowercase letters a-z, digits 0-9 and underscore"
	tests := []struct {
		name   string
		body   any
		status int
		detail string
	}{
		{"3 characters", map[string]any{"username": "abc"}, http.StatusCreated, ""},
		{"30 characters", map[string]any{"username": strings.Repeat("z", 30)}, http.StatusCreated, ""},
		{"digits and underscore", map[string]any{"username": "agent_007"}, http.StatusCreated, ""},
		{"2 characters", map[string]any{"username": "ab"}, http.StatusBadRequest, "username: must be at least 3 characters long"},
		{"31 characters", map[string]any{"username": strings.Repeat("z", 31)}, http.StatusBadRequest, "username: must be at most 30 characters long"},
		{"uppercase", map[string]any{"username": "Alice"}, http.StatusBadRequest, charset},
		{"hyphen", map[string]any{"username": "al-ice"}, http.StatusBadRequest, charset},
		{"space", map[string]any{"username": "al ice"}, http.StatusBadRequest, charset},
		{"non-ASCII letter", map[string]any{"username": "émile"}, http.StatusBadRequest, charset},
		{"leading underscore", map[string]any{"username": "_alice"}, http.StatusBadRequest, "username: must not start with an underscore"},
		{"trailing underscore", map[string]any{"username": "alice_"}, http.StatusBadRequest, "username: must not end with an underscore"},
		{"empty", map[string]any{"username": ""}, http.StatusBadRequest, "username: is required"},
		{"missing", map[string]any{}, http.StatusBadRequest, "username: is required"},
		{"not a string", map[string]any{"username": 12345}, http.StatusBadRequest, "username: must be a string"},
		{"unknown field", map[string]any{"username": "fine_name", "email": "x@y.z"}, http.StatusBadRequest, `json: unknown field "email"`},
		{"malformed JSON", `{"username":`, http.StatusBadRequest, "malformed JSON: unexpected end of body"},
		{"taken", map[string]any{"username": "taken"}, http.StatusConflict, `conflict: username "taken" is already taken`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, "/agents/quick-register", tt.body, nil)
			require.Equal(t, tt.status, resp.Status, string(resp.Body))
			if tt.detail != "" {
				require.Equal(t, map[string]any{"detail": tt.detail}, resp.Map(t))
			}
		})
	}
	// Refusals wrote nothing: taken + the 3 accepted.
	require.Equal(t, 4, api.DB.Ent.Agent.Query().CountX(context.Background()))
}

func TestCheckUsername(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	api.register("someone")

	resp := api.do(http.MethodGet, "/agents/check-username/someone", nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	assertGolden(t, "agents_check_username_taken", resp.Body, nil)

	resp = api.do(http.MethodGet, "/agents/check-username/someone_else", nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, map[string]any{"username": "someone_else", "available": true}, resp.Map(t))

	resp = api.do(http.MethodGet, "/agents/check-username/_bad", nil, nil)
	require.Equal(t, http.StatusBadRequest, resp.Status)
	require.Equal(t, "username: must not start with an underscore", resp.Map(t)["detail"])
}

func TestPublicProfile(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	reg := api.register("public_agent")

	byID := api.do(http.MethodGet, "/agents/"+reg.ID, nil, nil)
	require.Equal(t, http.StatusOK, byID.Status, string(byID.Body))
	assertGolden(t, "agents_public_profile", byID.Body, reg.goldenExtra())
	require.NotContains(t, string(byID.Body), "invite", "the invite code is the agent's own")
	require.NotContains(t, string(byID.Body), "ak_")

	byName := api.do(http.MethodGet, "/agents/by-username/public_agent", nil, nil)
	require.Equal(t, http.StatusOK, byName.Status)
	require.JSONEq(t, string(byID.Body), string(byName.Body))

	for _, path := range []string{
		"/agents/00000000-0000-4000-8000-000000000000",
		"/agents/not-a-uuid",
		"/agents/by-username/nobody",
	} {
		resp := api.do(http.MethodGet, path, nil, nil)
		require.Equal(t, http.StatusNotFound, resp.Status, path)
		require.Equal(t, "not found: no such agent", resp.Map(t)["detail"], path)
	}
}

// setActivity sets an agent's counters as completed sends would.
func setActivity(t *testing.T, api *testAPI, id string, volumeUSD, txs int64) {
	t.Helper()
	a, err := api.Svc.AgentByID(context.Background(), id)
	require.NoError(t, err)
	require.NoError(t, api.DB.Ent.Agent.UpdateOneID(a.Agent.ID).
		SetVolumeSent(volumeUSD*1_000_000).SetVolumeReceived(volumeUSD*500_000).SetTxCount(txs).
		Exec(context.Background()))
}

func TestLeaderboard(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	for _, a := range []struct {
		name        string
		volume, txs int64
	}{
		{"whale", 5000, 3},
		{"busy", 20, 40},
		{"newbie", 0, 0},
	} {
		reg := api.register(a.name)
		setActivity(t, api, reg.ID, a.volume, a.txs)
	}
	// volume (default), then sort and limit rules.
	resp := api.do(http.MethodGet, "/agents/leaderboard", nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	assertGolden(t, "agents_leaderboard", resp.Body, nil)

	order := func(query string) []string {
		t.Helper()
		resp := api.do(http.MethodGet, "/agents/leaderboard"+query, nil, nil)
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		var body leaderboardBody
		resp.JSON(t, &body)
		var names []string
		for _, e := range body.Agents {
			names = append(names, e.Username)
		}
		return names
	}
	require.Equal(t, []string{"whale", "busy", "newbie"}, order("?sort_by=volume"))
	require.Equal(t, []string{"busy", "whale", "newbie"}, order("?sort_by=transactions"))
	require.Equal(t, []string{"busy"}, order("?sort_by=transactions&limit=1"))
	require.Len(t, order("?sort_by=trust_score&limit=100"), 3)

	for _, tt := range []struct{ query, detail string }{
		{"?sort_by=name", "sort_by: must be one of volume, transactions, trust_score"},
		{"?sort_by=Volume", "sort_by: must be one of volume, transactions, trust_score"},
		{"?limit=101", "limit: must be between 1 and 100"},
		{"?limit=-5", "limit: must be between 1 and 100"},
		{"?limit=ten", "limit: must be an integer"},
		{"?limit=2.5", "limit: must be an integer"},
	} {
		resp := api.do(http.MethodGet, "/agents/leaderboard"+tt.query, nil, nil)
		require.Equal(t, http.StatusBadRequest, resp.Status, tt.query)
		require.Equal(t, tt.detail, resp.Map(t)["detail"], tt.query)
	}
}

// addTransfer records a transfer between two agents as the send path would.
func addTransfer(t *testing.T, api *testAPI, from, to registered, amount, fee int64, status transfer.Status) {
	t.Helper()
	ctx := context.Background()
	fa, err := api.Svc.AgentByID(ctx, from.ID)
	require.NoError(t, err)
	ta, err := api.Svc.AgentByID(ctx, to.ID)
	require.NoError(t, err)
	ref := make([]byte, 32)
	copy(ref, fmt.Sprintf("%d-%d-%s", amount, time.Now().UnixNano(), status))
	require.NoError(t, api.DB.Ent.Transfer.Create().SetKind(transfer.KindSend).
		SetFromAgentID(fa.Agent.ID).SetToAgentID(ta.Agent.ID).SetChain("base").
		SetFromAddress(from.Base).SetToAddress(to.Base).
		SetAmount(amount).SetFee(fee).SetNet(amount-fee).SetStatus(status).SetRef(ref).
		Exec(ctx))
}

func TestStatsAndTreasury(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	a := api.register("sender")
	b := api.register("receiver")
	setActivity(t, api, a.ID, 55, 2)
	addTransfer(t, api, a, b, 50_000_000, 50_000, transfer.StatusCompleted)
	addTransfer(t, api, a, b, 5_123_457, 5_123, transfer.StatusCompleted)
	addTransfer(t, api, a, b, 9_000_000, 9_000, transfer.StatusFailed)

	resp := api.do(http.MethodGet, "/agents/stats", nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	assertGolden(t, "agents_stats", resp.Body, nil)
	require.Contains(t, string(resp.Body), `"total_fees_usd":0.055123`, "amounts are exact JSON numbers")

	// What the gas tally recorded (gas.go), in the agents' mode: a base
	// send's two legs, and a solana send that opened a token account.
	ctx := context.Background()
	for _, g := range []struct {
		chain, hash, purpose string
		fee, rent            int64
		decimals             int32
	}{
		{"base", "0x01", agentpay.GasPurposeSend, 1_234_567_890_123, 0, 18},
		{"base", "0x02", agentpay.GasPurposeSendFee, 1_000_000_000_000, 0, 18},
		{"solana", "sig1", agentpay.GasPurposeSend, 5_000, 2_039_280, 9},
		{"base", "0x03", agentpay.GasPurposeSweep, 7, 0, 18}, // test mode: not the agents'
	} {
		mode := gasspend.ModeLive
		if g.purpose == agentpay.GasPurposeSweep {
			mode = gasspend.ModeTest
		}
		api.DB.Ent.GasSpend.Create().SetChain(g.chain).SetMode(mode).SetTxHash(g.hash).SetPurpose(g.purpose).
			SetFee(g.fee).SetRent(g.rent).SetDecimals(g.decimals).ExecX(ctx)
	}

	// No chain configured: the balances say unavailable, the rest answers.
	resp = api.do(http.MethodGet, "/agents/treasury", nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	assertGolden(t, "agents_treasury", resp.Body, nil)
	m := resp.Map(t)
	require.Equal(t, 0.001, m["fee_rate"])
	require.Equal(t, 0.055123, m["total_fees_collected_usd"])
	for _, w := range m["wallets"].([]any) {
		require.Equal(t, "unavailable", w.(map[string]any)["status"])
		require.Nil(t, w.(map[string]any)["balance"])
	}
	require.Contains(t, string(resp.Body), `"gas":{"token":"ETH","transactions":2,"fees":0.000002234567890123,"rent":0,"total":0.000002234567890123,"by_purpose":{"send":0.000001234567890123,"send_fee":0.000001},"fees_collected_usd":0.055123}`)
	require.Contains(t, string(resp.Body), `"gas":{"token":"SOL","transactions":1,"fees":0.000005,"rent":0.00203928,"total":0.00204428,"by_purpose":{"send":0.00204428},"fees_collected_usd":0}`)
}

// TestTreasuryBalancesFromChains reads the treasury's USDC on a Base and a
// Solana devnet.
func TestTreasuryBalancesFromChains(t *testing.T) {
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base, chains.Solana}})
	tk := env.Treasury
	env.Fund(t, chains.Base, tk.EVMAddress, 12_345_678)
	env.Fund(t, chains.Solana, tk.SolanaAddress, 7_000_001)

	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest}})
	resp := api.do(http.MethodGet, "/agents/treasury", nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "agents_treasury_balances", resp.Body, nil)
	require.Contains(t, string(resp.Body), `"balance":7.000001`)
	require.Contains(t, string(resp.Body), `"balance":12.345678`)
	require.Contains(t, string(resp.Body), tk.EVMAddress)
	require.Contains(t, string(resp.Body), tk.SolanaAddress)
}
