package httpx

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
)

// TestRESTRendersActions: what leaves REST, MCP and the app names the
// rules' actions by their routes: a refusal's detail (through
// ErrorStatus), a stored text, an action's argument in its route's place.
func TestRESTRendersActions(t *testing.T) {
	t.Parallel()
	status, detail := ErrorStatus(agentpay.Invalid("signature", "get a new one from %s", agentpay.ActionGetSignatureMessage.Mark()), false)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "signature: get a new one from GET /agents/signature-message", detail)
	status, detail = ErrorStatus(fmt.Errorf("%w: no approved pairing (%s)", agentpay.ErrForbidden, agentpay.ActionRequestPairing.Mark()), false)
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, detail, "no approved pairing (POST /agents/me/pairings/request)")

	tests := []struct{ text, want string }{
		{"read it with " + agentpay.ActionReadCardRequest.Mark("0193-ab") + ".", "read it with GET /agents/me/pairings/card/requests/0193-ab."},
		{"read it with " + agentpay.ActionReadCardRequest.Mark() + ".", "read it with GET /agents/me/pairings/card/requests/{request_id}."},
		{`{"message":"roll (` + agentpay.ActionRollWebhookSecret.Mark() + `)"}`, `{"message":"roll (POST /checkout/merchants/me/webhook-secret/roll)"}`},
		{"nothing to render", "nothing to render"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, RenderREST(tt.text))
	}
}
