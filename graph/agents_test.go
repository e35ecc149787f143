package graph

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/ent"
	"agentpay/ent/gasspend"
	"agentpay/ent/transfer"
	"agentpay/internal/clock"
	"agentpay/internal/httpx"
	"agentpay/internal/store"
	"agentpay/internal/testenv"
	"agentpay/internal/vault"
)

// agentAPI is a GraphQL server over a real database, with no chains: the
// agent operations tested here (registration, profile, keys, transfers
// already recorded, limits) touch none.
type agentAPI struct {
	URL string
	DB  *store.DB
	Svc *agentpay.Service
	// Base is the Base devnet agents' wallets use, when asked for.
	Base *devnet.EVM
}

type agentAPIConfig struct {
	IPRateLimit, RegisterRateLimit int
	// Base starts a Base devnet for the agents' wallets, with the treasury
	// funded with gas.
	Base bool
	// DevPartner is the identity partner of `agentpay dev`, for
	// verifyPartner.
	DevPartner agentpay.DevPartner
	// Clock, when set, is the service's clock (Config.Clock).
	Clock clock.Clock
	// InternalSettlement is Config.InternalSettlement.
	InternalSettlement bool
}

func newAgentAPI(t *testing.T, cfg agentAPIConfig) *agentAPI {
	t.Helper()
	opts := testenv.Options{BlockTime: 50 * time.Millisecond}
	if cfg.Base {
		opts.Chains = []chains.Name{chains.Base}
	}
	env := testenv.New(t, opts)
	srv := newTestServer(t, env, agentpay.Config{
		AgentMode: agentpay.ModeTest, IPRateLimit: cfg.IPRateLimit, RegisterRateLimit: cfg.RegisterRateLimit,
		InternalSettlement: cfg.InternalSettlement,
		DevPartner:         cfg.DevPartner, Clock: cfg.Clock,
	}, HandlerConfig{})
	api := &agentAPI{URL: srv.URL, DB: env.DB, Svc: srv.Svc}
	if cfg.Base {
		api.Base = env.EVM(chains.Base)
	}
	return api
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

type gqlResult struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
	Header http.Header     `json:"-"`
}

// decode unmarshals data into v after checking there were no errors.
func (r gqlResult) decode(t *testing.T, v any) {
	t.Helper()
	require.Empty(t, r.Errors)
	require.NoError(t, json.Unmarshal(r.Data, v))
}

// code is the extensions.code of the only error.
func (r gqlResult) code(t *testing.T) string {
	t.Helper()
	require.Len(t, r.Errors, 1, "data: %s", r.Data)
	code, _ := r.Errors[0].Extensions["code"].(string)
	return code
}

// do posts a GraphQL operation, with X-Agent-Key when key is set.
func (a *agentAPI) do(t *testing.T, key, q string, vars map[string]any) gqlResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": q, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, a.URL, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(httpx.AgentKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out gqlResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	out.Header = resp.Header
	return out
}

type registration struct {
	AgentID       string
	Username      string
	APIKey        string
	WalletAddress string
	WalletChain   string
	Wallets       []struct{ Address, Chain string }
	InviteURL     string
	InviteCode    string
	Message       string
	Endpoints     []struct{ Name, Value string }
}

const quickRegisterMutation = `mutation($u: String!) { quickRegister(username: $u) {
	agentId username apiKey walletAddress walletChain wallets { address chain }
	inviteUrl inviteCode message endpoints { name value } } }`

func (a *agentAPI) register(t *testing.T, username string) registration {
	t.Helper()
	var data struct{ QuickRegister registration }
	a.do(t, "", quickRegisterMutation, map[string]any{"u": username}).decode(t, &data)
	return data.QuickRegister
}

func uniqueName(t *testing.T, prefix string) string {
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return fmt.Sprintf("%s_%x", prefix, b)
}

const meQuery = `{ me { id username tier trustScore inviteCode inviteUrl
	trust { score partner externalWallet human age volume }
	stats { txCount volumeSentUsd volumeReceivedUsd feesPaidUsd }
	primaryWallet { id chain address kind verified primary }
	wallets { id chain address kind verified primary }
	node { id username }
	limits { tier requestsPerMinute requestsPerHour perSendUsd dailyUsd sentTodayUsd remainingTodayUsd nextTier nextTierScore
		raise { action points earned done how } canSend canReceive cardPurchases } } }`

