package graph

import (
	"agentpay"
	"agentpay/graph/model"
)

// acpWebhook is one mode's ACP webhook settings as GraphQL shows them.
func acpWebhook(st *agentpay.ACPWebhookSettings) *model.AcpWebhook {
	out := &model.AcpWebhook{URL: nonEmpty(st.URL), Livemode: st.Livemode, SecretSet: st.SecretSet}
	if st.Secret != "" {
		secret, warning := st.Secret, agentpay.ACPWebhookSecretWarning
		out.Secret, out.Warning = &secret, &warning
	}
	return out
}
