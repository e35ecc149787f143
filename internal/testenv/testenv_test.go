package testenv_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	solanago "github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/ent/funding"
	"agentpay/internal/clock"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
	"agentpay/internal/treasury"
)

// The devnets asked for are wired to test mode's networks as cmd/agentpay
// wires a configured chain, with the treasury funded with gas.
func TestNewWiresDevnetsToNetworks(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{
		Chains:        []chains.Name{chains.Base, chains.Solana},
		Confirmations: map[chains.Name]uint64{chains.Base: 3, chains.Solana: 8},
	})
	tk, err := treasury.Derive(env.Vault, env.Families)
	require.NoError(t, err)
	require.Equal(t, tk, env.Treasury, "the treasury cmd/agentpay derives from the same master key")
	require.NotNil(t, env.DB)
	require.Zero(t, testdb.CountRows(t, env.DB, "merchants"), "a migrated, empty database")
	require.NotNil(t, env.Jobs, "with a database, the API processes' job inserter")
	require.Nil(t, env.Clock)

	require.Len(t, env.Test, 2)
	base, sol := env.Test[chains.Base], env.Test[chains.Solana]
	require.Equal(t, env.EVM(chains.Base).USDC.Hex(), base.Ledger.Token())
	require.Equal(t, env.Solana().Mint.String(), sol.Ledger.Token())
	for name, want := range map[chains.Name]uint64{chains.Base: 3, chains.Solana: 8} {
		n := env.Test[name]
		require.Equal(t, want, n.Confirmations, "%s", name)
		require.NotNil(t, n.NewWatcher, "%s is scanned", name)
		require.NotNil(t, n.NewWatchlist, "%s", name)
	}

	gas, err := env.EVM(chains.Base).Client().BalanceAt(ctx, common.HexToAddress(tk.EVMAddress), nil)
	require.NoError(t, err)
	require.Equal(t, devnet.NativeFunding, gas, "the treasury pays gas on base")
	treasuryLamports, err := env.Solana().Client().GetBalance(ctx, solanago.MustPublicKeyFromBase58(tk.SolanaAddress), rpc.CommitmentConfirmed)
	require.NoError(t, err)
	require.Positive(t, treasuryLamports.Value, "the treasury pays fees on solana")

	for _, name := range []chains.Name{chains.Base, chains.Solana} {
		_, addr, err := env.Families[name.Family()].NewKey()
		require.NoError(t, err)
		env.Fund(t, name, addr, 1_250_000)
		require.Equal(t, int64(1_250_000), env.Balance(t, name, addr).Int64(), "%s", name)
		// Recorded, as agentpay dev's faucet records it, for the books.
		f, err := env.DB.Ent.Funding.Query().Where(funding.Chain(string(name)), funding.Address(addr)).Only(ctx)
		require.NoError(t, err, "%s", name)
		require.Equal(t, int64(1_250_000), f.Amount)
		require.Equal(t, funding.ModeTest, f.Mode)
		require.Equal(t, "faucet", f.Source)
		require.NotEmpty(t, f.TxHash)
	}
}

// A service built before AddChain keeps the networks it was given: the Env
// replaces its map rather than writing to one a service reads.
func TestAddChainKeepsEarlierNetworks(t *testing.T) {
	env := testenv.New(t, testenv.Options{NoDB: true, Chains: []chains.Name{chains.Base}})
	before := env.Test
	env.AddChain(chains.Polygon)
	require.Len(t, before, 1)
	require.Len(t, env.Test, 2)
	require.Same(t, before[chains.Base].Ledger, env.Test[chains.Base].Ledger)
	require.Equal(t, env.EVM(chains.Polygon).USDC.Hex(), env.Test[chains.Polygon].Ledger.Token())
}

