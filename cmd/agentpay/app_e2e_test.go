package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/evm"
	"agentpay/internal/testdb/freshdb"
	"agentpay/internal/testenv"
)

// TestAppEndToEnd runs `agentpay dev` (API, worker, devnets and the mail
// catcher in one process) and takes a person through the human app in
// headless Chromium while agents use the REST API, as issue 11 tells it:
// an agent invites an address, the person follows the link read from
// /dev/mail, signs up and is paired (the agent's list and subscription say
// approved); the person verifies their identity on the sandbox
// provider's page and the agent sees kyc_verified; the agent sends 10 USDC
// and the open page shows 9.99 arrive without a reload; the person
// registers a passkey in settings, signs out and signs in with it, and
// withdraws to an external devnet address with the passkey's step-up (the
// session alone is refused), which receives it on chain; a
// second agent's request appears live, the person
// denies it and the agent is told on its subscription and in its list;
// revoking the first agent's pairing is told the same way.
//
// The app is served at http://localhost:<port>: WebAuthn refuses an IP
// address as relying party, and the links in the mails must name the
// address the browser uses.
func TestAppEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five devnets and Chromium")
	}
	base := startAppDev(t, nil)
	bctx := testenv.StartBrowser(t)

	ana := registerTestAgent(t, base, "ana_agent")
	anaEvents := subscribeAgentEvents(t, base, ana.key)
	faucet(t, base, "base", ana.wallets["base"], "50")

	// The invitation: the mail is caught, its link opens the sign-up page.
	var invite struct {
		InviteURL string `json:"invite_url"`
	}
	require.Equal(t, http.StatusCreated, doAgentJSON(t, http.MethodPost, base+"/agents/me/invite-human", ana.key,
		`{"email": "maria@example.com"}`, &invite))
	link := caughtLinkTo(t, base, "maria@example.com", "/app/invite/inv_")
	require.NotEqual(t, invite.InviteURL, link, "only the mail carries the link that proves the address")
	require.True(t, strings.HasPrefix(invite.InviteURL, base+"/app/invite/"), "the agent gets the invitation's page: %s", invite.InviteURL)

	tab, cancelTab := chromedp.NewContext(bctx)
	testenv.RefuseCSPViolations(t, tab)
	defer cancelTab()
	ctx, cancel := context.WithTimeout(tab, 4*time.Minute)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(`#signup`),
		chromedp.SendKeys(`input[name="username"]`, "maria"),
		chromedp.SendKeys(`input[name="display_name"]`, "Maria"),
		clickJS(`#signup`),
	), "sign up from the invitation")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(`#total`),
		waitJS(`document.getElementById("total") && document.getElementById("total").textContent === "0.00"`),
		waitJS(`[...document.querySelectorAll("#paired li")].some(li => li.textContent.includes("ana_agent"))`),
	), "the home page after signing up")

	pairing := agentPairing(t, base, ana.key)
	require.Equal(t, "approved", pairing.Status)
	require.Equal(t, "maria", pairing.Username)
	require.Equal(t, "pairing.approved", anaEvents.wait(t, "pairing.approved")["kind"])
	require.False(t, pairing.KYCVerified)

	// Identity verification through the sandbox provider's hosted page,
	// whose signed callback reaches the service over HTTP: the page shows
	// verified on return, and the agent sees it on the pairing.
	require.NoError(t, chromedp.Do(ctx,
		waitJS(`document.getElementById("identity-status").textContent === "not started"`),
		clickJS(`#verify-identity`),
		chromedp.WaitVisible(`#kyc-verified`),
	), "start identity verification")
	require.NoError(t, chromedp.Do(ctx,
		clickJS(`#kyc-verified`),
	), "choose verified on the provider's page")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(`#total`),
		waitJS(`document.getElementById("identity-status").textContent === "verified"`),
		waitJS(`document.getElementById("verify-identity").hidden`),
	), "back in the app, verified")
	require.True(t, agentPairing(t, base, ana.key).KYCVerified, "the agent sees the verified human")

	// 10 USDC to the person: the open page shows 9.99 arrive (fee 0.01).
	var sent struct {
		Status string `json:"status"`
	}
	require.Equal(t, http.StatusOK, doAgentJSON(t, http.MethodPost, base+"/agents/me/wallet/send-to-user", ana.key,
		`{"to_username": "maria", "amount_usd": 10, "memo": "for the groceries"}`, &sent))
	require.Equal(t, "completed", sent.Status)
	require.NoError(t, chromedp.Do(ctx,
		waitJS(`document.getElementById("total").textContent === "9.99"`),
		waitJS(`[...document.querySelectorAll("#received li")].some(li => li.textContent.includes("9.99 USDC from ana_agent"))`),
	), "the transfer arrives on the open page")

	// A passkey (Chromium's virtual authenticator) registered in settings;
	// signed out, the person signs in with it.
	_, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{})
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
		Options: &webauthn.VirtualAuthenticatorOptions{
			Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21,
			Transport: webauthn.AuthenticatorTransportInternal, HasResidentKey: true, HasUserVerification: true,
			IsUserVerified: true, AutomaticPresenceSimulation: true,
		}})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		clickJS(`#settings-link`),
		chromedp.WaitVisible(`#sessions li`),
		chromedp.SetValue(`#passkey-name`, "Phone"),
		clickJS(`#add-passkey`),
		waitJS(`[...document.querySelectorAll("#passkeys li")].some(li => li.textContent.includes("Phone"))`),
		clickJS(`#home-link`),
		chromedp.WaitVisible(`form[action$="/signout"] button[type=submit]`),
		clickJS(`form[action$="/signout"] button[type=submit]`),
	), "register a passkey, sign out")
	// Clicked from the page's script once it has loaded: the sign-out's
	// redirects can replace the document under a node chromedp found.
	require.NoError(t, chromedp.Do(ctx,
		waitJS(`document.readyState === "complete" && !!document.getElementById("passkey-signin")`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("passkey-signin").click()`),
	), "sign in with the passkey")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(`#total`),
		waitJS(`document.getElementById("username").textContent === "maria"`),
		waitJS(`document.getElementById("total").textContent === "9.99"`),
	), "home again, by the passkey")

	// A withdrawal to an external devnet address: the balance moves on
	// chain (4 USDC: 3.996 delivered, 0.004 to the treasury). The signed-in
	// session alone cannot withdraw: the page's own GraphQL request without
	// the step-up is refused; the form takes it (the passkey's assertion,
	// which the virtual authenticator answers), bound to this withdrawal.
	_, external, err := evm.NewKey()
	require.NoError(t, err)
	bare, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.getElementById("app").dataset.graphql, {method: "POST",
		credentials: "same-origin", headers: {"Content-Type": "application/json", "X-CSRF-Token": document.getElementById("app").dataset.csrf},
		body: JSON.stringify({query: "mutation($in: WithdrawInput!) { withdraw(input: $in) { status } }",
			variables: {in: {chain: "base", toAddress: "`+external+`", amountUsd: "4"}}})}).then(r => r.json()).then(r => r.errors[0].extensions.code)`,
		chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Equal(t, "FORBIDDEN", bare, "no withdrawal without the step-up")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(`#withdraw-form select[name=chain]`, "base"),
		chromedp.SendKeys(`#withdraw-form input[name=address]`, external),
		chromedp.SendKeys(`#withdraw-form input[name=amount]`, "4"),
		clickJS(`#withdraw-form button[type=submit]`),
		waitJS(`document.getElementById("confirm-dialog") && document.getElementById("confirm-dialog").open`),
		clickJS(`#confirm-ok`),
		waitJS(`document.getElementById("withdraw-result").dataset.status === "completed"`),
		waitJS(`document.getElementById("total").textContent === "5.99"`),
	), "withdraw")
	var devChains []struct {
		Chain, USDC string
		RPCURL      string `json:"rpc_url"`
	}
	getJSON(t, base+"/dev/chains", &devChains)
	for _, c := range devChains {
		if c.Chain == "base" {
			bal, err := newTestEVMLedger(t, chains.Base, c.RPCURL, c.USDC).Balance(context.Background(), external)
			require.NoError(t, err)
			require.Equal(t, big.NewInt(3_996_000), bal, "the external address holds what was delivered")
		}
	}

	// A second agent asks to pair: the request appears on the open page;
	// denied there, the agent is told.
	bob := registerTestAgent(t, base, "bob_agent")
	bobEvents := subscribeAgentEvents(t, base, bob.key)
	require.Equal(t, http.StatusCreated, doAgentJSON(t, http.MethodPost, base+"/agents/me/pairings/request", bob.key,
		`{"user_id": "`+pairing.UserID+`", "message": "I would like to pay your bills"}`, nil))
	bobRequest := `[...document.querySelectorAll("#requests li.request")].find(li => li.textContent.includes("bob_agent"))`
	require.NoError(t, chromedp.Do(ctx,
		waitJS(bobRequest+` !== undefined`),
		chromedp.Evaluate[chromedp.Void](bobRequest+`.querySelector('button[data-decision="DENY"]').click()`),
		waitJS(bobRequest+` === undefined`),
	), "deny the second agent's request live")
	denied := bobEvents.wait(t, "pairing.denied")
	require.Equal(t, "denied", denied["data"].(map[string]any)["status"])
	require.Equal(t, "denied", agentPairing(t, base, bob.key).Status)

	// Revoking the first agent's pairing is told the same way.
	anaPaired := `[...document.querySelectorAll("#paired li")].find(li => li.textContent.includes("ana_agent"))`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](anaPaired+`.querySelector('button[data-decision="REVOKE"]').click()`),
		waitJS(anaPaired+` === undefined`),
	), "revoke the first agent")
	require.Equal(t, "revoked", anaEvents.wait(t, "pairing.revoked")["data"].(map[string]any)["status"])
	require.Equal(t, "revoked", agentPairing(t, base, ana.key).Status)
}