type meData struct {
	Me struct {
		ID, Username, Tier, InviteCode, InviteURL string
		TrustScore                                int
		Trust                                     struct{ Score, Partner, ExternalWallet, Human, Age, Volume int }
		Stats                                     struct {
			TxCount                                       int
			VolumeSentUsd, VolumeReceivedUsd, FeesPaidUsd json.Number
		}
		PrimaryWallet walletData
		Wallets       []walletData
		Node          struct{ ID, Username string }
		Limits        struct {
			Tier                               string
			RequestsPerMinute, RequestsPerHour int
			PerSendUsd, DailyUsd               json.Number
			SentTodayUsd, RemainingTodayUsd    json.Number
			NextTier                           *string
			NextTierScore                      *int
			Raise                              []struct{ Action string }
			CanSend, CanReceive, CardPurchases bool
		}
	}
}

type walletData struct {
	ID, Chain, Address, Kind string
	Verified, Primary        bool
}

func TestQuickRegisterThenMe(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{})
	name := uniqueName(t, "gql")
	reg := api.register(t, name)
	require.Equal(t, name, reg.Username)
	require.True(t, strings.HasPrefix(reg.APIKey, vault.PrefixAgentKey), reg.APIKey)
	require.Equal(t, "solana", reg.WalletChain)
	require.Len(t, reg.Wallets, 2)
	require.Equal(t, "solana", reg.Wallets[0].Chain)
	require.Equal(t, reg.WalletAddress, reg.Wallets[0].Address)
	require.Equal(t, "base", reg.Wallets[1].Chain)
	require.Equal(t, "http://app.test/invite/"+reg.InviteCode, reg.InviteURL)
	require.NotEmpty(t, reg.Message)
	names := []string{}
	for _, e := range reg.Endpoints {
		names = append(names, e.Name)
	}
	require.Equal(t, []string{"balance", "docs", "invite_human", "pair_with_human", "profile", "send", "send_to_user"}, names)

	var me meData
	api.do(t, reg.APIKey, meQuery, nil).decode(t, &me)
	require.Equal(t, reg.AgentID, me.Me.ID)
	require.Equal(t, name, me.Me.Username)
	require.Equal(t, "T0", me.Me.Tier)
	require.Zero(t, me.Me.TrustScore)
	require.Equal(t, reg.InviteURL, me.Me.InviteURL)
	require.Equal(t, "0", me.Me.Stats.VolumeSentUsd.String())
	require.Equal(t, reg.AgentID, me.Me.Node.ID)
	require.Len(t, me.Me.Wallets, 2)
	require.Equal(t, reg.WalletAddress, me.Me.PrimaryWallet.Address)
	require.True(t, me.Me.PrimaryWallet.Primary)
	require.True(t, me.Me.Wallets[0].Primary)
	require.False(t, me.Me.Wallets[1].Primary)
	require.Equal(t, "CUSTODIAL", me.Me.Wallets[1].Kind)
	require.Equal(t, 10, me.Me.Limits.RequestsPerMinute)
	require.Equal(t, 100, me.Me.Limits.RequestsPerHour)
	require.Equal(t, "100", me.Me.Limits.PerSendUsd.String())
	require.Equal(t, "500", me.Me.Limits.DailyUsd.String())
	require.Equal(t, "T1", *me.Me.Limits.NextTier)
	require.Equal(t, 20, *me.Me.Limits.NextTierScore)
	require.NotEmpty(t, me.Me.Limits.Raise)

	// The public profile shows the agent to anyone.
	var pub struct {
		Agent, AgentByUsername struct{ ID, Username, Tier string }
	}
	api.do(t, "", `query($id: ID!, $u: String!) { agent(id: $id) { id username tier } agentByUsername(username: $u) { id username tier } }`,
		map[string]any{"id": reg.AgentID, "u": name}).decode(t, &pub)
	require.Equal(t, name, pub.Agent.Username)
	require.Equal(t, reg.AgentID, pub.AgentByUsername.ID)

	var avail struct{ CheckUsername struct{ Available bool } }
	api.do(t, "", `query($u: String!) { checkUsername(username: $u) { available } }`, map[string]any{"u": name}).decode(t, &avail)
	require.False(t, avail.CheckUsername.Available)
}

