package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/adapters"
	"agentpay/internal/testdb/freshdb"
	"agentpay/internal/treasury"
	"agentpay/internal/vault"
)

// webhookBody is a delivered event as a receiver parses it.
type webhookBody struct {
	ID        string         `json:"id"`
	Event     string         `json:"event"`
	Data      map[string]any `json:"data"`
	Timestamp string         `json:"timestamp"`
	Livemode  *bool          `json:"livemode"`
}

// verifiedWebhook checks a delivery as a receiver must (the signature,
// and the Standard Webhooks headers) and parses it with numbers kept exact.
func verifiedWebhook(t *testing.T, r *webhookReceiver, w receivedWebhook) webhookBody {
	t.Helper()
	require.True(t, r.ValidSignature(w), "signatures of %s", w.Body)
	require.Equal(t, "application/json", w.Header.Get("Content-Type"))
	require.Equal(t, w.EventID, w.Header.Get("webhook-id"))
	var b webhookBody
	dec := json.NewDecoder(bytes.NewReader(w.Body))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&b))
	ts, err := time.Parse(time.RFC3339, b.Timestamp)
	require.NoError(t, err, "timestamp is ISO 8601")
	require.Equal(t, time.UTC, ts.Location())
	require.NotNil(t, b.Livemode)
	return b
}

func requireNumber(t *testing.T, want string, got any, field string) {
	t.Helper()
	n, ok := got.(json.Number)
	require.True(t, ok, "%s is a JSON number, got %T %v", field, got, got)
	require.True(t, decimal.RequireFromString(want).Equal(decimal.RequireFromString(n.String())), "%s: want %s, got %s", field, want, n)
}