// startAppDev runs `agentpay dev` for a browser test, with extra settings
// over the defaults below, on the test's database, and answers its base
// URL. It serves at http://localhost:<port>: WebAuthn refuses an IP address
// as relying party, and the links in the mails must name the address the
// browser uses. What it printed and logged is shown when the test fails.
func startAppDev(t *testing.T, extra map[string]string) string {
	port := freePort(t)
	env := map[string]string{
		"DATA_DIR":       filepath.Join(t.TempDir(), "data"),
		"HTTP_ADDR":      "127.0.0.1:" + port,
		"BASE_URL":       "http://localhost:" + port,
		"DEV_BLOCK_TIME": "200ms",
		"LOG_LEVEL":      "warn",
		"METRICS_ADDR":   "127.0.0.1:0",
	}
	if freshdb.IsPostgres() {
		env["DATABASE_URL"] = freshdb.URL(t)
	}
	for k, v := range extra {
		env[k] = v
	}
	var logs lockedBuffer
	startDev(t, env, &logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agentpay dev printed and logged:\n%s", logs.String())
		}
	})
	return "http://localhost:" + port
}

// freePort answers a loopback port free now, for a server that must know
// its address before it listens (its links carry it).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// waitJS waits until a JavaScript expression holds on the page. It asks
// again after an error: a page navigating (a form's redirects, the app's
// own location changes) destroys the context an evaluation runs in, and
// the expression may throw until the page it reads has loaded.
func waitJS(cond string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		deadline := time.Now().Add(45 * time.Second)
		var last error
		for time.Now().Before(deadline) {
			ok, err := chromedp.Evaluate[bool]("!!("+cond+")")(ctx, t)
			if err == nil && ok {
				return chromedp.Void{}, nil
			}
			if ctx.Err() != nil {
				return chromedp.Void{}, ctx.Err()
			}
			last = err
			time.Sleep(100 * time.Millisecond)
		}
		return chromedp.Void{}, fmt.Errorf("waiting for %s: last error %v", cond, last)
	}
}