func TestPublicQueries(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{})
	a := api.register(t, uniqueName(t, "lb_a"))
	var data struct {
		Leaderboard []struct{ Username string }
		Stats       struct {
			Agents       int
			AgentsByTier []struct {
				Tier  string
				Count int
			}
			FeeRate json.Number
		}
		Treasury struct {
			FeeRate json.Number
			Wallets []struct {
				Chain, Status string
				Gas           struct {
					Token        string
					Transactions int
					Fees, Rent   json.Number
					Total        json.Number
					ByPurpose    []struct {
						Purpose string
						Total   json.Number
					}
				}
			}
		}
	}
	// What the gas tally recorded (agentpay's gas.go) on solana, in the
	// agents' mode.
	ctx := context.Background()
	api.DB.Ent.GasSpend.Create().SetChain("solana").SetMode(gasspend.ModeTest).SetTxHash("sig1").
		SetPurpose(agentpay.GasPurposeSend).SetFee(5_000).SetRent(2_039_280).SetDecimals(9).ExecX(ctx)
	api.DB.Ent.GasSpend.Create().SetChain("solana").SetMode(gasspend.ModeTest).SetTxHash("sig2").
		SetPurpose(agentpay.GasPurposeSendFee).SetFee(5_000).SetDecimals(9).ExecX(ctx)
	api.do(t, "", `{ leaderboard(sortBy: TRUST_SCORE, limit: 5) { username }
		stats { agents agentsByTier { tier count } feeRate }
		treasury { feeRate wallets { chain status gas { token transactions fees rent total byPurpose { purpose total } } } } }`, nil).decode(t, &data)
	require.Len(t, data.Leaderboard, 1)
	require.Equal(t, a.Username, data.Leaderboard[0].Username)
	require.Equal(t, 1, data.Stats.Agents)
	require.Len(t, data.Stats.AgentsByTier, 5)
	require.Equal(t, "0.001", data.Stats.FeeRate.String())
	require.Equal(t, "0.001", data.Treasury.FeeRate.String())
	require.Len(t, data.Treasury.Wallets, 2)
	sol := data.Treasury.Wallets[0]
	require.Equal(t, "solana", sol.Chain)
	require.Contains(t, []string{"OK", "UNAVAILABLE"}, sol.Status, "an enum value")
	require.Equal(t, "SOL", sol.Gas.Token)
	require.Equal(t, 2, sol.Gas.Transactions)
	require.Equal(t, "0.00001", sol.Gas.Fees.String())
	require.Equal(t, "0.00203928", sol.Gas.Rent.String())
	require.Equal(t, "0.00204928", sol.Gas.Total.String())
	require.Len(t, sol.Gas.ByPurpose, 2)
	require.Equal(t, "send", sol.Gas.ByPurpose[0].Purpose)
	require.Equal(t, "0.00204428", sol.Gas.ByPurpose[0].Total.String())
	require.Equal(t, "ETH", data.Treasury.Wallets[1].Gas.Token)
	require.Zero(t, data.Treasury.Wallets[1].Gas.Transactions)

	out := api.do(t, "", `{ leaderboard(limit: 101) { username } }`, nil)
	require.Equal(t, "BAD_USER_INPUT", out.code(t))
	// An explicit 0 is the default, as on REST: the service decides both.
	api.do(t, "", `{ leaderboard(limit: 0) { username } }`, nil).decode(t, &data)
	require.Len(t, data.Leaderboard, 1)
	out = api.do(t, "", `{ agent(id: "7f0c1a52-3b7e-4bd1-9b35-3f1e6a5f2a10") { username } }`, nil)
	require.Equal(t, "NOT_FOUND", out.code(t))
	out = api.do(t, "", `{ agentByUsername(username: "nobody_here") { username } }`, nil)
	require.Equal(t, "NOT_FOUND", out.code(t))
}

func TestAgentErrorsCarryCodes(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{})
	name := uniqueName(t, "err")
	reg := api.register(t, name)

	for _, bad := range []string{"ab", "Upper", "_lead", "trail_", "has-dash", strings.Repeat("a", 31)} {
		out := api.do(t, "", quickRegisterMutation, map[string]any{"u": bad})
		require.Equal(t, "BAD_USER_INPUT", out.code(t), bad)
		require.Contains(t, out.Errors[0].Message, "username")
	}
	out := api.do(t, "", quickRegisterMutation, map[string]any{"u": name})
	require.Equal(t, "CONFLICT", out.code(t))

	last := byte('0')
	if reg.APIKey[len(reg.APIKey)-1] == '0' {
		last = '1'
	}
	wrong := reg.APIKey[:len(reg.APIKey)-1] + string(last)
	for _, key := range []string{"", "nope", "ak_" + strings.Repeat("x", 43), wrong} {
		out := api.do(t, key, `{ me { id } }`, nil)
		require.Equal(t, "UNAUTHENTICATED", out.code(t), "key %q", key)
		require.Equal(t, []any{"me"}, out.Errors[0].Path)
		require.Equal(t, "null", string(out.Data))
	}
	out = api.do(t, "", `mutation { regenerateApiKey { apiKey } }`, nil)
	require.Equal(t, "UNAUTHENTICATED", out.code(t))
	out = api.do(t, "", `mutation { send(input: {toUsername: "x", amountUsd: 1}) { status } }`, nil)
	require.Equal(t, "UNAUTHENTICATED", out.code(t))
}

