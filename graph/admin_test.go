package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"testing"
	"time"

	ethcommon "github.com/ethereum/go-ethereum/common"
	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/httpx"
	"agentpay/internal/testenv"
)

// adminDo posts a GraphQL operation with X-Admin-Key when key is set.
func adminDo(t *testing.T, url, key, q string) gqlResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": q})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(httpx.AdminKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out gqlResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

const booksQuery = `{ books { balanced error chains { chain mode decimals lines {
	holder addresses onChain records difference
	differences { address owner onChain records explainedBy { kind id amount detail inFlight } }
	inFlight { kind id } } } } }`

type booksAnswer struct {
	Books struct {
		Balanced bool
		Error    *string
		Chains   []struct {
			Chain, Mode string
			Decimals    int
			Lines       []struct {
				Holder                       string
				Addresses                    int
				OnChain, Records, Difference int64
				Differences                  []struct{ Address string }
			}
		}
	}
}

// The books query answers only the admin key: without one configured, or
// with no key or a wrong one, UNAUTHENTICATED; with it, the lines of every
// configured chain and mode, balanced after an agent's send, and then the
// difference an outside payment makes.
func TestAdminBooks(t *testing.T) {
	ctx := context.Background()
	const key = "0123456789abcdef0123456789abcdef-admin"

	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond})
	off := newTestServer(t, env, agentpay.Config{AgentMode: agentpay.ModeTest}, HandlerConfig{})
	require.Equal(t, "UNAUTHENTICATED", adminDo(t, off.URL, key, booksQuery).code(t), "no admin key configured: the admin API is off")

	srv := newTestServer(t, env, agentpay.Config{AgentMode: agentpay.ModeTest, AdminKeyHash: agentpay.AdminKeyHash(key)}, HandlerConfig{})
	for _, k := range []string{"", "wrong", key + "x", key[:len(key)-1]} {
		out := adminDo(t, srv.URL, k, booksQuery)
		require.Equal(t, "UNAUTHENTICATED", out.code(t), "key %q", k)
		require.Equal(t, "null", string(out.Data))
	}

	svc := srv.Svc
	alice, err := svc.QuickRegister(ctx, "alice_admin")
	require.NoError(t, err)
	bob, err := svc.QuickRegister(ctx, "bob_admin")
	require.NoError(t, err)
	baseWallet := func(r *agentpay.Registration) string {
		for _, w := range r.Wallets {
			if w.Chain == string(chains.Base) {
				return w.Address
			}
		}
		t.Fatal("no base wallet")
		return ""
	}
	bobBase := baseWallet(bob)
	env.Fund(t, chains.Base, baseWallet(alice), 30_000_000) // recorded by the faucet
	res, _, err := svc.Send(ctx, alice.Agent, agentpay.SendRequest{ToUsername: bob.Agent.Username, AmountUSD: decimal.NewFromInt(10), Chain: "base"})
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status)
	nextBlock := func() {
		client := env.EVM(chains.Base).Client()
		head, err := client.BlockNumber(ctx)
		require.NoError(t, err)
		require.Eventually(t, func() bool { n, err := client.BlockNumber(ctx); return err == nil && n > head }, 30*time.Second, 5*time.Millisecond)
	}
	nextBlock()

	var got booksAnswer
	adminDo(t, srv.URL, key, booksQuery).decode(t, &got)
	require.True(t, got.Books.Balanced, "%v", got.Books.Error)
	require.Nil(t, got.Books.Error)
	require.Len(t, got.Books.Chains, 1)
	c := got.Books.Chains[0]
	require.Equal(t, "base", c.Chain)
	require.Equal(t, "TEST", c.Mode)
	require.Equal(t, 6, c.Decimals)
	holders := map[string]int64{}
	for _, l := range c.Lines {
		require.Equal(t, l.OnChain, l.Records, l.Holder)
		require.Zero(t, l.Difference)
		holders[l.Holder] = l.OnChain
	}
	require.Equal(t, map[string]int64{"TREASURY": 10_000, "DEPOSIT_ADDRESSES": 0, "AGENT_WALLETS": 29_990_000, "HUMAN_WALLETS": 0}, holders)

	// USDC reaches bob's wallet from outside every record.
	_, err = env.EVM(chains.Base).Send(ctx, ethcommon.HexToAddress(bobBase), big.NewInt(2_000_000))
	require.NoError(t, err)
	nextBlock()
	got = booksAnswer{}
	adminDo(t, srv.URL, key, booksQuery).decode(t, &got)
	require.False(t, got.Books.Balanced)
	require.NotNil(t, got.Books.Error)
	require.Contains(t, *got.Books.Error, "agent wallet "+bobBase)
	require.Contains(t, *got.Books.Error, "holds 2000000 more than recorded")
	for _, l := range got.Books.Chains[0].Lines {
		if l.Holder == "AGENT_WALLETS" {
			require.Equal(t, int64(2_000_000), l.Difference)
			require.Len(t, l.Differences, 1)
			require.Equal(t, bobBase, l.Differences[0].Address)
		}
	}
}

// On a websocket the admin key comes in the connection_init payload, like
// the other keys; a wrong one closes the connection (4403).
func TestAdminBooksOverWebsocket(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef-admin"
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond})
	srv := newTestServer(t, env, agentpay.Config{AgentMode: agentpay.ModeTest, AdminKeyHash: agentpay.AdminKeyHash(key)}, HandlerConfig{})

	c := dialWS(t, srv.URL, nil)
	c.init(map[string]any{"headers": map[string]any{"x-admin-key": key}})
	var got booksAnswer
	c.operation("1", `{ books { balanced chains { chain mode } } }`).decode(t, &got)
	require.True(t, got.Books.Balanced)
	require.Len(t, got.Books.Chains, 1)

	none := dialWS(t, srv.URL, nil)
	none.init(map[string]any{})
	require.Equal(t, "UNAUTHENTICATED", none.operation("1", `{ books { balanced } }`).code(t))

	bad := dialWS(t, srv.URL, nil)
	bad.send(map[string]any{"type": "connection_init", "payload": map[string]any{"X-Admin-Key": "wrong"}})
	var closeErr *websocket.CloseError
	for {
		_, err := bad.read()
		if err != nil {
			require.ErrorAs(t, err, &closeErr)
			break
		}
	}
	require.Equal(t, 4403, closeErr.Code)
}

// Every holder class and record kind of the books is a value of its
// GraphQL enum.
func TestBooksEnums(t *testing.T) {
	for _, h := range agentpay.BooksHolderClasses {
		m, err := booksModel(&agentpay.Books{Chains: []agentpay.ChainBooks{{Lines: []agentpay.BooksLine{{Holder: h, OnChain: big.NewInt(0), Records: big.NewInt(0)}}}}})
		require.NoError(t, err)
		require.True(t, m.Chains[0].Lines[0].Holder.IsValid(), h)
	}
	for _, k := range []string{"payment", "dust", "sweep", "transfer", "payout", "refund", "card_return", "funding"} {
		rec := agentpay.BooksRecord{Kind: k}
		m, err := booksModel(&agentpay.Books{Chains: []agentpay.ChainBooks{{Lines: []agentpay.BooksLine{{Holder: agentpay.BooksTreasury,
			OnChain: big.NewInt(0), Records: big.NewInt(0), InFlight: []agentpay.BooksRecord{rec}}}}}})
		require.NoError(t, err)
		require.True(t, m.Chains[0].Lines[0].InFlight[0].Kind.IsValid(), k)
	}
}