// TestCheckoutEndToEndOnEveryChain runs `agentpay dev` (API, worker and the
// five devnets in one process, on SQLite or, with TEST_DATABASE_URL, on
// PostgreSQL) and takes one payment on each chain as a merchant and its
// customers would: REST only, the customer paying from the devnet faucet's
// account. Each session must reach confirmed, the merchant's loopback
// receiver must get payment.detected, payment.confirmed and
// settlement.completed with a valid signature and every field of spec 6.3,
// and the merchant's settlement address must hold the net of every payment.
//
// The run holds every kind of secret, and its RPC URLs carry provider
// credentials: the live networks are devnets reached only through
// rpcProviders. After the test-mode payments it pays a live session, makes
// the calls agents make, provokes errors (keys in the wrong header, bad
// bodies, every live RPC endpoint going down) and then searches its logs,
// every answer, every webhook and River's job errors for every secret
// (secrets_test.go): none may show, other than a key in the one answer
// that hands it out.
func TestCheckoutEndToEndOnEveryChain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts seven devnets")
	}
	leaks := newLeakWatch()
	masterKey, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	leaks.addKey("MASTER_KEY", masterKey)
	adminKey := hex.EncodeToString(masterKey[:16]) + "-admin-key-of-the-e2e-run"
	leaks.addSecret("ADMIN_KEY", adminKey)
	dataDir := filepath.Join(t.TempDir(), "data")
	env := map[string]string{
		"DATA_DIR":             dataDir,
		"HTTP_ADDR":            "127.0.0.1:0",
		"DEV_BLOCK_TIME":       "200ms",
		"LOG_LEVEL":            "debug",
		"WEBHOOK_RETRY_DELAYS": "1s,1s,1s,1s,1s",
		// No WEBHOOK_ALLOW_PRIVATE: dev lets test-mode webhooks reach the
		// loopback receiver by default.
		"MASTER_KEY":   hex.EncodeToString(masterKey),
		"ADMIN_KEY":    adminKey,
		"DATABASE_URL": "file:" + filepath.Join(dataDir, "agentpay.db"),
		// Structured logs, searched for secrets like the text ones, and
		// metrics on a free port (metrics_test.go checks both).
		"LOG_FORMAT":   "json",
		"METRICS_ADDR": "127.0.0.1:0",
	}
	if freshdb.IsPostgres() {
		env["DATABASE_URL"] = withDatabasePassword(t, freshdb.URL(t), leaks)
	}
	v, err := vault.New(masterKey)
	require.NoError(t, err)
	tk, err := treasury.Derive(v, adapters.Families())
	require.NoError(t, err)
	live := startLiveChains(t, env, tk, leaks)
	base := leaks.proxy(t, startDev(t, env, &leaks.logs))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agentpay dev printed and logged:\n%s", leaks.logs.String())
		}
	})
	receiver := newWebhookReceiver(t)

	payeeKey, err := crypto.GenerateKey()
	require.NoError(t, err)
	payee := crypto.PubkeyToAddress(payeeKey.PublicKey).Hex()
	var reg struct {
		Merchant struct {
			ID string `json:"id"`
		} `json:"merchant"`
		Keys struct {
			TestSecretKey     string `json:"test_secret_key"`
			TestWebhookSecret string `json:"test_webhook_secret"`
			LiveSecretKey     string `json:"live_secret_key"`
			WebhookSecret     string `json:"webhook_secret"`
		} `json:"keys"`
	}
	status := postJSON(t, base+"/checkout/merchants/register", fmt.Sprintf(`{
		"name": "Every Chain Shop", "email": "ops@every.test", "webhook_url": %q,
		"settlement_address": %q, "settlement_chain": "base",
		"accepted_tokens": [{"chain":"base","token":"USDC"},{"chain":"arbitrum","token":"USDC"},
			{"chain":"ethereum","token":"USDC"},{"chain":"polygon","token":"USDC"},{"chain":"solana","token":"USDC"}]
	}`, receiver.URL(), payee), &reg)
	require.Equal(t, http.StatusCreated, status)
	receiver.SetSecret(reg.Keys.TestWebhookSecret) // the sessions are test mode's

	type paid struct {
		chain, sessionID, txHash, from, amount string
	}
	amounts := map[chains.Name]string{
		chains.Base: "12.5", chains.Arbitrum: "3.07", chains.Ethereum: "100", chains.Polygon: "0.5", chains.Solana: "42.42",
	}
	results := make(chan paid, len(chains.All))
	var wg sync.WaitGroup
	for _, chain := range chains.All {
		wg.Go(func() {
			amount := amounts[chain]
			var created struct {
				Session struct {
					ExternalID string `json:"external_id"`
				} `json:"session"`
			}
			code := doJSON(t, http.MethodPost, base+"/checkout/sessions", reg.Keys.TestSecretKey,
				fmt.Sprintf(`{"amount": %s, "currency": "USD", "description": "order on %s",
					"metadata": {"order_id": "ord-%s", "items": [1, 2], "nested": {"vip": true}}}`, amount, chain, chain), &created)
			if !assertStatus(t, http.StatusCreated, code, "create session on "+string(chain)) {
				return
			}
			sess := created.Session
			var sel struct {
				Address     string          `json:"address"`
				AmountToken json.RawMessage `json:"amount_token"`
			}
			code = doJSON(t, http.MethodPost, base+"/checkout/pay/"+sess.ExternalID+"/select", "",
				fmt.Sprintf(`{"chain": %q, "token": "USDC"}`, chain), &sel)
			if !assertStatus(t, http.StatusOK, code, "select "+string(chain)) {
				return
			}
			var fund struct {
				TxHash      string `json:"tx_hash"`
				FromAddress string `json:"from_address"`
			}
			code = doJSON(t, http.MethodPost, base+"/dev/faucet", "",
				fmt.Sprintf(`{"chain": %q, "address": %q, "amount_usd": %s}`, chain, sel.Address, sel.AmountToken), &fund)
			if !assertStatus(t, http.StatusOK, code, "pay on "+string(chain)) {
				return
			}
			results <- paid{chain: string(chain), sessionID: sess.ExternalID, txHash: fund.TxHash, from: fund.FromAddress, amount: amount}
		})
	}
	wg.Wait()
	close(results)
	sessions := map[string]paid{}
	for p := range results {
		sessions[p.sessionID] = p
	}
	require.Len(t, sessions, len(chains.All))

	// Every session confirmed through the worker, every event delivered.
	want := []string{"payment.detected", "payment.confirmed", "settlement.completed"}
	complete := func() bool {
		for id := range sessions {
			for _, kind := range want {
				if !receiver.HasAcked(id, kind) {
					return false
				}
			}
		}
		return true
	}
	for deadline := time.Now().Add(150 * time.Second); !complete() && time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
	}
	if !complete() {
		for id, p := range sessions {
			var st map[string]any
			doJSON(t, http.MethodGet, base+"/checkout/pay/"+id+"/status", "", "", &st)
			t.Logf("%s on %s: status %v, webhooks %s", id, p.chain, st, describeReceived(receiver.Acked(id)))
		}
		t.Fatal("not every session got payment.detected, payment.confirmed and settlement.completed")
	}

	for id, p := range sessions {
		var st struct {
			Status string `json:"status"`
		}
		require.Equal(t, http.StatusOK, doJSON(t, http.MethodGet, base+"/checkout/pay/"+id+"/status", "", "", &st))
		require.Equal(t, "confirmed", st.Status, p.chain)
	}

	seen := map[string]bool{}
	byKind := map[string]map[string]webhookBody{}
	for _, w := range receiver.Requests() {
		require.True(t, w.Acked)
		b := verifiedWebhook(t, receiver, w)
		require.False(t, seen[b.ID], "event %s delivered once to a healthy receiver", b.ID)
		seen[b.ID] = true
		require.False(t, *b.Livemode)
		id, _ := b.Data["session_external_id"].(string)
		if byKind[id] == nil {
			byKind[id] = map[string]webhookBody{}
		}
		_, dup := byKind[id][b.Event]
		require.False(t, dup, "%s sent once for %s", b.Event, id)
		byKind[id][b.Event] = b
	}

	netTotal := decimal.Zero
	for id, p := range sessions {
		for _, kind := range want {
			b := byKind[id][kind]
			d := b.Data
			require.Equal(t, kind, b.Event)
			require.Equal(t, id, d["session_external_id"], kind)
			require.Regexp(t, `^pay_`, d["payment_external_id"], kind)
			requireNumber(t, p.amount, d["amount_usd"], kind+" amount_usd on "+p.chain)
			requireNumber(t, p.amount, d["amount_token"], kind+" amount_token on "+p.chain)
			require.Equal(t, "USDC", d["token"], kind)
			require.Equal(t, p.chain, d["chain"], kind)
			require.Equal(t, p.txHash, d["tx_hash"], kind)
			require.True(t, strings.EqualFold(p.from, d["from_address"].(string)), "%s from_address %v, paid from %s", kind, d["from_address"], p.from)
			meta, err := json.Marshal(d["metadata"])
			require.NoError(t, err)
			require.JSONEq(t, fmt.Sprintf(`{"order_id": "ord-%s", "items": [1, 2], "nested": {"vip": true}}`, p.chain), string(meta), kind)
		}
		s := byKind[id]["settlement.completed"].Data
		gross := decimal.RequireFromString(p.amount)
		requireNumber(t, p.amount, s["gross_usd"], "gross_usd")
		fee := gross.Div(decimal.NewFromInt(1000)).Round(6)
		requireNumber(t, fee.String(), s["fee_usd"], "fee_usd")
		requireNumber(t, gross.Sub(fee).String(), s["net_usd"], "net_usd")
		require.Equal(t, "crypto_usdc", s["settlement_type"])
		require.Equal(t, "base", s["settlement_chain"])
		require.Equal(t, payee, s["settlement_address"])
		require.Regexp(t, `^0x[0-9a-f]{64}$`, s["payout_reference"])
		netTotal = netTotal.Add(gross.Sub(fee))
	}

	// The merchant's address on base holds every payment's net.
	var devChains []struct {
		Chain  string `json:"chain"`
		RPCURL string `json:"rpc_url"`
		USDC   string `json:"usdc"`
	}
	getJSON(t, base+"/dev/chains", &devChains)
	for _, c := range devChains {
		if c.Chain != "base" {
			continue
		}
		l := newTestEVMLedger(t, chains.Base, c.RPCURL, c.USDC)
		bal, err := l.Balance(context.Background(), payee)
		require.NoError(t, err)
		require.Equal(t, netTotal.Shift(6).BigInt().String(), bal.String())
	}

	// The books of test mode balance on every chain: each deposit address
	// swept, each treasury holding its starting liquidity, its sweeps and
	// fees less the payouts (all from base's). The admin key comes from
	// ADMIN_KEY; the banner does not show it.
	t.Run("books", func(t *testing.T) {
		require.NotContains(t, leaks.logs.String(), adminKey)
		b := readBooks(t, base, adminKey)
		tested := 0
		for _, c := range b.Chains {
			if c.Mode != "TEST" {
				continue
			}
			tested++
			for _, l := range c.Lines {
				require.Empty(t, l.Differences, "%s %s %s: %s", c.Chain, c.Mode, l.Holder, b.Error)
				require.Equal(t, l.OnChain, l.Records, "%s %s %s", c.Chain, c.Mode, l.Holder)
			}
		}
		require.Equal(t, len(chains.All), tested)
	})

	t.Run("metrics", func(t *testing.T) {
		paidOn := map[string]string{} // chain -> amount
		for _, p := range sessions {
			paidOn[p.chain] = p.amount
		}
		requireCheckoutMetrics(t, leaks.logs.String(), paidOn, leaks)
	})

	payLiveSession(t, base, reg.Keys.LiveSecretKey, live)
	// Live mode's books balance too: the live treasury started with no
	// USDC, so the payment is on its deposit address, or swept to the
	// treasury, or paid out less the fee the treasury keeps.
	waitFor(t, time.Minute, func() bool { return readBooks(t, base, adminKey).Error == "" }, "the books balanced after the live payment")
	liveBase := false
	for _, c := range readBooks(t, base, adminKey).Chains {
		if c.Mode == "LIVE" && c.Chain == "base" {
			liveBase = true
			require.Equal(t, "TREASURY", c.Lines[0].Holder)
			require.Equal(t, "DEPOSIT_ADDRESSES", c.Lines[1].Holder)
			require.Contains(t, []int64{7_250_000, 7_250}, c.Lines[0].OnChain+c.Lines[1].OnChain)
		}
	}
	require.True(t, liveBase)
	live.requireCredentialsAccepted(t)
	agentCalls(t, base)
	provokeErrors(t, base, reg.Keys.TestSecretKey, reg.Keys.LiveSecretKey, reg.Keys.WebhookSecret, reg.Keys.TestWebhookSecret)

	// Every live RPC endpoint goes down: the scans, the readiness probe
	// and the chain reads fail with the libraries' errors, which name the
	// URL they were given. Readiness reads the head cache, so it follows
	// within HEAD_CACHE_TTL (1 s); a probe every 600 ms stays well within
	// PROBE_RATE_LIMIT.
	live.Down()
	waitFor(t, 30*time.Second, func() bool {
		time.Sleep(600 * time.Millisecond)
		return doJSON(t, http.MethodGet, base+"/readyz", "", "", nil) == http.StatusServiceUnavailable
	}, "readiness to fail with every live chain down")
	waitFor(t, time.Minute, func() bool {
		time.Sleep(250 * time.Millisecond)
		jobErrors := riverErrors(t, env["DATABASE_URL"])
		for _, c := range chains.All {
			if !strings.Contains(jobErrors, "live/"+string(c)) {
				return false
			}
		}
		return true
	}, "every live chain's scan failed")
	require.Contains(t, leaks.logs.String(), "connection refused", "the chain reads' errors are logged")

	t.Run("JSON logs carry request and job ids", func(t *testing.T) {
		requireJSONLogIDs(t, leaks.logs.String())
	})

	t.Run("no secret in logs, answers, webhooks or job errors", func(t *testing.T) {
		issuer := leaks.issuedSecrets()
		leaks.addWalletKeys(t, env["DATABASE_URL"], masterKey)
		leaks.requireNoLeak(t, issuer, receiver.Requests(), riverErrors(t, env["DATABASE_URL"]))
	})
}

