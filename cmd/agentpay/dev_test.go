package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/evm"
	"agentpay/chains/solana"
)

// TestDevFromEmptyDataDir runs `agentpay dev` as a new user would: an empty
// DATA_DIR, nothing else set. It must print its address and the devnet RPC
// URLs, and the faucet must pay real USDC on all five chains.
func TestDevFromEmptyDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five devnets")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	env := map[string]string{
		"DATA_DIR":       dataDir,
		"HTTP_ADDR":      "127.0.0.1:0",
		"DEV_BLOCK_TIME": "200ms",
		"LOG_LEVEL":      "warn",
		"METRICS_ADDR":   "127.0.0.1:0", // not dev's fixed default: tests run side by side
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev"}, func(k string) string { return env[k] }, pw, os.Stderr)
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

	banner := readBanner(t, pr)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	addr := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(banner)
	require.Len(t, addr, 2, banner)
	base := addr[1]

	_, err := os.Stat(filepath.Join(dataDir, "master.key"))
	require.NoError(t, err, "dev generates its master key into DATA_DIR")

	var devChains []struct {
		Chain   string  `json:"chain"`
		RPCURL  string  `json:"rpc_url"`
		ChainID *uint64 `json:"chain_id"`
		USDC    string  `json:"usdc"`
	}
	getJSON(t, base+"/dev/chains", &devChains)
	require.Len(t, devChains, 5)
	for _, c := range devChains {
		require.Contains(t, banner, c.RPCURL, "the banner lists every devnet RPC URL")
		require.Equal(t, c.Chain != "solana", c.ChainID != nil)
	}

	resp := getStatus(t, base+"/readyz")
	require.Equal(t, http.StatusOK, resp)

	// Without SMTP_URL mail is caught: the banner says where to read it.
	require.Contains(t, banner, base+"/dev/mail?to=")
	var inbox map[string]any
	getJSON(t, base+"/dev/mail?to=ana%40example.com", &inbox)
	require.Equal(t, map[string]any{"messages": []any{}}, inbox)

	for _, c := range devChains {
		t.Run(c.Chain, func(t *testing.T) {
			var address string
			var ledger chains.Ledger
			var err error
			if c.Chain == "solana" {
				_, address, err = solana.NewKey()
				require.NoError(t, err)
				ledger = newTestSolanaLedger(t, c.RPCURL, c.USDC)
			} else {
				_, address, err = evm.NewKey()
				require.NoError(t, err)
				ledger = newTestEVMLedger(t, chains.Name(c.Chain), c.RPCURL, c.USDC)
			}
			body := `{"chain":"` + c.Chain + `","address":"` + address + `","amount_usd":25.5}`
			var out map[string]any
			status := postJSON(t, base+"/dev/faucet", body, &out)
			require.Equal(t, http.StatusOK, status, out)
			require.Equal(t, c.Chain, out["chain"])
			require.Equal(t, address, out["address"])
			require.Equal(t, 25.5, out["amount_usd"])
			require.NotEmpty(t, out["tx_hash"])
			require.NotEmpty(t, out["from_address"])

			bal, err := ledger.Balance(context.Background(), address)
			require.NoError(t, err)
			require.Equal(t, big.NewInt(25_500_000), bal, "the faucet answers once the transfer is included")
		})
	}

	t.Run("bad requests send nothing", func(t *testing.T) {
		_, address, err := evm.NewKey()
		require.NoError(t, err)
		bad := []string{
			`{"chain":"dogecoin","address":"` + address + `","amount_usd":1}`,
			`{"chain":"base","address":"0x1234","amount_usd":1}`,
			`{"chain":"base","address":"` + address + `","amount_usd":0}`,
			`{"chain":"base","address":"` + address + `","amount_usd":-3}`,
			`{"chain":"base","address":"` + address + `","amount_usd":1.0000001}`,
			`{"chain":"base","address":"` + address + `","amount_usd":"5"}`,
			`{"chain":"solana","address":"` + address + `","amount_usd":1}`,
			`{"chain":"base","address":"` + address + `"`,
		}
		for _, body := range bad {
			var out map[string]any
			status := postJSON(t, base+"/dev/faucet", body, &out)
			require.Equal(t, http.StatusUnprocessableEntity, status, body)
			require.NotEmpty(t, out["detail"], body)
			require.Len(t, out, 1, "an error body is {detail} only")
		}
		for _, c := range devChains {
			if c.Chain != "base" {
				continue
			}
			bal, err := newTestEVMLedger(t, chains.Base, c.RPCURL, c.USDC).Balance(context.Background(), address)
			require.NoError(t, err)
			require.Zero(t, bal.Sign())
		}
	})

	// The books balance on every devnet: the treasury's starting USDC is
	// recorded as a funding; they answer the admin key the banner shows,
	// and nothing else.
	t.Run("books", func(t *testing.T) {
		key := regexp.MustCompile(`X-Admin-Key: ([0-9a-f]{64}) `).FindStringSubmatch(banner)
		require.Len(t, key, 2, banner)
		books := func(adminKey string) map[string]any {
			var out map[string]any
			adminGraphQL(t, base, adminKey, `{ books { balanced error chains { chain mode lines { holder onChain records } } } }`, &out)
			return out
		}
		// An agent's wallet paid by the faucet, which records it.
		var reg struct {
			Wallets []struct{ Address, Chain string } `json:"wallets"`
		}
		require.Equal(t, http.StatusCreated, postJSON(t, base+"/agents/quick-register", `{"username":"dev_books_agent"}`, &reg))
		funded := 0
		for _, w := range reg.Wallets {
			var paid map[string]any
			require.Equal(t, http.StatusOK, postJSON(t, base+"/dev/faucet", `{"chain":"`+w.Chain+`","address":"`+w.Address+`","amount_usd":5}`, &paid), paid)
			funded++
		}
		require.Equal(t, 2, funded, "solana and base")

		out := books(key[1])
		require.Nil(t, out["errors"], out)
		b := out["data"].(map[string]any)["books"].(map[string]any)
		require.Equal(t, true, b["balanced"], b["error"])
		require.Len(t, b["chains"], 5)
		for _, c := range b["chains"].([]any) {
			chain := c.(map[string]any)
			lines := chain["lines"].([]any)
			treasury := lines[0].(map[string]any)
			require.Equal(t, "TREASURY", treasury["holder"])
			require.Equal(t, float64(1_000_000_000_000), treasury["records"], "1,000,000 USDC of liquidity: %v", c)
			if chain["chain"] == "base" || chain["chain"] == "solana" {
				agents := lines[2].(map[string]any)
				require.Equal(t, "AGENT_WALLETS", agents["holder"])
				require.Equal(t, float64(5_000_000), agents["onChain"], c)
			}
		}
		bad := books(strings.Repeat("0", 64))
		require.Equal(t, "UNAUTHENTICATED", bad["errors"].([]any)[0].(map[string]any)["extensions"].(map[string]any)["code"])
	})

	// An agent gets the dev partner's attestation and verify-partner
	// accepts it, offline (devpartner_test.go).
	t.Run("dev partner", func(t *testing.T) { devPartnerFlow(t, base, banner) })

	// /mcp is mounted: an MCP client with an agent's key lists its tools.
	t.Run("mcp", func(t *testing.T) { devMCPFlow(t, base, banner) })

	// The sandbox card issuer is dev's default: a card request is refused
	// for what is missing (not 503), and /dev/card/charge plays the card
	// network (the whole flow: app's TestCardApprovalInBrowser).
	t.Run("dev cards", func(t *testing.T) {
		require.Contains(t, banner, base+"/dev/card/charge")
		var reg struct {
			APIKey string `json:"api_key"`
		}
		require.Equal(t, http.StatusCreated, postJSON(t, base+"/agents/quick-register", `{"username":"dev_card_agent"}`, &reg))
		req, err := http.NewRequest(http.MethodPost, base+"/agents/me/pairings/card/request-purchase",
			strings.NewReader(`{"amount_usd":5,"merchant_name":"Acme","description":"x"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Agent-Key", reg.APIKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var refused map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&refused))
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, refused)
		require.Contains(t, refused["detail"], "no approved pairing")

		var charge map[string]any
		require.Equal(t, http.StatusOK, postJSON(t, base+"/dev/card/charge",
			`{"card_number":"4000000000000002","exp_month":1,"exp_year":2030,"cvc":"123","amount_usd":1,"merchant_name":"Acme"}`, &charge))
		require.Equal(t, false, charge["approved"])
		require.Equal(t, "unknown card number", charge["decline_reason"])
	})

	// A person signs in to the app as in a browser: the form mails a link,
	// /dev/mail shows it, its page's form opens a session, and the session
	// cookie and the page's CSRF token read the viewer from /graphql.
	t.Run("app sign-in", func(t *testing.T) {
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		browser := &http.Client{Jar: jar}
		formToken := regexp.MustCompile(`name="form_token" value="([^"]+)"`)
		page := func(resp *http.Response, err error) string {
			t.Helper()
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
			return string(b)
		}
		form := page(browser.Get(base + "/app/signin"))
		page(browser.PostForm(base+"/app/signin", url.Values{"email": {"zed@example.com"}, "form_token": {formToken.FindStringSubmatch(form)[1]}}))
		var link string
		require.Eventually(t, func() bool {
			var inbox struct{ Messages []struct{ Links []string } }
			getJSON(t, base+"/dev/mail?to=zed%40example.com", &inbox)
			if len(inbox.Messages) == 0 {
				return false
			}
			// APP_URL follows BASE_URL, which HTTP_ADDR's port 0 leaves
			// unknown: the path is the link's.
			l := inbox.Messages[0].Links[0]
			link = base + l[strings.Index(l, "/app/"):]
			return true
		}, 30*time.Second, 100*time.Millisecond, "the sign-in mail was not caught")
		form = page(browser.Get(link))
		home := page(browser.PostForm(link, url.Values{"username": {"zed_human"}, "form_token": {formToken.FindStringSubmatch(form)[1]}}))
		csrf := regexp.MustCompile(`data-csrf="([^"]+)"`).FindStringSubmatch(home)
		require.Len(t, csrf, 2, home)
		req, err := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(`{"query":"{ viewer { username email } }"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", csrf[1])
		body := page(browser.Do(req))
		require.JSONEq(t, `{"data":{"viewer":{"username":"zed_human","email":"zed@example.com"}}}`, body)
	})
}

// readBanner reads the start banner up to the devnet list's end.
func readBanner(t *testing.T, r io.Reader) string {
	t.Helper()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var b strings.Builder
	devnets := 0
	timeout := time.After(90 * time.Second)
	for devnets < 5 {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "agentpay dev exited; printed:\n%s", b.String())
			b.WriteString(l + "\n")
			if strings.Contains(l, "http://127.0.0.1:") && strings.Contains(l, "USDC") {
				devnets++
			}
		case <-timeout:
			t.Fatalf("no banner; printed:\n%s", b.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return b.String()
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func postJSON(t *testing.T, url, body string, out any) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewBufferString(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	return resp.StatusCode
}

// Read-only ledgers: balances are read straight from the devnets, not
// through the service under test.
func newTestEVMLedger(t *testing.T, name chains.Name, rpcURL, usdc string) chains.Ledger {
	t.Helper()
	l, err := evm.New(context.Background(), evm.Config{Chain: name, RPCURL: rpcURL, USDC: usdc})
	require.NoError(t, err)
	return l
}

func newTestSolanaLedger(t *testing.T, rpcURL, mint string) chains.Ledger {
	t.Helper()
	key, _, err := solana.NewKey()
	require.NoError(t, err)
	l, err := solana.New(context.Background(), solana.Config{RPCURL: rpcURL, Mint: mint, FeePayer: key})
	require.NoError(t, err)
	return l
}

// TestDevBannerPointsMerchantsToSignUp: the dev banner names the app's
// merchant sign-up page (issue 27 item 5), as a person running `agentpay
// dev` to try selling looks for it there.
func TestDevBannerPointsMerchantsToSignUp(t *testing.T) {
	var b strings.Builder
	printDevBanner(&b, "127.0.0.1:8080", false, nil, agentpay.TreasuryKeys{}, false, "  app:        http://localhost:8080/app", "http://localhost:8080/app", "", "key")
	require.Contains(t, b.String(), "merchants:  sign up at http://localhost:8080/app/merchants/new")
}
