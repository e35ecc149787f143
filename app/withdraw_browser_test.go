package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/mailmessage"
	"agentpay/graph"
	"agentpay/internal/testenv"
)

// TestWithdrawFormInBrowser drives the home page's withdraw form in
// headless Chromium against the real GraphQL API and a Base devnet: a
// refusal shows its detail in #withdraw-result and moves nothing; a
// withdrawal by a person without a passkey waits for the confirmation
// link e-mailed to them, which they open in another tab and confirm; the
// page then goes on by itself, shows completed with its hash, lists it,
// refreshes the balance, and the address holds the amount less the fee
// on chain.
func TestWithdrawFormInBrowser(t *testing.T) {
	env := testenv.New(t, testenv.Options{Jobs: true, Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond})
	cfg := agentpay.Config{AgentMode: agentpay.ModeTest}
	env.Fill(&cfg)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cfg.AppURL = srv.URL + "/app"
	svc, err := agentpay.NewService(cfg)
	require.NoError(t, err)
	mux.Handle("/app/", NewHandler(Config{Service: svc, Prefix: "/app", GraphQLPath: "/graphql"}))
	mux.Handle("/graphql", graph.NewHandler(graph.HandlerConfig{Service: svc}))

	ctx := context.Background()
	u, err := svc.CreateUser(ctx, agentpay.NewUser{Email: "wd@example.com", Username: "wd_browser"})
	require.NoError(t, err)
	ws, err := svc.UserWallets(ctx, u)
	require.NoError(t, err)
	var own string
	for _, w := range ws {
		if w.Chain == "base" {
			own = w.Address
		}
	}
	env.Fund(t, chains.Base, own, 10_000_000)
	_, to, err := env.Families[chains.FamilyEVM].NewKey()
	require.NoError(t, err)
	require.NoError(t, svc.RequestSignIn(ctx, u.Email, "192.0.2.1"))
	m, err := env.DB.Ent.MailMessage.Query().Where(mailmessage.To(u.Email)).Only(ctx)
	require.NoError(t, err)
	link := agentpay.MailLinks(m.Text)[0]

	tctx := openBrowser(t, 2*time.Minute)
	waitResult := func(status string) string {
		t.Helper()
		require.NoError(t, chromedp.Do(tctx, chromedp.Poll[chromedp.Void](
			`document.getElementById("withdraw-result").dataset.status === "`+status+`"`, chromedp.WithPollingTimeout(30*time.Second))))
		v, err := chromedp.Run(tctx, chromedp.Text(`#withdraw-result`))
		require.NoError(t, err)
		return v
	}
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(link),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#withdraw-form`),
		chromedp.Poll[chromedp.Void](`document.getElementById("total").textContent === "10.00"`, chromedp.WithPollingTimeout(30*time.Second)),
		// Its own wallet: refused with the detail, nothing moves.
		chromedp.SetValue(`#withdraw-form select[name=chain]`, "base"),
		chromedp.SendKeys(`#withdraw-form input[name=address]`, own),
		chromedp.SendKeys(`#withdraw-form input[name=amount]`, "4"),
		clickJS(`#withdraw-form button[type=submit]`),
		// Asked first, saying what happens; going back does nothing.
		chromedp.WaitVisible(`#confirm-dialog`),
	))
	said, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.getElementById("confirm-dialog").textContent`))
	require.NoError(t, err)
	require.Contains(t, said, "This sends 4.00 USDC (less the 0.1% fee) from your agentpay balance to "+own+" on base.")
	require.Contains(t, said, "cannot be recovered")
	require.NoError(t, chromedp.Do(tctx, clickJS(`#confirm-cancel`)))
	require.Contains(t, waitResult("cancelled"), "Nothing was withdrawn.")
	require.NoError(t, chromedp.Do(tctx,
		clickJS(`#withdraw-form button[type=submit]`),
		chromedp.WaitVisible(`#confirm-ok`),
		clickJS(`#confirm-ok`),
	))
	require.Contains(t, waitResult("error"), "your own base wallet")

	require.NoError(t, chromedp.Do(tctx,
		chromedp.SetValue(`#withdraw-form input[name=address]`, to),
		clickJS(`#withdraw-form button[type=submit]`),
		chromedp.WaitVisible(`#confirm-ok`),
		clickJS(`#confirm-ok`),
	))
	require.Contains(t, waitResult("confirming"), "We e-mailed a confirmation link to wd@example.com")
	n, err := env.DB.Ent.Transfer.Query().Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing moves until the link is confirmed")
	var confirmLink string
	require.Eventually(t, func() bool {
		m, err := env.DB.Ent.MailMessage.Query().Where(mailmessage.To(u.Email), mailmessage.SubjectHasPrefix("Confirm: ")).First(ctx)
		if err != nil {
			return false
		}
		confirmLink = agentpay.MailLinks(m.Text)[0]
		return true
	}, 10*time.Second, 50*time.Millisecond)
	// The person opens the link in another tab and confirms.
	other, closeOther := chromedp.NewContext(tctx)
	defer closeOther()
	require.NoError(t, chromedp.Do(other,
		chromedp.Navigate(confirmLink),
		chromedp.WaitVisible(`#stepup-summary`),
	))
	summary, err := chromedp.Run(other, chromedp.Text(`#stepup-summary`))
	require.NoError(t, err)
	require.Contains(t, summary, "withdraw 4 USDC from your agentpay account wd_browser to "+to+" on base")
	require.NoError(t, chromedp.Do(other, chromedp.Click(`#stepup-confirm`), chromedp.WaitVisible(`#stepup-confirmed`)))
	// The answer is a sentence, with the transaction on the explorer.
	res := waitResult("completed")
	require.Equal(t, "Withdrawal of 4.00 USDC to "+to[:6]+"…"+to[len(to)-4:]+" on base arrived: 3.996 USDC delivered, 0.004 USDC fee. See the transaction.", res)
	wd, err := env.DB.Ent.Transfer.Query().Only(ctx)
	require.NoError(t, err)
	href, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.querySelector("#withdraw-result a.tx-link").href`))
	require.NoError(t, err)
	require.Equal(t, "https://sepolia.basescan.org/tx/"+wd.TxHash, href, "test mode: the test network's explorer")
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Poll[chromedp.Void](`document.getElementById("total").textContent === "6.00"`, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.WaitVisible(`#withdrawals li.withdrawal[data-status=completed]`),
	))
	item, err := liveText(tctx, `#withdrawals li.withdrawal`)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(item, "4.00 USDC to "+to+" on base: completed"), item)

	bal, err := env.Ledger(chains.Base).Balance(ctx, to)
	require.NoError(t, err)
	require.EqualValues(t, 3_996_000, bal.Int64(), "delivered on chain")
	n, err = env.DB.Ent.Transfer.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the refusal moved nothing")
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate("about:blank")))
}
