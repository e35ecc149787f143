package rest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/agent"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// sendChains are a Base (a block every 50 ms) and a Solana devnet for
// agents' wallets, with the bundle's treasury funded with gas on both.
type sendChains struct {
	env *testenv.Env
}

func startSendChains(tb testing.TB) *sendChains {
	tb.Helper()
	return startSendChainsEvery(tb, 50*time.Millisecond)
}

// startSendChainsEvery is startSendChains with Base making a block every
// baseBlockTime; 0 makes one only on Commit, so a send waits for its
// block, in flight, until the test says.
func startSendChainsEvery(tb testing.TB, baseBlockTime time.Duration) *sendChains {
	tb.Helper()
	return &sendChains{env: testenv.New(tb, testenv.Options{
		NoDB: true, Chains: []chains.Name{chains.Base, chains.Solana}, BlockTime: baseBlockTime,
	})}
}

// api is an API instance on these chains; db nil means a fresh database.
func (c *sendChains) api(tb testing.TB, db *store.DB) *testAPI {
	tb.Helper()
	if db == nil {
		db = testdb.Open(tb)
	}
	return newTestAPI(tb, testAPIConfig{Env: c.env, DB: db, Config: agentpay.Config{AgentMode: agentpay.ModeTest}})
}

func (c *sendChains) fund(tb testing.TB, chain chains.Name, address string, units int64) {
	tb.Helper()
	c.env.Fund(tb, chain, address, units)
}

func (c *sendChains) onChain(tb testing.TB, chain chains.Name, address string) decimal.Decimal {
	tb.Helper()
	return agentpay.FromBaseUnits(c.env.Balance(tb, chain, address), 6)
}

// raiseTier gives the agent the three verifications (tier T3, 120 requests
// a minute), so its rate limit does not get in the way of a burst of sends.
func raiseTier(t *testing.T, api *testAPI, id string) {
	t.Helper()
	ctx := context.Background()
	aid := uuid.MustParse(id)
	require.NoError(t, api.DB.Ent.Agent.UpdateOneID(aid).
		SetPartnerVerified(true).SetExternalWalletVerified(true).SetHumanVerified(true).Exec(ctx))
	require.NoError(t, api.Svc.RecomputeTrust(ctx, aid))
	got, err := api.DB.Ent.Agent.Get(ctx, aid)
	require.NoError(t, err)
	require.Equal(t, agent.TierT3, got.Tier)
}

// A send of 50 over REST on each chain answers the Transfer of spec 2.3
// with 49.95 delivered; the balance endpoint then shows spec 2.2.
func TestSendAndBalanceOverREST(t *testing.T) {
	c := startSendChains(t)
	api := c.api(t, nil)
	for _, chain := range []chains.Name{chains.Base, chains.Solana} {
		t.Run(string(chain), func(t *testing.T) {
			alice := api.register("alice_" + string(chain))
			bob := api.register("bob_" + string(chain))
			from, to := alice.Base, bob.Base
			if chain == chains.Solana {
				from, to = alice.Solana, bob.Solana
			}
			c.fund(t, chain, from, 100_000_000)
			treasury := c.env.Treasury.Address(chain)
			treasuryBefore := c.onChain(t, chain, treasury)

			resp := api.do(http.MethodPost, "/agents/me/wallet/send", map[string]any{
				"to_username": bob.Username, "amount_usd": 50, "memo": "thanks", "chain": string(chain),
			}, agentKey(alice.APIKey))
			require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
			require.Contains(t, string(resp.Body), `"amount_usd":49.95`)
			m := resp.Map(t)
			require.Equal(t, "completed", m["status"])
			require.Equal(t, alice.Username, m["from_agent"])
			require.Equal(t, bob.Username, m["to_agent"])
			require.Equal(t, string(chain), m["chain"])
			require.NotEmpty(t, m["tx_hash"])
			assertGolden(t, "send_completed_"+string(chain), resp.Body,
				map[string]string{alice.Username: "<from>", bob.Username: "<to>"})

			requireDec(t, "50", c.onChain(t, chain, from))
			requireDec(t, "49.95", c.onChain(t, chain, to))
			requireDec(t, "0.05", c.onChain(t, chain, treasury).Sub(treasuryBefore))

			resp = api.do(http.MethodGet, "/agents/me/wallet/balance", nil, agentKey(bob.APIKey))
			require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
			require.Contains(t, string(resp.Body), `"total_usd":49.95`)
			assertGolden(t, "balance_after_send_"+string(chain), resp.Body,
				map[string]string{bob.Username: "<username>", bob.Solana: "<solana-address>"})
		})
	}
	// Two wallets with money on both: the total is their exact sum.
	carol := api.register("carol_two_chains")
	c.fund(t, chains.Solana, carol.Solana, 1_000_001)
	c.fund(t, chains.Base, carol.Base, 2_100_000)
	resp := api.do(http.MethodGet, "/agents/me/wallet/balance", nil, agentKey(carol.APIKey))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "balance_two_chains", resp.Body,
		map[string]string{carol.Username: "<username>", carol.Solana: "<solana-address>"})
	require.Contains(t, string(resp.Body), `"total_usd":3.100001`)
}