// clickJS clicks the element of a CSS selector from the page's script once
// the page has loaded and holds it: a node chromedp found can be replaced
// by a redirect before its click lands ("Could not find node").
func clickJS(selector string) chromedp.Action[chromedp.Void] {
	sel := strconv.Quote(selector)
	return chromedp.Steps(
		waitJS(`document.readyState === "complete" && document.querySelector(`+sel+`)`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector(`+sel+`).click()`),
	)
}

type testAgent struct {
	key     string
	wallets map[string]string
}

func registerTestAgent(t *testing.T, base, username string) testAgent {
	t.Helper()
	var reg struct {
		APIKey  string `json:"api_key"`
		Wallets []struct{ Address, Chain string }
	}
	require.Equal(t, http.StatusCreated, doAgentJSON(t, http.MethodPost, base+"/agents/quick-register", "",
		`{"username": "`+username+`"}`, &reg))
	a := testAgent{key: reg.APIKey, wallets: map[string]string{}}
	for _, w := range reg.Wallets {
		a.wallets[w.Chain] = w.Address
	}
	return a
}

// faucet pays amount USDC to address from the devnet's faucet.
func faucet(t *testing.T, base, chain, address, amount string) {
	t.Helper()
	var out map[string]any
	require.Equal(t, http.StatusOK, postJSON(t, base+"/dev/faucet",
		`{"chain":"`+chain+`","address":"`+address+`","amount_usd":`+amount+`}`, &out), "%v", out)
}

type agentPairingView struct {
	UserID      string `json:"user_id"`
	Username    string `json:"username"`
	Status      string `json:"status"`
	KYCVerified bool   `json:"kyc_verified"`
}

// agentPairing answers the agent's newest pairing (GET /agents/me/pairings).
func agentPairing(t *testing.T, base, key string) agentPairingView {
	t.Helper()
	var out struct {
		Pairings []agentPairingView `json:"pairings"`
	}
	require.Equal(t, http.StatusOK, doAgentJSON(t, http.MethodGet, base+"/agents/me/pairings", key, "", &out))
	require.NotEmpty(t, out.Pairings)
	return out.Pairings[0]
}

// eventsSub is an agentEvents subscription; a goroutine collects what it
// pushes.
type eventsSub struct {
	mu     sync.Mutex
	events []map[string]any
	err    error
}

func subscribeAgentEvents(t *testing.T, base, key string) *eventsSub {
	t.Helper()
	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 10 * time.Second}
	conn, _, err := dialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/graphql", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"X-Agent-Key": key}}))
	var ack struct{ Type string }
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	require.NoError(t, conn.ReadJSON(&ack))
	require.Equal(t, "connection_ack", ack.Type)
	require.NoError(t, conn.SetReadDeadline(time.Time{}))
	require.NoError(t, conn.WriteJSON(map[string]any{"id": "e", "type": "subscribe", "payload": map[string]any{
		"query": `subscription { agentEvents { id kind data } }`,
	}}))
	s := &eventsSub{}
	go func() {
		for {
			var m struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := conn.ReadJSON(&m); err != nil {
				s.fail(err)
				return
			}
			switch m.Type {
			case "ping":
				_ = conn.WriteJSON(map[string]any{"type": "pong"})
				continue
			case "pong":
				continue
			case "next":
			default:
				s.fail(&subError{msg: m.Type + ": " + string(m.Payload)})
				return
			}
			var out struct {
				Data struct {
					AgentEvents map[string]any `json:"agentEvents"`
				} `json:"data"`
				Errors json.RawMessage `json:"errors"`
			}
			if err := json.Unmarshal(m.Payload, &out); err != nil || len(out.Errors) > 0 {
				s.fail(&subError{msg: "bad message: " + string(m.Payload)})
				return
			}
			s.mu.Lock()
			s.events = append(s.events, out.Data.AgentEvents)
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *eventsSub) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// wait waits for an event of kind and answers it.
func (s *eventsSub) wait(t *testing.T, kind string) map[string]any {
	t.Helper()
	var found map[string]any
	waitFor(t, processTestTimeout, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		require.NoError(t, s.err, "subscription ended; events so far: %v", s.events)
		for _, e := range s.events {
			if e["kind"] == kind {
				found = e
				return true
			}
		}
		return false
	}, "event %q on the subscription", kind)
	return found
}
