package app

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/accountevent"
)

// TestStepUpLinkPage: an e-mailed confirmation link's page shows what it
// confirms and confirms nothing (a mail scanner opens links); its form,
// with the page's form token, confirms it once, and the signed-in page
// that asked is told (an account event). A used, unknown or expired link
// shows no form.
func TestStepUpLinkPage(t *testing.T) {
	a := newAppEnv(t)
	ctx := context.Background()
	u, err := a.svc.CreateUser(ctx, agentpay.NewUser{Email: "confirm@example.com", Username: "confirm_app"})
	require.NoError(t, err)
	to := "0x000000000000000000000000000000000000dEaD"
	up, err := a.svc.BeginStepUp(ctx, &agentpay.Viewer{User: u}, agentpay.StepUpRequest{Action: agentpay.StepUpWithdraw,
		Withdrawal: &agentpay.WithdrawRequest{ToAddress: to, AmountUSD: decimal.RequireFromString("2.5"), Chain: "base"}})
	require.NoError(t, err)
	require.Equal(t, "email", up.Method)
	link := a.mailedLink(t, u.Email)
	require.Regexp(t, `^/app/step-up/stu_`, link)

	b := a.browser(t)
	var body string
	for range 2 {
		var resp *http.Response
		resp, body = get(t, b, a.srv.URL+link)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, "You asked to withdraw 2.5 USDC from your agentpay account confirm_app to "+to+" on base.")
		require.Contains(t, body, `id="stepup-confirm"`)
	}
	seen, err := a.svc.StepUpOf(ctx, &agentpay.Viewer{User: u}, up.ID.String())
	require.NoError(t, err)
	require.False(t, seen.Confirmed, "opening it confirms nothing")

	resp, _ := post(t, b, a.srv.URL+link, url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no form token")
	resp, body = post(t, b, a.srv.URL+link, url.Values{"form_token": {formToken(t, body)}})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `id="stepup-confirmed"`)
	seen, err = a.svc.StepUpOf(ctx, &agentpay.Viewer{User: u}, up.ID.String())
	require.NoError(t, err)
	require.True(t, seen.Confirmed)
	n, err := a.env.DB.Ent.AccountEvent.Query().Where(accountevent.UserID(u.ID), accountevent.Kind(agentpay.EventStepUpConfirmed)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	for _, l := range []string{link, "/app/step-up/stu_" + "0123456789012345678901234567890123456789012", "/app/step-up/nope"} {
		resp, body = get(t, b, a.srv.URL+l)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, l)
		require.NotContains(t, body, `id="stepup-confirm"`)
	}
}