func TestRegenerateAPIKey(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{})
	reg := api.register(t, uniqueName(t, "rot"))

	var data struct {
		RegenerateAPIKey struct{ APIKey, Message string }
	}
	api.do(t, reg.APIKey, `mutation { regenerateApiKey { apiKey message } }`, nil).decode(t, &data)
	newKey := data.RegenerateAPIKey.APIKey
	require.NotEqual(t, reg.APIKey, newKey)
	require.True(t, strings.HasPrefix(newKey, vault.PrefixAgentKey))
	require.NotEmpty(t, data.RegenerateAPIKey.Message)

	out := api.do(t, reg.APIKey, `{ me { id } }`, nil)
	require.Equal(t, "UNAUTHENTICATED", out.code(t), "the old key is refused at once")
	out = api.do(t, reg.APIKey, `mutation { regenerateApiKey { apiKey } }`, nil)
	require.Equal(t, "UNAUTHENTICATED", out.code(t))

	var me struct{ Me struct{ ID string } }
	api.do(t, newKey, `{ me { id } }`, nil).decode(t, &me)
	require.Equal(t, reg.AgentID, me.Me.ID)
}

// wsClient speaks graphql-transport-ws.
type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
}

type wsMessage struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func dialWS(t *testing.T, url string, header http.Header) *wsClient {
	t.Helper()
	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	conn, _, err := dialer.Dial("ws"+strings.TrimPrefix(url, "http"), header)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &wsClient{t: t, conn: conn}
}

func (c *wsClient) send(msg map[string]any) {
	c.t.Helper()
	require.NoError(c.t, c.conn.WriteJSON(msg))
}

// read returns the next message other than a ping or pong.
func (c *wsClient) read() (wsMessage, error) {
	for {
		require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		var m wsMessage
		if err := c.conn.ReadJSON(&m); err != nil {
			return m, err
		}
		if m.Type != "ping" && m.Type != "pong" {
			return m, nil
		}
	}
}

func (c *wsClient) init(payload map[string]any) {
	c.t.Helper()
	c.send(map[string]any{"type": "connection_init", "payload": payload})
	m, err := c.read()
	require.NoError(c.t, err)
	require.Equal(c.t, "connection_ack", m.Type, string(m.Payload))
}

// operation runs one operation on the connection and returns its first
// result.
func (c *wsClient) operation(id, q string) gqlResult {
	c.t.Helper()
	c.send(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": q}})
	m, err := c.read()
	require.NoError(c.t, err)
	require.Equal(c.t, id, m.ID)
	require.Equal(c.t, "next", m.Type, string(m.Payload))
	var out gqlResult
	require.NoError(c.t, json.Unmarshal(m.Payload, &out))
	done, err := c.read()
	require.NoError(c.t, err)
	require.Equal(c.t, wsMessage{Type: "complete", ID: id}, done)
	return out
}

func TestWebsocketInitPayloadAuthenticates(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{})
	reg := api.register(t, uniqueName(t, "ws"))

	payloads := map[string]map[string]any{
		"top level":   {"X-Agent-Key": reg.APIKey},
		"headers":     {"headers": map[string]any{"X-Agent-Key": reg.APIKey}},
		"header case": {"headers": map[string]any{"x-agent-key": reg.APIKey}},
	}
	for name, payload := range payloads {
		t.Run(name, func(t *testing.T) {
			c := dialWS(t, api.URL, nil)
			c.init(payload)
			var me struct{ Me struct{ ID, Username string } }
			c.operation("1", `{ me { id username } }`).decode(t, &me)
			require.Equal(t, reg.AgentID, me.Me.ID)
		})
	}

	t.Run("upgrade request header", func(t *testing.T) {
		c := dialWS(t, api.URL, http.Header{httpx.AgentKeyHeader: {reg.APIKey}})
		c.init(map[string]any{})
		var me struct{ Me struct{ ID string } }
		c.operation("1", `{ me { id } }`).decode(t, &me)
		require.Equal(t, reg.AgentID, me.Me.ID)
	})

	t.Run("no key", func(t *testing.T) {
		c := dialWS(t, api.URL, nil)
		c.init(map[string]any{})
		require.Equal(t, "UNAUTHENTICATED", c.operation("1", `{ me { id } }`).code(t))
	})

	t.Run("bad key closes the connection", func(t *testing.T) {
		c := dialWS(t, api.URL, nil)
		c.send(map[string]any{"type": "connection_init", "payload": map[string]any{"X-Agent-Key": "ak_wrong"}})
		var closeErr *websocket.CloseError
		for {
			_, err := c.read()
			if err != nil {
				require.ErrorAs(t, err, &closeErr)
				break
			}
		}
		require.Equal(t, 4403, closeErr.Code)
	})

	t.Run("a key regenerated while connected stops working", func(t *testing.T) {
		other := api.register(t, uniqueName(t, "ws2"))
		c := dialWS(t, api.URL, nil)
		c.init(map[string]any{"X-Agent-Key": other.APIKey})
		var me struct{ Me struct{ ID string } }
		c.operation("1", `{ me { id } }`).decode(t, &me)
		require.Equal(t, other.AgentID, me.Me.ID)
		api.do(t, other.APIKey, `mutation { regenerateApiKey { apiKey } }`, nil).decode(t, &struct{}{})
		require.Equal(t, "UNAUTHENTICATED", c.operation("2", `{ me { id } }`).code(t))
	})
}

