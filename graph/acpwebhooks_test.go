package graph

import (
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
)

// TestACPWebhookSettings: setAcpWebhook sets the key's mode's ACP order
// webhook URL and issues its secret once, rollAcpWebhookSecret replaces
// it, acpWebhook reads them without the secret; the rules of REST's
// /checkout/merchants/me/acp-webhook (a bad URL is BAD_USER_INPUT).
func TestACPWebhookSettings(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "ACP Shop", agentpay.MerchantInput{})
	type settings struct {
		URL       *string
		Livemode  bool
		SecretSet bool
		Secret    *string
		Warning   *string
	}
	const fields = `{ url livemode secretSet secret warning }`
	var set struct{ SetAcpWebhook settings }
	api.do(t, m.Keys.TestSecretKey, `mutation($u: String!) { setAcpWebhook(url: $u) `+fields+` }`,
		map[string]any{"u": "https://platform.example/acp/orders"}).decode(t, &set)
	require.Equal(t, "https://platform.example/acp/orders", *set.SetAcpWebhook.URL)
	require.False(t, set.SetAcpWebhook.Livemode)
	require.True(t, set.SetAcpWebhook.SecretSet)
	require.Regexp(t, `^acpwhsec_[0-9a-f]{64}$`, *set.SetAcpWebhook.Secret)
	require.Equal(t, agentpay.ACPWebhookSecretWarning, *set.SetAcpWebhook.Warning)

	var rolled struct{ RollAcpWebhookSecret settings }
	api.do(t, m.Keys.TestSecretKey, `mutation { rollAcpWebhookSecret `+fields+` }`, nil).decode(t, &rolled)
	require.NotEqual(t, *set.SetAcpWebhook.Secret, *rolled.RollAcpWebhookSecret.Secret)

	var read struct{ AcpWebhook settings }
	api.do(t, m.Keys.TestSecretKey, `{ acpWebhook `+fields+` }`, nil).decode(t, &read)
	require.Equal(t, settings{URL: set.SetAcpWebhook.URL, SecretSet: true}, read.AcpWebhook)
	api.do(t, m.Keys.LiveSecretKey, `{ acpWebhook `+fields+` }`, nil).decode(t, &read)
	require.Equal(t, settings{Livemode: true}, read.AcpWebhook, "live mode's are apart")

	out := api.do(t, m.Keys.LiveSecretKey, `mutation { setAcpWebhook(url: "http://10.0.0.1/x") { url } }`, nil)
	require.Equal(t, "BAD_USER_INPUT", out.code(t))
}
