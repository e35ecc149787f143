package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"agentpay/chains"
	"agentpay/ent/gasspend"
	"agentpay/internal/testenv"
	"agentpay/internal/vault"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
)

// TestAdminDeactivateMerchant runs `agentpay admin deactivate-merchant ID`
// against a SQLite database and checks the merchant's keys are then refused
// with ErrForbidden (403 in the API).
func TestAdminDeactivateMerchant(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	env := map[string]string{"DATA_DIR": dataDir, "LOG_LEVEL": "error"}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"migrate"}, getenv, &out, os.Stderr))

	// A merchant registered through the service `agentpay serve` builds.
	cfg, err := loadConfig(getenv)
	require.NoError(t, err)
	key, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	p, err := openPlatform(ctx, cfg, key)
	require.NoError(t, err)
	svc, err := p.service(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil, nil)
	require.NoError(t, err)
	name, email := "Acme", "a@acme.test"
	reg, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	id := reg.Merchant.ID.String()

	// The command answers once the API instances' AUTH_CACHE_TTL has
	// passed, so none of them still accepts the keys by then.
	env["AUTH_CACHE_TTL"] = "1500ms"
	out.Reset()
	start := time.Now()
	require.NoError(t, run(ctx, []string{"admin", "deactivate-merchant", id}, getenv, &out, os.Stderr))
	require.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond, "waits the configured TTL, not the default")
	require.Contains(t, out.String(), "merchant "+id+" (Acme) deactivated at ")
	_, err = svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.ErrorIs(t, err, agentpay.ErrForbidden)
	env["AUTH_CACHE_TTL"] = "0" // off: nothing to wait for below

	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "deactivate-merchant", id}, getenv, &out, os.Stderr))
	require.Contains(t, out.String(), "was already deactivated at ")

	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "reactivate-merchant", id}, getenv, &out, os.Stderr))
	require.Contains(t, out.String(), "reactivated")
	_, err = svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)

	// Bad usage names the problem.
	for _, args := range [][]string{
		{"admin"},
		{"admin", "deactivate-merchant"},
		{"admin", "deactivate-merchant", "not-a-uuid"},
		{"admin", "deactivate-merchant", uuid.NewString()},
		{"admin", "drop-everything", id},
	} {
		out.Reset()
		require.Error(t, run(ctx, args, getenv, &out, os.Stderr), "%v", args)
	}
	require.NoError(t, p.db.Close())
}

// TestAdminGas prints the gas ledger per mode and chain with its split by
// purpose, from what the gas tally recorded.
func TestAdminGas(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	env := map[string]string{"DATA_DIR": dataDir, "LOG_LEVEL": "error"}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"migrate"}, getenv, &out, os.Stderr))

	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "gas"}, getenv, &out, os.Stderr))
	require.Equal(t, "no gas recorded yet\n", out.String())

	cfg, err := loadConfig(getenv)
	require.NoError(t, err)
	key, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	p, err := openPlatform(ctx, cfg, key)
	require.NoError(t, err)
	for _, g := range []struct {
		mode                 gasspend.Mode
		chain, hash, purpose string
		fee, rent            int64
		decimals             int32
	}{
		{gasspend.ModeLive, "base", "0x01", agentpay.GasPurposeSweep, 2_000_000_000_000, 0, 18},
		{gasspend.ModeLive, "base", "0x02", agentpay.GasPurposePayout, 1_500_000_000_000, 0, 18},
		{gasspend.ModeLive, "solana", "s1", agentpay.GasPurposeRefund, 5_000, 2_039_280, 9},
		{gasspend.ModeLive, "solana", "s2", agentpay.GasPurposeClose, 5_000, -2_039_280, 9},
	} {
		p.db.Ent.GasSpend.Create().SetMode(g.mode).SetChain(g.chain).SetTxHash(g.hash).SetPurpose(g.purpose).
			SetFee(g.fee).SetRent(g.rent).SetDecimals(g.decimals).ExecX(ctx)
	}
	require.NoError(t, p.db.Close())

	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "gas"}, getenv, &out, os.Stderr))
	got := out.String()
	require.Regexp(t, `(?m)^live\s+base\s+2\s+0\.0000035 ETH\s+0 ETH\s+0\.0000035 ETH\s+0\.000000\s+0\.000000$`, got)
	require.Regexp(t, `(?m)^live\s+solana\s+2\s+0\.00001 SOL\s+0 SOL\s+0\.00001 SOL`, got)
	require.Contains(t, got, "live base by purpose:\n  payout        0.0000015 ETH\n  sweep         0.000002 ETH\n")
	require.Contains(t, got, "  close         -0.00203428 SOL\n  refund        0.00204428 SOL\n")

	require.Error(t, run(ctx, []string{"admin", "gas", "extra"}, getenv, &out, os.Stderr))
}

