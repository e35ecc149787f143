package graph

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"

	"agentpay/identity/devpartner"
)

// verifyPartner translates VerifyPartner: a good attestation raises the
// score and tier, a replay is BAD_USER_INPUT with the reason.
func TestVerifyPartnerMutation(t *testing.T) {
	dev, err := devpartner.New()
	require.NoError(t, err)
	api := newAgentAPI(t, agentAPIConfig{DevPartner: dev})
	reg := api.register(t, uniqueName(t, "partner"))
	att, err := api.Svc.DevPartnerAttest(context.Background(), reg.AgentID)
	require.NoError(t, err)

	const q = `mutation($p: String!, $a: String!) { verifyPartner(partner: $p, attestation: $a) {
		agentId partner verified trustScoreBefore trustScoreAfter tier message } }`
	vars := map[string]any{"p": devpartner.Name, "a": att.Attestation}
	var data struct {
		VerifyPartner struct {
			AgentID, Partner, Tier, Message   string
			Verified                          bool
			TrustScoreBefore, TrustScoreAfter int
		}
	}
	api.do(t, reg.APIKey, q, vars).decode(t, &data)
	v := data.VerifyPartner
	require.Equal(t, reg.AgentID, v.AgentID)
	require.Equal(t, devpartner.Name, v.Partner)
	require.True(t, v.Verified)
	require.Equal(t, 0, v.TrustScoreBefore)
	require.Equal(t, agentpay.TrustPartnerPoints, v.TrustScoreAfter)
	require.Equal(t, "T1", v.Tier)
	require.NotEmpty(t, v.Message)

	out := api.do(t, reg.APIKey, q, vars)
	require.Equal(t, "BAD_USER_INPUT", out.code(t))
	require.Contains(t, out.Errors[0].Message, "has already been used")

	out = api.do(t, "", q, vars)
	require.Equal(t, "UNAUTHENTICATED", out.code(t))
}