// insertTransfer records a completed transfer directly, as the sends
// engineer's code would after inclusion.
func insertTransfer(t *testing.T, db *store.DB, from, to registration, amount int64, at time.Time) *ent.Transfer {
	t.Helper()
	ref := make([]byte, 32)
	_, err := rand.Read(ref)
	require.NoError(t, err)
	fee := amount / 1000
	tr, err := db.Ent.Transfer.Create().
		SetKind(transfer.KindSend).
		SetFromAgentID(uuid.MustParse(from.AgentID)).
		SetToAgentID(uuid.MustParse(to.AgentID)).
		SetChain("base").
		SetFromAddress(from.Wallets[1].Address).
		SetToAddress(to.Wallets[1].Address).
		SetAmount(amount).
		SetFee(fee).
		SetNet(amount - fee).
		SetRef(ref).
		SetTxHash(fmt.Sprintf("0x%064x", at.UnixNano())).
		SetStatus("completed").
		SetCreatedAt(at.UTC()).
		SetUpdatedAt(at.UTC()).
		Save(context.Background())
	require.NoError(t, err)
	return tr
}

type transferPage struct {
	Me struct {
		Transfers struct {
			TotalCount int
			PageInfo   struct {
				HasNextPage, HasPreviousPage bool
				StartCursor, EndCursor       *string
			}
			Edges []struct {
				Cursor string
				Node   struct {
					ID           string
					AmountUsd    json.Number
					FeeUsd       json.Number
					DeliveredUsd json.Number
					Amount       int64
					Status       string
					FromAgent    struct{ Username string }
					ToAgent      *struct{ Username string }
				}
			}
		}
	}
}

const transfersQuery = `query($first: Int, $after: Cursor, $last: Int, $before: Cursor) {
	me { transfers(first: $first, after: $after, last: $last, before: $before) {
		totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
		edges { cursor node { id amountUsd feeUsd deliveredUsd amount status fromAgent { username } toAgent { username } } } } } }`

