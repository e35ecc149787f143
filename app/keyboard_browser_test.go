package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/testenv"
)

// TestKeyboardOnlyJourneys completes three journeys in headless Chromium
// with the keyboard alone (Tab, Enter and Space as key events, and the
// digits of an amount; no click, no focus set by script): a human
// approves an agent's pairing request on the home page; a merchant's
// owner creates a session in the dashboard and cancels it through its
// confirmation; and refunds part of a paid session (paid on the Base
// devnet) through its confirmation. Every control the keyboard reaches
// on the way shows where the focus is: a visible outline from the one
// stylesheet (internal/uikit), not the browser's thin default; axe-core
// finds nothing serious on the refund's form, its confirmation and its
// answer.
func TestKeyboardOnlyJourneys(t *testing.T) {
	a := serveAppWith(t, appSetup{
		env:    testenv.Options{Chains: []chains.Name{chains.Base}, Confirmations: map[chains.Name]uint64{chains.Base: 1}},
		config: func(cfg *agentpay.Config, _ string) { cfg.AgentMode = agentpay.ModeTest },
	})
	env, svc, origin := a.env, a.svc, a.origin
	ctx := context.Background()

	// A person who owns a merchant and whom an agent asks to pair with.
	name, email := "Keyboard Shop", "owner@keyboard.test"
	shop, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	confirm := a.linkTo(t, email, "/confirm-email/")
	owner, err := svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "keyboard_owner"})
	require.NoError(t, err)
	_, err = svc.ConfirmMerchantEmail(ctx, confirm[strings.LastIndex(confirm, "/")+1:])
	require.NoError(t, err)
	reg, err := svc.QuickRegister(ctx, "keyboard_agent")
	require.NoError(t, err)
	_, err = svc.RequestPairing(ctx, reg.Agent, agentpay.PairingRequest{UserID: owner.ID.String(), Message: "to book travel"})
	require.NoError(t, err)
	require.NoError(t, svc.RequestSignIn(ctx, email, "192.0.2.1"))

	tctx := openBrowser(t, 3*time.Minute)
	wait := pollFor
	eval := func(js string) string { t.Helper(); return evalString(t, tctx, js) }
	tabTo := func(sel string) { t.Helper(); keyboardTabTo(t, tctx, sel) }
	press := func(key string) { t.Helper(); require.NoError(t, chromedp.Do(tctx, chromedp.KeyEvent(key))) }

	// Signing in from the e-mailed link: Tab to Continue, Enter.
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(a.linkTo(t, email, "/signin/")), wait(`!!document.getElementById("continue")`)))
	tabTo(`#continue`)
	press(kb.Enter)
	// The form's post navigates: a poll the navigation interrupts is
	// asked again on the new document.
	signedIn := `document.readyState === "complete" && (!!document.getElementById("app") || !!document.getElementById("dashboard"))`
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := chromedp.Do(tctx, wait(signedIn))
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "signed in: %v", err)
	}

	// The pairing request, approved from the home page.
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(origin+"/app/?home=1"),
		wait(`!!document.querySelector("#requests li.request button[data-decision=APPROVE]")`),
	))
	tabTo(`#requests li.request button[data-decision=APPROVE]`)
	press(kb.Enter)
	require.NoError(t, chromedp.Do(tctx,
		wait(`document.getElementById("pairing-result").dataset.status === "approve" && !!document.querySelector("#paired li")`)))
	require.Equal(t, "Paired with keyboard_agent: it can now ask you to approve what it does, and pay you.", eval(`document.getElementById("pairing-result").textContent`))
	require.Equal(t, "true", eval(`String(document.getElementById("requests-empty") !== null && !document.getElementById("requests-empty").hidden)`),
		"the emptied list says what to do")
	ps, err := svc.AgentPairings(ctx, reg.Agent)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "approved", ps[0].Status)

	// The dashboard: a session created from the keyboard (Enter in the
	// form), then cancelled through its confirmation (Tab from Go back to
	// the action, Space).
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(origin+"/app/dashboard#sessions"),
		wait(`document.getElementById("dashboard").dataset.loaded === "sessions"`),
	))
	tabTo(`#new-session-description`)
	press("Keyboard order")
	press(kb.Enter)
	require.NoError(t, chromedp.Do(tctx, wait(`document.getElementById("dashboard").dataset.loaded === "session" && !document.getElementById("cancel-session").hidden`)))
	id := eval(`document.getElementById("session-id").textContent`)
	tabTo(`#cancel-session`)
	press(kb.Enter)
	require.NoError(t, chromedp.Do(tctx, wait(`document.getElementById("confirm-dialog").open && document.activeElement.id === "confirm-cancel"`)))
	tabTo(`#confirm-ok`)
	press(" ")
	require.NoError(t, chromedp.Do(tctx, wait(`document.getElementById("dash-notice").textContent === "The session was cancelled." && !document.getElementById("dash-notice").hidden`)))
	s, err := env.DB.Ent.CheckoutSession.Query().Where(checkoutsession.ExternalID(id)).Only(ctx)
	require.NoError(t, err)
	require.Equal(t, "Keyboard order", s.Description)
	require.Equal(t, checkoutsession.StatusCancelled, s.Status)

	// A session paid on the devnet, refunded in part from its page: Tab
	// to the payment's refund amount, type it, Tab to Refund, Enter; the
	// confirmation opens on Go back: Tab to the action, Enter. The live
	// feed's refreshes meanwhile leave the form (and its focus) alone.
	auth, err := svc.AuthenticateMerchant(ctx, shop.Keys.TestSecretKey)
	require.NoError(t, err)
	ten := decimal.RequireFromString("10")
	paid, err := svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &ten, Currency: "USD", Description: "Keyboard refund"})
	require.NoError(t, err)
	paidID := paid.Session.ExternalID
	deposit, err := svc.SelectPaymentMethod(ctx, paidID, "", "base", "USDC")
	require.NoError(t, err)
	env.Fund(t, chains.Base, deposit.Address, 10_000_000)
	require.Eventually(t, func() bool {
		env.EVM(chains.Base).Commit()
		_, err := svc.ScanDeposits(ctx, agentpay.ModeTest, chains.Base)
		require.NoError(t, err)
		sess, err := env.DB.Ent.CheckoutSession.Query().Where(checkoutsession.ExternalID(paidID)).Only(ctx)
		require.NoError(t, err)
		return sess.Status == checkoutsession.StatusConfirmed
	}, 30*time.Second, 50*time.Millisecond, "the session is paid and confirmed")
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(origin+"/app/dashboard#session/"+paidID),
		wait(`document.getElementById("dashboard").dataset.loaded === "session" && !!document.querySelector("#session-payments form.refund-form")`),
	))
	testenv.CheckAccessibility(t, tctx, "a paid session's refund form")
	tabTo(`#session-payments form.refund-form input.refund-amount`)
	press("4")
	tabTo(`#session-payments form.refund-form button.refund`)
	press(kb.Enter)
	require.NoError(t, chromedp.Do(tctx, wait(`document.getElementById("confirm-dialog").open && document.activeElement.id === "confirm-cancel"`)))
	require.Equal(t, "Refund 4.00 USD", eval(`document.getElementById("confirm-ok").textContent`))
	testenv.CheckAccessibility(t, tctx, "the refund's confirmation")
	tabTo(`#confirm-ok`)
	press(kb.Enter)
	require.NoError(t, chromedp.Do(tctx, wait(`document.getElementById("dash-notice").textContent.startsWith("Refund re_") && !document.getElementById("dash-notice").hidden && !!document.querySelector("#session-refunds li.refund-row")`)))
	testenv.CheckAccessibility(t, tctx, "the refund requested")
	refunds, err := env.DB.Ent.Refund.Query().All(ctx)
	require.NoError(t, err)
	require.Len(t, refunds, 1, "one refund")
	require.EqualValues(t, 4_000_000, refunds[0].AmountToken, "4 of the 10 USDC")
}

