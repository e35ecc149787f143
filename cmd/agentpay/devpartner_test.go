package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/stretchr/testify/require"

	"agentpay/identity/devpartner"
)

// devPartnerFlow: on `agentpay dev` at base, /dev/partner/attest mints an
// attestation that verify-partner accepts (the dev partner is configured
// without PARTNERS), signed by the key /dev/partner/jwks.json serves; the
// agent is T1 at once.
func devPartnerFlow(t *testing.T, base, banner string) {
	require.Contains(t, banner, base+"/dev/partner/attest")
	var reg struct {
		AgentID string `json:"agent_id"`
		APIKey  string `json:"api_key"`
	}
	require.Equal(t, http.StatusCreated, postJSON(t, base+"/agents/quick-register", `{"username":"dev_partner_agent"}`, &reg))

	var att struct {
		Partner, Attestation, AgentID string
		ExpiresAt                     string `json:"expires_at"`
	}
	require.Equal(t, http.StatusOK, postJSON(t, base+"/dev/partner/attest", `{"agent_id":"`+reg.AgentID+`"}`, &att))
	require.Equal(t, devpartner.Name, att.Partner)
	require.NotEmpty(t, att.ExpiresAt)

	// The served key set verifies the attestation, as a partner's would.
	resp, err := http.Get(base + "/dev/partner/jwks.json")
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	set, err := jwk.Parse(raw)
	require.NoError(t, err)
	require.Equal(t, 1, set.Len())
	key, _ := set.Key(0)
	isPrivate, err := jwk.IsPrivateKey(key)
	require.NoError(t, err)
	require.False(t, isPrivate, "only the public key is served")
	_, err = jws.Verify([]byte(att.Attestation), jws.WithKey(jwa.ES256(), key))
	require.NoError(t, err)

	var unknown map[string]any
	require.Equal(t, http.StatusNotFound, postJSON(t, base+"/dev/partner/attest", `{"agent_id":"00000000-0000-4000-8000-000000000000"}`, &unknown))

	var out map[string]any
	body, err := json.Marshal(map[string]string{"partner": devpartner.Name, "attestation": att.Attestation})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, doAgentJSON(t, http.MethodPost, base+"/agents/me/verify-partner", reg.APIKey, string(body), &out), out)
	require.Equal(t, "T1", out["tier"])
	require.Equal(t, map[string]any{"before": 0.0, "after": 30.0}, out["trust_score"])
	// The same attestation again is a replay.
	require.Equal(t, http.StatusBadRequest, doAgentJSON(t, http.MethodPost, base+"/agents/me/verify-partner", reg.APIKey, string(body), &out))
	require.Contains(t, out["detail"], "has already been used")
}