func TestTransfersPaginationAndNodes(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{})
	a := api.register(t, uniqueName(t, "pa"))
	b := api.register(t, uniqueName(t, "pb"))
	c := api.register(t, uniqueName(t, "pc"))

	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	var mine []*ent.Transfer // A's transfers, oldest first
	for i := 0; i < 5; i++ {
		mine = append(mine, insertTransfer(t, api.DB, a, b, int64(i+1)*10_000_000, start.Add(time.Duration(i)*time.Minute)))
	}
	for i := 5; i < 7; i++ {
		mine = append(mine, insertTransfer(t, api.DB, b, a, 50_000_000, start.Add(time.Duration(i)*time.Minute)))
	}
	theirs := insertTransfer(t, api.DB, b, c, 1_000_000, start.Add(30*time.Minute))
	// A verified partner identity makes A T1 (30 requests a minute), room
	// for the operations below.
	ctx := context.Background()
	api.DB.Ent.Agent.UpdateOneID(uuid.MustParse(a.AgentID)).SetPartnerVerified(true).ExecX(ctx)
	require.NoError(t, api.Svc.RecomputeTrust(ctx, uuid.MustParse(a.AgentID)))

	// Forward, newest first, three at a time.
	var ids []string
	var after any
	for page := 0; ; page++ {
		var p transferPage
		api.do(t, a.APIKey, transfersQuery, map[string]any{"first": 3, "after": after}).decode(t, &p)
		tr := p.Me.Transfers
		require.Equal(t, 7, tr.TotalCount, "only transfers A sent or received")
		for _, e := range tr.Edges {
			ids = append(ids, e.Node.ID)
		}
		if !tr.PageInfo.HasNextPage {
			require.Len(t, tr.Edges, 1)
			require.Equal(t, 2, page)
			break
		}
		require.Len(t, tr.Edges, 3)
		after = *tr.PageInfo.EndCursor
	}
	require.Len(t, ids, 7)
	for i, id := range ids {
		require.Equal(t, mine[len(mine)-1-i].ID.String(), id, "newest first")
	}

	// Backward from the end.
	var p transferPage
	api.do(t, a.APIKey, transfersQuery, map[string]any{"last": 2}).decode(t, &p)
	require.Len(t, p.Me.Transfers.Edges, 2)
	require.True(t, p.Me.Transfers.PageInfo.HasPreviousPage)
	require.Equal(t, mine[0].ID.String(), p.Me.Transfers.Edges[1].Node.ID)

	// Amounts in USD, the counterparties as public profiles.
	var first transferPage
	api.do(t, a.APIKey, transfersQuery, map[string]any{"last": 1}).decode(t, &first)
	n := first.Me.Transfers.Edges[0].Node // the oldest: A sent 10 to B
	require.Equal(t, "10", n.AmountUsd.String())
	require.Equal(t, "0.01", n.FeeUsd.String())
	require.Equal(t, "9.99", n.DeliveredUsd.String())
	require.Equal(t, a.Username, n.FromAgent.Username)
	require.Equal(t, b.Username, n.ToAgent.Username)

	// node: A sees itself, its wallets and its transfers, and nothing else.
	nodeQuery := `query($id: ID!) { node(id: $id) { id __typename } }`
	for _, own := range []string{a.AgentID, mine[0].ID.String(), mine[6].ID.String()} {
		var d struct {
			Node struct {
				ID       string
				Typename string `json:"__typename"`
			}
		}
		api.do(t, a.APIKey, nodeQuery, map[string]any{"id": own}).decode(t, &d)
		require.Equal(t, own, d.Node.ID)
	}
	var me meData
	api.do(t, a.APIKey, meQuery, nil).decode(t, &me)
	var w struct{ Node struct{ Address string } }
	api.do(t, a.APIKey, `query($id: ID!) { node(id: $id) { ... on Wallet { address } } }`,
		map[string]any{"id": me.Me.Wallets[1].ID}).decode(t, &w)
	require.Equal(t, me.Me.Wallets[1].Address, w.Node.Address)

	var bMe meData
	api.do(t, b.APIKey, meQuery, nil).decode(t, &bMe)
	for _, other := range []string{b.AgentID, c.AgentID, theirs.ID.String(), bMe.Me.Wallets[0].ID} {
		out := api.do(t, a.APIKey, nodeQuery, map[string]any{"id": other})
		require.Equal(t, "NOT_FOUND", out.code(t), other)
	}
	out := api.do(t, a.APIKey, `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, map[string]any{"ids": []string{a.AgentID, b.AgentID}})
	require.Equal(t, "NOT_FOUND", out.code(t))
	// Anonymous callers see nothing; a bad key is refused.
	require.Equal(t, "NOT_FOUND", api.do(t, "", nodeQuery, map[string]any{"id": a.AgentID}).code(t))
	require.Equal(t, "UNAUTHENTICATED", api.do(t, "ak_bad", nodeQuery, map[string]any{"id": a.AgentID}).code(t))
}

// Token amounts in base units pass GraphQL's 32-bit Int above 2,147 USDC:
// they have their own 64-bit scalar, and read back exactly.
func TestBaseUnitAmountsBeyond32Bits(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{})
	a := api.register(t, uniqueName(t, "ba"))
	b := api.register(t, uniqueName(t, "bb"))
	insertTransfer(t, api.DB, a, b, 5_000_000_000, time.Now().Add(-time.Minute)) // 5,000 USDC

	var p struct {
		Me struct {
			Transfers struct {
				Edges []struct {
					Node struct{ Amount, Fee, Net int64 }
				}
			}
		}
	}
	api.do(t, a.APIKey, `{ me { transfers(first: 1) { edges { node { amount fee net } } } } }`, nil).decode(t, &p)
	require.Len(t, p.Me.Transfers.Edges, 1)
	n := p.Me.Transfers.Edges[0].Node
	require.Equal(t, int64(5_000_000_000), n.Amount)
	require.Equal(t, int64(5_000_000), n.Fee)
	require.Equal(t, int64(4_995_000_000), n.Net)

	var types struct {
		Type struct {
			Fields []struct {
				Name string
				Type struct{ OfType struct{ Name string } }
			}
		} `json:"__type"`
	}
	// Introspection is off unless configured: a second server over the
	// same service has it on.
	introspecting := *api
	srv := httptest.NewServer(NewHandler(HandlerConfig{Service: api.Svc, Introspection: true}))
	t.Cleanup(srv.Close)
	introspecting.URL = srv.URL
	introspecting.do(t, "", `{ __type(name: "Transfer") { fields { name type { ofType { name } } } } }`, nil).decode(t, &types)
	kinds := map[string]string{}
	for _, f := range types.Type.Fields {
		kinds[f.Name] = f.Type.OfType.Name
	}
	for _, f := range []string{"amount", "fee", "net"} {
		require.Equal(t, "BaseUnits", kinds[f], f)
	}
}

// TestAgentRateLimit: each GraphQL operation of an agent counts one request
// against its tier's limit (T0: 10 a minute), the eleventh is RATE_LIMITED.
// The service's clock stands still, so every operation falls into one
// window.
func TestAgentRateLimit(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{Clock: clock.NewStub(time.Now())})
	reg := api.register(t, uniqueName(t, "rl"))
	for i := 1; i <= 10; i++ {
		q := `{ me { id } }`
		if i%2 == 0 {
			// One root field, whatever it selects: one request (aliased
			// root fields count one each: TestGraphQLCountsEveryField).
			q = `{ me { id username wallets { id primary } } }`
		}
		out := api.do(t, reg.APIKey, q, nil)
		require.Empty(t, out.Errors, "operation %d", i)
		require.Equal(t, "10", out.Header.Get("X-RateLimit-Limit"))
		require.Equal(t, strconv.Itoa(10-i), out.Header.Get("X-RateLimit-Remaining"))
	}
	out := api.do(t, reg.APIKey, `{ me { id } }`, nil)
	require.Equal(t, "RATE_LIMITED", out.code(t))
	retry, ok := out.Errors[0].Extensions["retryAfter"].(float64)
	require.True(t, ok, "%v", out.Errors[0].Extensions)
	require.GreaterOrEqual(t, retry, 1.0)
	require.LessOrEqual(t, retry, 60.0)
	require.Equal(t, "minute", out.Errors[0].Extensions["window"])
	require.NotEmpty(t, out.Header.Get("Retry-After"))
	require.Equal(t, "0", out.Header.Get("X-RateLimit-Remaining"))

	// Mutations and websocket operations share the limit.
	out = api.do(t, reg.APIKey, `mutation { regenerateApiKey { apiKey } }`, nil)
	require.Equal(t, "RATE_LIMITED", out.code(t))
	c := dialWS(t, api.URL, nil)
	c.init(map[string]any{"X-Agent-Key": reg.APIKey})
	require.Equal(t, "RATE_LIMITED", c.operation("1", `{ me { id } }`).code(t))

	// Public queries are limited per IP, not per agent.
	var d struct{ Stats struct{ Agents int } }
	api.do(t, reg.APIKey, `{ stats { agents } }`, nil).decode(t, &d)
}

func TestIPRateLimits(t *testing.T) {
	// The service's clock stands still: every request falls into one window.
	api := newAgentAPI(t, agentAPIConfig{IPRateLimit: 4, RegisterRateLimit: 2, Clock: clock.NewStub(time.Now())})
	api.register(t, uniqueName(t, "ip1")) // request 1, registration 1
	api.register(t, uniqueName(t, "ip2")) // request 2, registration 2
	out := api.do(t, "", quickRegisterMutation, map[string]any{"u": uniqueName(t, "ip3")})
	require.Equal(t, "RATE_LIMITED", out.code(t), "the third registration in an hour") // request 3
	require.Equal(t, "hour", out.Errors[0].Extensions["window"])

	// Two public fields, one operation: two requests, the second refused.
	out = api.do(t, "", `{ stats { agents } treasury { feeRate } }`, nil) // requests 4 and 5
	require.Len(t, out.Errors, 1, "one of the two fields is the fifth request")
	require.Equal(t, "RATE_LIMITED", out.Errors[0].Extensions["code"])
	require.Equal(t, "0", out.Header.Get("X-RateLimit-Remaining"))
	out = api.do(t, "", `{ stats { agents } }`, nil)
	require.Len(t, out.Errors, 1)
	require.Equal(t, "RATE_LIMITED", out.Errors[0].Extensions["code"])
	require.NotEmpty(t, out.Header.Get("Retry-After"))
}

type balanceData struct {
	Me struct {
		Balance struct {
			Username string
			TotalUsd json.Number
			Balances []struct {
				Chain, Token, Address string
				Balance               json.Number
			}
		}
	}
}

const balanceQuery = `{ me { balance { username totalUsd balances { chain token address balance } } } }`

// TestSendOnBase sends over GraphQL on the Base devnet: the recipient gets
// the amount less 0.1%, balances read back exactly, refusals carry codes.
func TestSendOnBase(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{Base: true})
	a := api.register(t, uniqueName(t, "snd"))
	b := api.register(t, uniqueName(t, "rcv"))
	_, err := api.Base.Send(context.Background(), common.HexToAddress(a.Wallets[1].Address), big.NewInt(60_000_000))
	require.NoError(t, err)

	var sent struct {
		Send struct {
			TransactionID, FromAgent, ToAgent, Chain, Status, Message string
			TxHash                                                    *string
			AmountUsd, FeeUsd                                         json.Number
			Transfer                                                  struct {
				ID                              string
				AmountUsd, FeeUsd, DeliveredUsd json.Number
				Memo                            string
			}
		}
	}
	api.do(t, a.APIKey, `mutation($in: SendInput!) { send(input: $in) {
		transactionId fromAgent toAgent amountUsd feeUsd chain txHash status message
		transfer { id amountUsd feeUsd deliveredUsd memo } } }`,
		map[string]any{"in": map[string]any{"toUsername": b.Username, "amountUsd": 50, "chain": "base", "memo": "thanks"}}).decode(t, &sent)
	s := sent.Send
	require.Equal(t, a.Username, s.FromAgent)
	require.Equal(t, b.Username, s.ToAgent)
	require.Equal(t, "49.95", s.AmountUsd.String())
	require.Equal(t, "0.05", s.FeeUsd.String())
	require.Equal(t, "base", s.Chain)
	require.Equal(t, "COMPLETED", s.Status)
	require.NotNil(t, s.TxHash)
	require.Contains(t, s.Message, "49.95")
	require.Equal(t, s.TransactionID, s.Transfer.ID)
	require.Equal(t, "50", s.Transfer.AmountUsd.String())
	require.Equal(t, "49.95", s.Transfer.DeliveredUsd.String())
	require.Equal(t, "thanks", s.Transfer.Memo)

	var bal balanceData
	api.do(t, a.APIKey, balanceQuery, nil).decode(t, &bal)
	require.Equal(t, "10", bal.Me.Balance.TotalUsd.String())
	api.do(t, b.APIKey, balanceQuery, nil).decode(t, &bal)
	require.Equal(t, "49.95", bal.Me.Balance.TotalUsd.String())
	require.Len(t, bal.Me.Balance.Balances, 1, "only base is configured")
	require.Equal(t, b.Wallets[1].Address, bal.Me.Balance.Balances[0].Address)

	// The recipient sees the transfer too.
	var p transferPage
	api.do(t, b.APIKey, transfersQuery, map[string]any{"first": 5}).decode(t, &p)
	require.Equal(t, 1, p.Me.Transfers.TotalCount)
	require.Equal(t, s.TransactionID, p.Me.Transfers.Edges[0].Node.ID)

	sendMutation := `mutation($in: SendInput!) { send(input: $in) { status } }`
	for _, tc := range []struct {
		in   map[string]any
		code string
	}{
		{map[string]any{"toUsername": b.Username, "amountUsd": "0.001", "chain": "base"}, "BAD_USER_INPUT"},
		{map[string]any{"toUsername": "nobody_at_all", "amountUsd": 1, "chain": "base"}, "NOT_FOUND"},
		{map[string]any{"toUsername": a.Username, "amountUsd": 1, "chain": "base"}, "BAD_USER_INPUT"},
		{map[string]any{"toUsername": b.Username, "amountUsd": 20, "chain": "base"}, "INSUFFICIENT_FUNDS"},
		{map[string]any{"toUsername": b.Username, "amountUsd": 101, "chain": "base"}, "FORBIDDEN"},
	} {
		out := api.do(t, a.APIKey, sendMutation, map[string]any{"in": tc.in})
		require.Equal(t, tc.code, out.code(t), "%v: %v", tc.in, out.Errors)
	}
}
