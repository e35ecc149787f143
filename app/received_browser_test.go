package app

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/graph"
	"agentpay/internal/testenv"
)

// TestReceivedListPastOnePage: an account with more events than one page
// of viewer.events (100) still shows its newest transfers received, newest
// first (TestAppEndToEnd sees one arrive live).
func TestReceivedListPastOnePage(t *testing.T) {
	env := testenv.New(t, testenv.Options{Jobs: true})
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
	u, err := svc.CreateUser(ctx, agentpay.NewUser{Email: "many@example.com", Username: "many_events"})
	require.NoError(t, err)
	received := func(n int) *ent.AccountEventCreate {
		return env.DB.Ent.AccountEvent.Create().SetUserID(u.ID).SetKind(agentpay.EventTransferReceived).
			SetData(fmt.Sprintf(`{"transaction_id":"00000000-0000-4000-8000-%012d","from_agent":"bot","amount_usd":%d,"chain":"base","tx_hash":"0x%d"}`, n, n, n))
	}
	var batch []*ent.AccountEventCreate
	for i := 1; i <= 230; i++ {
		batch = append(batch, received(i))
	}
	require.NoError(t, env.DB.Ent.AccountEvent.CreateBulk(batch...).Exec(ctx))
	require.NoError(t, svc.RequestSignIn(ctx, u.Email, "192.0.2.1"))
	m, err := env.DB.Ent.MailMessage.Query().Where(mailmessage.To(u.Email)).Only(ctx)
	require.NoError(t, err)

	tctx := openBrowser(t, 2*time.Minute)
	first := `document.querySelector("#received li") && document.querySelector("#received li").textContent`
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(agentpay.MailLinks(m.Text)[0]),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#received`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#received li").length === 230`, chromedp.WithPollingTimeout(30*time.Second)),
	))
	top, err := chromedp.Run(tctx, chromedp.Evaluate[string](first))
	require.NoError(t, err)
	require.Equal(t, "230.00 USDC from bot on base", top, "the newest first")
}