// payLiveSession pays a live session on the live base (a devnet behind its
// provider) and waits until it is confirmed: the live networks work
// through credentialed URLs.
func payLiveSession(t *testing.T, base, liveKey string, live *liveChains) {
	t.Helper()
	var created struct {
		Session struct {
			ExternalID string `json:"external_id"`
		} `json:"session"`
	}
	require.Equal(t, http.StatusCreated, doJSON(t, http.MethodPost, base+"/checkout/sessions", liveKey,
		`{"amount": 7.25, "currency": "USD", "description": "live order"}`, &created))
	id := created.Session.ExternalID
	var sel struct {
		Address         string      `json:"address"`
		AmountBaseUnits json.Number `json:"amount_base_units"`
	}
	require.Equal(t, http.StatusOK, doJSON(t, http.MethodPost, base+"/checkout/pay/"+id+"/select", "",
		`{"chain": "base", "token": "USDC"}`, &sel))
	_, err := live.evm.Send(t.Context(), common.HexToAddress(sel.Address), big.NewInt(7_250_000))
	require.NoError(t, err)
	waitFor(t, time.Minute, func() bool {
		var st struct {
			Status string `json:"status"`
		}
		return doJSON(t, http.MethodGet, base+"/checkout/pay/"+id+"/status", "", "", &st) == http.StatusOK && st.Status == "confirmed"
	}, "the live session confirmed")
}