// Refusals answer their status with {detail} and move nothing.
func TestSendErrorsOverREST(t *testing.T) {
	c := startSendChains(t)
	api := c.api(t, nil)
	alice, bob := api.register("alice_err"), api.register("bob_err")
	raiseTier(t, api, alice.ID) // more than T0's 10 requests a minute
	c.fund(t, chains.Base, alice.Base, 10_000_000)
	for _, tc := range []struct {
		name   string
		body   any
		status int
		detail string
	}{
		{"malformed JSON", `{"to_username":`, 400, "malformed JSON"},
		{"amount as a string", `{"to_username":"` + bob.Username + `","amount_usd":"5"}`, 400, "amount_usd: must be a number"},
		{"unknown field", map[string]any{"to_username": bob.Username, "amount_usd": 5, "colour": "red"}, 400, "unknown field"},
		{"missing recipient", map[string]any{"amount_usd": 5}, 400, "to_username: is required"},
		{"missing amount", map[string]any{"to_username": bob.Username}, 400, "amount_usd: is required"},
		{"below minimum", map[string]any{"to_username": bob.Username, "amount_usd": 0.009}, 400, "at least 0.01"},
		{"seven decimals", `{"to_username":"` + bob.Username + `","amount_usd":1.0000001}`, 400, "more than 6 decimal places"},
		{"unknown chain", map[string]any{"to_username": bob.Username, "amount_usd": 5, "chain": "dogechain"}, 400, "unknown chain"},
		{"self", map[string]any{"to_username": alice.Username, "amount_usd": 5}, 400, "cannot send to yourself"},
		{"unknown recipient", map[string]any{"to_username": "no_such_agent", "amount_usd": 5}, 404, "no agent named"},
		{"per-send limit", map[string]any{"to_username": bob.Username, "amount_usd": 50_001}, 403, "per-send limit of 50000 USD of tier T3"},
		{"insufficient", map[string]any{"to_username": bob.Username, "amount_usd": 10.5}, 400, "insufficient balance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, "/agents/me/wallet/send", tc.body, agentKey(alice.APIKey))
			require.Equal(t, tc.status, resp.Status, string(resp.Body))
			require.Contains(t, resp.Map(t)["detail"], tc.detail)
		})
	}
	resp := api.do(http.MethodPost, "/agents/me/wallet/send", map[string]any{"to_username": bob.Username, "amount_usd": 10.5}, agentKey(alice.APIKey))
	assertGolden(t, "send_insufficient", resp.Body, nil)
	resp = api.do(http.MethodPost, "/agents/me/wallet/send", map[string]any{"to_username": bob.Username, "amount_usd": 5}, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status)
	resp = api.do(http.MethodGet, "/agents/me/wallet/balance", nil, agentKey("ak_nope"))
	require.Equal(t, http.StatusUnauthorized, resp.Status)
	requireDec(t, "10", c.onChain(t, chains.Base, alice.Base))
	requireDec(t, "0", c.onChain(t, chains.Base, bob.Base))
}

// 20 concurrent sends of 5 from a wallet holding 50, spread over two API
// instances sharing the database: at most 10 succeed, the others are
// refused with {detail}, and the chain shows 50 - 5 per success. Meant for
// PostgreSQL (row locks across instances); on SQLite the instances share
// one file and its write lock.
func TestConcurrentSendsTwoInstances(t *testing.T) {
	c := startSendChains(t)
	db := testdb.Open(t)
	api1, api2 := c.api(t, db), c.api(t, db)
	alice, bob := api1.register("alice_burst"), api2.register("bob_burst")
	raiseTier(t, api1, alice.ID)
	c.fund(t, chains.Base, alice.Base, 50_000_000)

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		successes int
		refused   []string
	)
	for i := 0; i < 20; i++ {
		api := api1
		if i%2 == 1 {
			api = api2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := api.do(http.MethodPost, "/agents/me/wallet/send",
				map[string]any{"to_username": bob.Username, "amount_usd": 5, "chain": "base"}, agentKey(alice.APIKey))
			mu.Lock()
			defer mu.Unlock()
			switch resp.Status {
			case http.StatusOK:
				successes++
			default:
				refused = append(refused, fmt.Sprintf("%d %s", resp.Status, resp.Map(t)["detail"]))
			}
		}()
	}
	wg.Wait()
	t.Logf("db %s: %d of 20 succeeded", db.Dialect, successes)
	require.Positive(t, successes, "a wallet holding 50 can send 5: refusing everything is not safety")
	require.LessOrEqual(t, successes, 10)
	require.Len(t, refused, 20-successes)
	for _, r := range refused {
		require.Contains(t, r, "400 insufficient balance")
	}
	left := decimal.NewFromInt(int64(50 - 5*successes))
	requireDec(t, left.String(), c.onChain(t, chains.Base, alice.Base))
	requireDec(t, decimal.RequireFromString("4.995").Mul(decimal.NewFromInt(int64(successes))).String(), c.onChain(t, chains.Base, bob.Base))
}

func requireDec(tb testing.TB, want string, got decimal.Decimal) {
	tb.Helper()
	require.True(tb, decimal.RequireFromString(want).Equal(got), "want %s, got %s", want, got)
}