// Fill fills what a test left zero in a real agentpay.Config and keeps
// what it set.
func TestFill(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	env := testenv.New(t, testenv.Options{Jobs: true, Clock: at})

	var cfg agentpay.Config
	env.Fill(&cfg)
	require.Same(t, env.DB, cfg.DB)
	require.Same(t, env.Vault, cfg.Vault)
	require.Same(t, env.Logger, cfg.Logger)
	require.Equal(t, env.Treasury, cfg.Treasury)
	require.Equal(t, env.Families, cfg.Families)
	require.NotNil(t, cfg.Test)
	require.Equal(t, env.Jobs, cfg.Jobs)
	require.Equal(t, at, cfg.Clock.Now())
	require.Equal(t, [3]string{testenv.BaseURL, testenv.PayURL, testenv.AppURL}, [3]string{cfg.BaseURL, cfg.PayURL, cfg.AppURL})
	_, err := agentpay.NewService(cfg)
	require.NoError(t, err)

	other := testdb.Reopen(t, env.DB)
	stub := clock.NewStub(at.Add(time.Hour))
	cfg = agentpay.Config{DB: other, Clock: stub, PayURL: "https://pay.example", AgentMode: agentpay.ModeTest}
	env.Fill(&cfg)
	require.Same(t, other, cfg.DB, "kept")
	require.Same(t, stub, cfg.Clock, "kept")
	require.Equal(t, agentpay.ModeTest, cfg.AgentMode)
	require.Equal(t, "https://pay.example", cfg.PayURL)
	require.Empty(t, cfg.BaseURL, "one URL set: the test chose them")
	require.Same(t, env.Vault, cfg.Vault)

	// Without a stub clock or River client, those stay the caller's.
	plain := testenv.New(t, testenv.Options{NoDB: true})
	cfg = agentpay.Config{}
	plain.Fill(&cfg)
	require.Nil(t, cfg.DB)
	require.Nil(t, cfg.Jobs)
	require.Nil(t, cfg.Clock)
	require.True(t, cfg.WebhookAllowPrivate, "the tests' receivers are on loopback")

	public := testenv.New(t, testenv.Options{NoDB: true, PublicWebhooksOnly: true})
	cfg = agentpay.Config{}
	public.Fill(&cfg)
	require.False(t, cfg.WebhookAllowPrivate)
}

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	fatal []string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.fatal = append(f.fatal, fmt.Sprintf(format, args...))
}
func (f *fatalTB) Helper() {}

// A Config whose fields are missing or of another type fails the test
// instead of being filled in part.
func TestFillRefusesAnotherShape(t *testing.T) {
	ftb := &fatalTB{TB: t}
	env := testenv.New(ftb, testenv.Options{NoDB: true})
	var wrong struct {
		Vault  string
		Logger any
	}
	env.Fill(&wrong)
	joined := strings.Join(ftb.fatal, "\n")
	require.Contains(t, joined, "Vault is a string")
	require.Contains(t, joined, "has no settable field Treasury")
	env.Fill(wrong)
	require.Contains(t, ftb.fatal[len(ftb.fatal)-1], "takes a pointer")
}

func TestReceiver(t *testing.T) {
	r := testenv.NewReceiver(t, http.StatusOK)
	post := func(body string) *http.Response {
		t.Helper()
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Post(r.URL+"/hooks", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	resp := post(`{"id":"evt_1","event":"payment.confirmed"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := r.Requests()
	require.Len(t, got, 1, "recorded before the answer")
	require.Equal(t, "evt_1", got[0].EventID)
	require.Equal(t, "payment.confirmed", got[0].Event)
	require.True(t, got[0].Acked)
	require.Equal(t, "application/json", got[0].Header.Get("Content-Type"))
	select {
	case <-r.Arrived():
	default:
		t.Fatal("no arrival signalled")
	}

	r.SetStatus(http.StatusFound)
	resp = post(`not json`)
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, "http://127.0.0.1:1/elsewhere", resp.Header.Get("Location"))
	r.SetStatus(http.StatusInternalServerError)
	require.Equal(t, http.StatusInternalServerError, post(`{}`).StatusCode)
	got = r.Requests()
	require.Len(t, got, 3)
	require.False(t, got[1].Acked)
	require.Equal(t, []byte(`not json`), got[1].Body)
	require.False(t, got[2].Acked)

	// A held delivery is answered only when its sender gives up.
	r.SetStatus(http.StatusOK)
	held := r.HoldFirst("payment.detected")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, strings.NewReader(`{"id":"evt_2","event":"payment.detected"}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	h := <-held
	require.Equal(t, "evt_2", h.EventID)
	cancel()
	require.Error(t, <-errc, "no answer while held")
	require.Eventually(t, func() bool { return len(r.Requests()) == 4 }, 10*time.Second, 10*time.Millisecond)
	require.False(t, r.Requests()[3].Acked)
	require.True(t, post(`{"id":"evt_3","event":"payment.detected"}`).StatusCode == http.StatusOK, "only the first is held")
}