// agentCalls registers two agents and makes the calls an agent makes with
// its key, regenerating it on the way.
func agentCalls(t *testing.T, base string) {
	t.Helper()
	var a, b struct {
		APIKey        string `json:"api_key"`
		WalletAddress string `json:"wallet_address"`
	}
	require.Equal(t, http.StatusCreated, doJSON(t, http.MethodPost, base+"/agents/quick-register", "", `{"username": "leak_sender"}`, &a))
	require.Equal(t, http.StatusCreated, doJSON(t, http.MethodPost, base+"/agents/quick-register", "", `{"username": "leak_receiver"}`, &b))
	for _, path := range []string{"/agents/me/profile", "/agents/me/wallets", "/agents/me/wallet/balance", "/agents/me/limits"} {
		require.Equal(t, http.StatusOK, doAgent(t, http.MethodGet, base+path, a.APIKey, ""), path)
	}
	// Too poor to send: a refusal, not a transfer.
	require.Equal(t, http.StatusBadRequest, doAgent(t, http.MethodPost, base+"/agents/me/wallet/send", a.APIKey,
		`{"to_username": "leak_receiver", "amount_usd": 1}`))
	var regen struct {
		APIKey string `json:"api_key"`
	}
	req := func() int {
		return doAgentJSON(t, http.MethodPost, base+"/agents/me/regenerate-api-key", a.APIKey, "", &regen)
	}
	require.Equal(t, http.StatusOK, req())
	require.Equal(t, http.StatusUnauthorized, doAgent(t, http.MethodGet, base+"/agents/me/profile", a.APIKey, ""), "the old key")
	require.Equal(t, http.StatusOK, doAgent(t, http.MethodGet, base+"/agents/me/profile", regen.APIKey, ""))
	require.Equal(t, http.StatusOK, doAgent(t, http.MethodGet, base+"/agents/treasury", "", ""))
}

