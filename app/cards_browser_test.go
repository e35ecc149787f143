package app

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/cardissuer/sandbox"
	"agentpay/chains"
	"agentpay/ent/user"
	"agentpay/internal/testenv"
)

// TestCardApprovalInBrowser drives the home page in headless Chromium with
// a virtual authenticator: a human with a passkey and verified identity
// sees their paired agent's card request appear live, approves it with the
// passkey; the agent reads the card once, a charge below the maximum at
// the bound merchant is approved and the remainder returns on chain, a
// second charge is declined, a second read shows the last four digits
// only, and the page shows the request used.
func TestCardApprovalInBrowser(t *testing.T) {
	a := serveAppWith(t, appSetup{
		env: testenv.Options{Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond},
		config: func(cfg *agentpay.Config, _ string) {
			cfg.AgentMode, cfg.CardIssuer = agentpay.ModeTest, sandbox.New()
		},
	})
	env, svc, origin := a.env, a.svc, a.origin

	ctx := openBrowser(t, 3*time.Minute)
	wait := pollFor
	// Sign up by e-mail link and add a passkey.
	email := "card.person@example.com"
	a.signUpWithPasskey(t, ctx, email, "card_person")

	// Verified (identity_test covers the provider's path), then paired with
	// a funded agent.
	bg := context.Background()
	u, err := env.DB.Ent.User.Query().Where(user.Email(email)).Only(bg)
	require.NoError(t, err)
	u, err = env.DB.Ent.User.UpdateOne(u).SetIdentityStatus(user.IdentityStatusVerified).Save(bg)
	require.NoError(t, err)
	reg, err := svc.QuickRegister(bg, "card_browser_agent")
	require.NoError(t, err)
	ws, err := svc.Wallets(bg, reg.Agent)
	require.NoError(t, err)
	var agentWallet string
	for _, w := range ws.All {
		if w.Chain == "base" && w.Kind == "custodial" {
			agentWallet = w.Address
		}
	}
	env.Fund(t, chains.Base, agentWallet, 10_000_000)
	p, err := svc.RequestPairing(bg, reg.Agent, agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = svc.DecidePairing(bg, u, p.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	ag, err := env.DB.Ent.Agent.Get(bg, reg.Agent.ID)
	require.NoError(t, err)

	// The home page is open; the request appears live.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(origin+"/app/"),
		chromedp.WaitVisible(`#card-requests`),
	))
	// The page says when its subscription is asked for (after the last
	// event it read, so nothing committed since is missed).
	require.NoError(t, chromedp.Do(ctx, wait(`document.body.dataset.live === "subscribed"`)))
	req, _, err := svc.RequestCardPurchase(bg, ag, agentpay.CardPurchaseRequest{
		AmountUSD: agentpay.USDCAmount(4_000_000), MerchantName: "Acme Books", Description: "a book on payments"})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		wait(`document.querySelector("#card-requests li.card-request[data-status=pending_approval]") !== null`),
	))
	item, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#card-requests li.card-request").textContent`))
	require.NoError(t, err)
	require.Contains(t, item, "card_browser_agent asks to pay 4.00 USD at Acme Books: a book on payments")

	// Approve: the virtual authenticator signs the assertion.
	require.NoError(t, chromedp.Do(ctx,
		clickJS(`#card-requests li.card-request button.approve-card`),
		wait(`document.getElementById("card-result").dataset.status === "approved" || document.getElementById("card-result").dataset.status === "error"`),
	))
	result, err := chromedp.Run(ctx, chromedp.Text(`#card-result`))
	require.NoError(t, err)
	require.Equal(t, "Card request approved.", result)
	pk, err := env.DB.Ent.Passkey.Query().Only(bg)
	require.NoError(t, err)
	require.NotNil(t, pk.LastUsedAt, "the approval used the passkey")

	// The agent reads the card once and charges part of it.
	first, err := svc.AgentCardRequest(bg, ag, req.Request.ID.String())
	require.NoError(t, err)
	require.NotNil(t, first.Details)
	d := first.Details
	charge := agentpay.DevCardCharge{CardNumber: d.Number, ExpMonth: d.ExpMonth, ExpYear: d.ExpYear, CVC: d.CVC,
		AmountUSD: agentpay.USDCAmount(2_500_000), MerchantName: "Acme Books"}
	c, err := svc.ChargeDevCard(bg, charge)
	require.NoError(t, err)
	require.True(t, c.Approved, c.Reason)
	c, err = svc.ChargeDevCard(bg, charge)
	require.NoError(t, err)
	require.False(t, c.Approved)
	second, err := svc.AgentCardRequest(bg, ag, req.Request.ID.String())
	require.NoError(t, err)
	require.Nil(t, second.Details)
	require.Equal(t, d.Number[len(d.Number)-4:], second.Request.CardLast4)
	bal, err := env.Ledger(chains.Base).Balance(bg, agentWallet)
	require.NoError(t, err)
	require.EqualValues(t, 7_500_000, bal.Int64(), "10 - 4 reserved + 1.5 returned, on chain")

	// The list is drawn again on every live event, so its text is read in
	// the page, in one step, once the used request shows its charge.
	require.NoError(t, chromedp.Do(ctx,
		wait(`(() => { const li = document.querySelector("#card-requests li.card-request[data-status=used]"); return !!li && li.textContent.includes("charged"); })()`),
	))
	item, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#card-requests li.card-request").textContent`))
	require.NoError(t, err)
	require.Contains(t, item, "card ending "+second.Request.CardLast4)
	require.Contains(t, item, "charged 2.50 USD")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
}