// TestKeyboardOnlyMerchantSignUpAndApproval completes the two journeys
// TestKeyboardOnlyJourneys leaves out, in headless Chromium with the
// keyboard alone (Tab and Enter as key events, and typed text): a
// signed-in person adds a passkey in settings, signs a merchant up from
// the app (the form filled by typing, the settlement chain picked by
// typing its initial on the select, Enter submits), Tabs from the keys
// shown once to "open the dashboard" and lands there on the new merchant;
// then an agent's send held by the person's spending policy is approved
// from the home page (Tab to its Approve, Enter), the step-up signed with
// the passkey (a virtual authenticator that confirms presence by itself),
// and the money moves on chain. Each control reached shows the 3 px focus
// outline; axe-core finds nothing serious on the form, the keys and the
// approval's answer.
func TestKeyboardOnlyMerchantSignUpAndApproval(t *testing.T) {
	a := serveAppWith(t, appSetup{
		env:    testenv.Options{Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond},
		config: func(cfg *agentpay.Config, _ string) { cfg.AgentMode = agentpay.ModeTest },
	})
	env, svc, origin := a.env, a.svc, a.origin
	ctx := context.Background()

	const email = "keys.person@keyboard.test"
	person, err := svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "keys_person"})
	require.NoError(t, err)
	require.NoError(t, svc.RequestSignIn(ctx, email, "192.0.2.1"))

	tctx := openBrowser(t, 3*time.Minute)
	wait := pollFor
	eval := func(js string) string { t.Helper(); return evalString(t, tctx, js) }
	tabTo := func(sel string) { t.Helper(); keyboardTabTo(t, tctx, sel) }
	// landed waits for cond on the document a key's navigation opens: a
	// poll the navigation interrupts is asked again on the new document.
	landed := func(cond, what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			err := chromedp.Do(tctx, wait(`document.readyState === "complete" && `+cond))
			if err == nil {
				return
			}
			require.True(t, time.Now().Before(deadline), "%s: %v", what, err)
		}
	}
	press := func(key string) { t.Helper(); require.NoError(t, chromedp.Do(tctx, chromedp.KeyEvent(key))) }

	// The browser's authenticator: a platform one holding discoverable
	// passkeys, verifying its user and confirming presence by itself.
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(a.newestLink(t, email)), wait(`!!document.getElementById("continue")`)))
	addPasskeyAuthenticator(t, tctx)

	// Signed in from the e-mailed link, a passkey added in settings.
	tabTo(`#continue`)
	press(kb.Enter)
	landed(`(!!document.getElementById("app") || !!document.getElementById("dashboard"))`, "signed in")
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(origin+"/app/settings"), wait(`!!document.querySelector("#sessions li")`)))
	tabTo(`#add-passkey`)
	press(kb.Enter)
	require.NoError(t, chromedp.Do(tctx, wait(`document.querySelectorAll("#passkeys li").length === 1`)))

	// A merchant signed up: typed into the form, the chain picked by its
	// initial, Enter submits; the keys shown once take the focus, Tab
	// reaches the way to the dashboard, Enter follows it.
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(origin+"/app/merchants/new"), wait(`!!document.getElementById("merchant-form")`)))
	testenv.CheckAccessibility(t, tctx, "the merchant sign-up form")
	tabTo(`#merchant-name`)
	press("Keyboard Coffee")
	tabTo(`#merchant-email`)
	require.Equal(t, email, eval(`document.getElementById("merchant-email").value`), "the person's address is offered")
	tabTo(`#merchant-chain`)
	press("b")
	require.Equal(t, "base", eval(`document.getElementById("merchant-chain").value`), "typing the initial picks Base")
	const settlement = "0x000000000000000000000000000000000000dEaD"
	tabTo(`#merchant-address`)
	press(settlement)
	press(kb.Enter)
	require.NoError(t, chromedp.Do(tctx, wait(`!document.getElementById("merchant-keys").hidden && document.activeElement.id === "merchant-keys"`)))
	testenv.CheckAccessibility(t, tctx, "the merchant's keys shown once")
	testKey := eval(`document.getElementById("key-test-secret-key").textContent`)
	auth, err := svc.AuthenticateMerchant(ctx, testKey)
	require.NoError(t, err, "the test secret key shown works")
	require.Equal(t, "Keyboard Coffee", auth.Merchant.Name)
	require.Equal(t, "base", auth.Merchant.SettlementChain)
	require.Equal(t, strings.ToLower(settlement), strings.ToLower(auth.Merchant.SettlementAddress))
	tabTo(`#keys-dashboard`)
	press(kb.Enter)
	landed(`location.pathname === "/app/dashboard" && !!document.getElementById("dashboard") && document.getElementById("dashboard").dataset.loaded === "overview"`, "the dashboard opened")
	require.Equal(t, auth.Merchant.ID.String(), eval(`document.getElementById("merchant-picker").value`), "the dashboard opens on the new merchant")

	// Paired with a funded agent whose sends above 1 USD the person
	// approves.
	reg, err := svc.QuickRegister(ctx, "keys_agent")
	require.NoError(t, err)
	payee, err := svc.QuickRegister(ctx, "keys_payee")
	require.NoError(t, err)
	baseWallet := func(r *agentpay.Registration) string {
		ws, err := svc.Wallets(ctx, r.Agent)
		require.NoError(t, err)
		for _, w := range ws.All {
			if w.Chain == "base" && w.Kind == "custodial" {
				return w.Address
			}
		}
		t.Fatal("no base wallet")
		return ""
	}
	env.Fund(t, chains.Base, baseWallet(reg), 10_000_000)
	p, err := svc.RequestPairing(ctx, reg.Agent, agentpay.PairingRequest{UserID: person.ID.String()})
	require.NoError(t, err)
	_, err = svc.DecidePairing(ctx, person, p.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	one := decimal.RequireFromString("1")
	_, err = svc.SetSpendingPolicy(ctx, &agentpay.Viewer{User: person}, "keys_agent", agentpay.SpendingPolicyInput{ApprovalThreshold: &one})
	require.NoError(t, err)
	ag, err := env.DB.Ent.Agent.Get(ctx, reg.Agent.ID)
	require.NoError(t, err)

	// The held send, approved from the home page: Tab to its Approve,
	// Enter; the step-up signs with the passkey.
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(origin+"/app/?home=1"), wait(`document.body.dataset.live === "subscribed"`)))
	held, _, err := svc.Send(ctx, ag, agentpay.SendRequest{ToUsername: "keys_payee", AmountUSD: agentpay.USDCAmount(2_000_000), Chain: "base"})
	require.NoError(t, err)
	require.Equal(t, "awaiting_approval", held.Status)
	approve := `#spend-approvals li.spend-approval[data-id="` + held.Approval.Approval.ID.String() + `"][data-status=awaiting_approval] button.approve-spend`
	require.NoError(t, chromedp.Do(tctx, wait(`document.querySelector('`+approve+`') !== null`)))
	tabTo(approve)
	press(kb.Enter)
	require.NoError(t, chromedp.Do(tctx,
		wait(`["approved", "error"].includes(document.getElementById("approval-result").dataset.status)`)))
	require.Equal(t, "Payment approved.", eval(`document.getElementById("approval-result").textContent`))
	testenv.CheckAccessibility(t, tctx, "the payment approved")
	pk, err := env.DB.Ent.Passkey.Query().Only(ctx)
	require.NoError(t, err)
	require.NotNil(t, pk.LastUsedAt, "the approval used the passkey")
	seen, err := svc.AgentSpendApproval(ctx, ag, held.Approval.Approval.ID.String())
	require.NoError(t, err)
	require.Equal(t, "approved", seen.Status())
	bal, err := env.Ledger(chains.Base).Balance(ctx, baseWallet(payee))
	require.NoError(t, err)
	require.EqualValues(t, 1_998_000, bal.Int64(), "2 less the 0.1% fee, on chain")
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate("about:blank")))
}

// keyboardTabTo presses Tab until the focus is on the element sel names
// (at most 60 times), then holds that the focus shows: the stylesheet's
// outline for :focus-visible, 3 px solid.
func keyboardTabTo(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	eval := func(js string) string { t.Helper(); return evalString(t, ctx, js) }
	for i := 0; i < 60; i++ {
		require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab)))
		if eval(`String(!!document.activeElement && document.activeElement.matches(`+"`"+sel+"`"+`))`) == "true" {
			ring := eval(`(e => [e.matches(":focus-visible"), getComputedStyle(e).outlineStyle, getComputedStyle(e).outlineWidth].join(" "))(document.activeElement)`)
			require.Equal(t, "true solid 3px", ring, "the focus on %s shows", sel)
			return
		}
	}
	t.Fatalf("Tab never reached %s", sel)
}
