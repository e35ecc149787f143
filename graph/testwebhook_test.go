package graph

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
)

// TestSendTestWebhookIsLimited: sendTestWebhook answers RATE_LIMITED past
// TestWebhooksPerMerchant test events of the merchant's mode this hour,
// with the wait in the error's extensions, as redeliveries are limited.
func TestSendTestWebhookIsLimited(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Hook Shop", agentpay.MerchantInput{})
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(receiver.Close)
	var upd struct{ UpdateMerchant struct{ ID string } }
	api.do(t, m.Keys.TestSecretKey, `mutation($u: String!) { updateMerchant(input: {webhookUrl: $u}) { id } }`,
		map[string]any{"u": receiver.URL + "/hooks"}).decode(t, &upd)
	for range agentpay.TestWebhooksPerMerchant {
		var d struct{ SendTestWebhook struct{ ID string } }
		api.do(t, m.Keys.TestSecretKey, dashTestWebhook, nil).decode(t, &d)
		require.NotEmpty(t, d.SendTestWebhook.ID)
	}
	res := api.do(t, m.Keys.TestSecretKey, dashTestWebhook, nil)
	require.Equal(t, "RATE_LIMITED", res.code(t))
	require.Contains(t, res.Errors[0].Message, "20 test events per hour of one merchant in test mode, retry after")
	require.Positive(t, res.Errors[0].Extensions["retryAfter"], "%v", res.Errors[0].Extensions)
	require.Equal(t, "hour", res.Errors[0].Extensions["window"])
}