// provokeErrors sends what a confused or hostile client sends: each key in
// another's header, bad bodies and bad GraphQL.
func provokeErrors(t *testing.T, base, testKey, liveKey, webhookSecret, testWebhookSecret string) {
	t.Helper()
	for _, key := range []string{liveKey, webhookSecret, testWebhookSecret, testKey[:len(testKey)-1]} {
		require.Equal(t, http.StatusUnauthorized, doAgent(t, http.MethodGet, base+"/agents/me/profile", key, ""))
	}
	for _, key := range []string{webhookSecret, testWebhookSecret, testKey + "x", strings.Replace(liveKey, "live", "test", 1)} {
		require.Equal(t, http.StatusUnauthorized, doJSON(t, http.MethodGet, base+"/checkout/merchants/me", key, "", nil))
	}
	for _, body := range []string{`{"amount": "12", "currency": "USD"}`, `{"amount": 1e400}`, `{"amount":`, `[]`, `{"amount": 5, "currency": "USD", "secret": 1}`} {
		code := doJSON(t, http.MethodPost, base+"/checkout/sessions", testKey, body, nil)
		require.True(t, code == http.StatusUnprocessableEntity || code == http.StatusBadRequest, "%s: %d", body, code)
	}
	require.Equal(t, http.StatusUnprocessableEntity, doJSON(t, http.MethodPost, base+"/checkout/merchants/register", "",
		`{"name": "x", "email": "not an address", "webhook_url": "ftp://hooks"}`, nil))
	require.Equal(t, http.StatusBadRequest, doJSON(t, http.MethodPost, base+"/agents/register", "",
		`{"username": "nobody_here", "wallet_address": "0x0000000000000000000000000000000000000001", "signature": "0x00", "signature_type": "eip712"}`, nil))
	for _, h := range []string{"X-Checkout-Secret-Key", "X-Agent-Key"} {
		for _, key := range []string{testKey, liveKey, webhookSecret, testWebhookSecret} {
			req, err := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(`{"query": "{ me { id } merchant { id } nonsense }"}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(h, key)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
}

// doAgent sends a request with an agent key and answers the status.
func doAgent(t *testing.T, method, url, key, body string) int {
	return doAgentJSON(t, method, url, key, body, nil)
}

func doAgentJSON(t *testing.T, method, url, key, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("X-Agent-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
	return resp.StatusCode
}

// startDev runs `agentpay dev` in this process with env and answers its
// base URL; it stops with the test. What it prints and logs goes to out.
func startDev(t *testing.T, env map[string]string, out io.Writer) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev"}, func(k string) string { return env[k] }, pw, out)
		_ = pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("agentpay dev did not stop")
		}
	})
	// readBanner's reader drains the pipe to the end, through out.
	banner := readBanner(t, io.TeeReader(pr, out))
	addr := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(banner)
	require.Len(t, addr, 2, banner)
	return addr[1]
}

// doJSON sends a JSON request (with the merchant secret key when given) and
// decodes a JSON answer into out; it answers the status.
func doJSON(t *testing.T, method, url, secretKey, body string, out any) int {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Error(err)
		return 0
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if secretKey != "" {
		req.Header.Set("X-Checkout-Secret-Key", secretKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 && json.Unmarshal(raw, out) != nil {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// assertStatus reports a wrong status without stopping the goroutine's
// caller (require must not run off the test goroutine).
func assertStatus(t *testing.T, want, got int, what string) bool {
	if want != got {
		t.Errorf("%s: status %d, want %d", what, got, want)
		return false
	}
	return true
}

// e2eBooks is the books query's answer, as the end-to-end run reads it.
type e2eBooks struct {
	Error  string
	Chains []struct {
		Chain, Mode string
		Lines       []struct {
			Holder           string
			OnChain, Records int64
			Differences      []any
		}
	}
}

// adminGraphQL posts an admin GraphQL query with the admin key and
// decodes the whole answer into out.
func adminGraphQL(t *testing.T, base, adminKey, query string, out any) {
	t.Helper()
	body, err := json.Marshal(map[string]string{"query": query})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Key", adminKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
}

// readBooks asks the admin GraphQL query for the books.
func readBooks(t *testing.T, base, adminKey string) e2eBooks {
	t.Helper()
	var out struct {
		Data struct {
			Books struct {
				Error  *string
				Chains json.RawMessage
			}
		}
		Errors []any
	}
	adminGraphQL(t, base, adminKey, `{ books { error chains { chain mode lines { holder onChain records differences { address explainedBy { kind id } } } } } }`, &out)
	require.Empty(t, out.Errors)
	var b e2eBooks
	require.NoError(t, json.Unmarshal(out.Data.Books.Chains, &b.Chains))
	if out.Data.Books.Error != nil {
		b.Error = *out.Data.Books.Error
	}
	return b
}