// TestAdminBooks prints the books of a configured base test chain: balanced
// after a recorded funding and an agent's send, then, once USDC reaches the
// treasury outside every record, a non-zero exit naming the treasury and
// that no record explains it.
func TestAdminBooks(t *testing.T) {
	ctx := context.Background()
	chain := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, NoDB: true, BlockTime: 50 * time.Millisecond})
	base := chain.EVM(chains.Base)
	dataDir := filepath.Join(t.TempDir(), "data")
	env := map[string]string{"DATA_DIR": dataDir, "LOG_LEVEL": "error", "MASTER_KEY": hex.EncodeToString(chain.MasterKey),
		"AGENT_NETWORK": "test", "CHAIN_BASE_TEST_RPC_URL": base.RPCURL, "CHAIN_BASE_TEST_USDC": base.USDC.Hex()}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"migrate"}, getenv, &out, os.Stderr))

	cfg, err := loadConfig(getenv)
	require.NoError(t, err)
	p, err := openPlatform(ctx, cfg, chain.MasterKey)
	require.NoError(t, err)
	defer p.db.Close()
	svc, err := p.service(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil, nil)
	require.NoError(t, err)
	fund := func(addr string, units int64) {
		h, err := base.Send(ctx, common.HexToAddress(addr), big.NewInt(units))
		require.NoError(t, err)
		require.NoError(t, svc.RecordFunding(ctx, agentpay.OutsideFunding{Chain: chains.Base, Mode: agentpay.ModeTest, Address: addr,
			Amount: big.NewInt(units), TxHash: h.Hex(), Source: agentpay.FundingFaucet}))
	}
	alice, err := svc.QuickRegister(ctx, "alice_books")
	require.NoError(t, err)
	bob, err := svc.QuickRegister(ctx, "bob_books")
	require.NoError(t, err)
	ws, err := svc.Wallets(ctx, alice.Agent)
	require.NoError(t, err)
	var aliceBase string
	for _, w := range ws.All {
		if w.Chain == string(chains.Base) {
			aliceBase = w.Address
		}
	}
	fund(aliceBase, 50_000_000)
	fund(chain.Treasury.EVMAddress, 10_000_000)
	res, _, err := svc.Send(ctx, alice.Agent, agentpay.SendRequest{ToUsername: bob.Agent.Username, AmountUSD: decimal.NewFromInt(20), Chain: "base"})
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status)
	waitBlock := func() {
		head, err := base.Client().BlockNumber(ctx)
		require.NoError(t, err)
		require.Eventually(t, func() bool { n, err := base.Client().BlockNumber(ctx); return err == nil && n > head }, 30*time.Second, 5*time.Millisecond)
	}
	waitBlock()

	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "books"}, getenv, &out, os.Stderr), out.String())
	got := out.String()
	require.Regexp(t, `(?m)^test\s+base\s+treasury\s+1\s+10\.020000\s+10\.020000\s+0\.000000\s+0$`, got)
	require.Regexp(t, `(?m)^test\s+base\s+deposit_addresses\s+0\s+0\.000000\s+0\.000000\s+0\.000000\s+0$`, got)
	require.Regexp(t, `(?m)^test\s+base\s+agent_wallets\s+2\s+49\.980000\s+49\.980000\s+0\.000000\s+0$`, got)
	require.Contains(t, got, "balanced: every holder holds exactly what its records say")

	// USDC reaches the treasury from no record.
	outside, err := base.Send(ctx, common.HexToAddress(chain.Treasury.EVMAddress), big.NewInt(1_500_000))
	require.NoError(t, err)
	waitBlock()
	out.Reset()
	err = run(ctx, []string{"admin", "books"}, getenv, &out, os.Stderr)
	require.ErrorIs(t, err, errBooksUnbalanced)
	got = out.String()
	require.Regexp(t, `(?m)^test\s+base\s+treasury\s+1\s+11\.520000\s+10\.020000\s+1\.500000\s+0$`, got)
	require.Contains(t, got, "NOT BALANCED: books: base test: treasury "+chain.Treasury.EVMAddress+" holds 1500000 more than recorded")
	require.Contains(t, got, "no record explains it")

	require.Error(t, run(ctx, []string{"admin", "books", "extra"}, getenv, &out, os.Stderr))

	// The operator records it by its transaction: the amount is read from
	// the chain, and the books balance again. The service's own transfers
	// and addresses it does not hold are refused.
	refused := map[string][]string{
		"its record counts it":             {"base", "test", chain.Treasury.EVMAddress, res.FeeTxHash},
		"not an address the service holds": {"base", "test", "0x000000000000000000000000000000000000dEaD", outside.Hex()},
		"paid 0x":                          {"base", "test", aliceBase, outside.Hex()},
		"expected live or test":            {"base", "staging", chain.Treasury.EVMAddress, outside.Hex()},
		"not available in live mode":       {"base", "live", chain.Treasury.EVMAddress, outside.Hex()},
	}
	for want, args := range refused {
		out.Reset()
		err := run(ctx, append([]string{"admin", "record-funding"}, args...), getenv, &out, os.Stderr)
		require.ErrorContains(t, err, want, "%v", args)
	}
	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "record-funding", "base", "test", chain.Treasury.EVMAddress, outside.Hex()}, getenv, &out, os.Stderr))
	require.Contains(t, out.String(), "recorded 1500000 base units paid to "+chain.Treasury.EVMAddress)
	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "books"}, getenv, &out, os.Stderr), out.String())
	require.Regexp(t, `(?m)^test\s+base\s+treasury\s+1\s+11\.520000\s+11\.520000\s+0\.000000\s+0$`, out.String())
	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "record-funding", "base", "test", chain.Treasury.EVMAddress, outside.Hex()}, getenv, &out, os.Stderr),
		"recording it again changes nothing")
	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "books"}, getenv, &out, os.Stderr), out.String())
}

// TestAdminCommandsDocumented holds the operator reference to the command
// table: every admin command runAdmin dispatches is in docs/operations.md
// with its arguments, and the reference names no command the table lacks.
func TestAdminCommandsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	require.NoError(t, err)
	known := map[string]bool{}
	for _, c := range adminCommands {
		known[c.name] = true
		require.Contains(t, string(doc), strings.TrimSpace(c.name+" "+c.args), "docs/operations.md does not document `agentpay admin %s`", c.name)
	}
	for _, m := range regexp.MustCompile("`agentpay admin ([a-z-]+)").FindAllStringSubmatch(string(doc), -1) {
		require.True(t, known[m[1]], "docs/operations.md documents `agentpay admin %s`, which is not a command", m[1])
	}
}
