package agentpay

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// TestX402Reason: refusals of a payment are named as x402 names them;
// anything else is no refusal (an internal error stays an error).
func TestX402Reason(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{Invalid("signature", "bad"), "invalid_exact_evm_payload_signature"},
		{Invalid("authorization.value", "short"), "invalid_exact_evm_payload_authorization_value"},
		{Invalid("paymentPayload.payload.authorization.value", "x"), "invalid_exact_evm_payload_authorization_value"},
		{Invalid("authorization.to", "x"), "invalid_exact_evm_payload_recipient_mismatch"},
		{authorizationError(chains.RefusedAuthorization(chains.AuthorizationExpired, "validBefore 1 is past")), "invalid_exact_evm_payload_authorization_valid_before"},
		{authorizationError(chains.RefusedAuthorization(chains.AuthorizationNotYetValid, "validAfter 9 has not passed")), "invalid_exact_evm_payload_authorization_valid_after"},
		{authorizationError(chains.RefusedAuthorization(chains.AuthorizationInsufficient, "short")), "insufficient_funds"},
		{authorizationError(chains.RefusedAuthorization(chains.AuthorizationUsed, "used")), "invalid_payment"},
		{Invalid("network", "x"), "invalid_network"},
		{Invalid("chain", "x"), "invalid_network"},
		{Invalid("scheme", "x"), "unsupported_scheme"},
		{Invalid("x402Version", "x"), "invalid_x402_version"},
		{Invalid("authorization.nonce", "x"), "invalid_payload"},
		{fmt.Errorf("%w: session paid", ErrConflict), "invalid_payment"},
	} {
		got, ok := x402Reason(tc.err)
		require.True(t, ok, "%v", tc.err)
		require.Equal(t, tc.reason, got, "%v", tc.err)
	}
	_, ok := x402Reason(fmt.Errorf("database down"))
	require.False(t, ok)
}

// TestDecodeX402Payment: X-PAYMENT is base64 (standard or URL-safe) of
// the payload's JSON, bounded; anything else is a ValidationError.
func TestDecodeX402Payment(t *testing.T) {
	payload := `{"x402Version":1,"scheme":"exact","network":"base-sepolia","payload":{"signature":"0xab","authorization":{"from":"0x1","to":"0x2","value":"5","validAfter":"0","validBefore":"9","nonce":"0x3"}}}`
	for _, enc := range []string{base64.StdEncoding.EncodeToString([]byte(payload)), base64.RawURLEncoding.EncodeToString([]byte(payload))} {
		p, err := DecodeX402Payment(enc)
		require.NoError(t, err)
		require.Equal(t, "base-sepolia", p.Network)
		require.Equal(t, "5", p.Payload.Authorization.Value)
		req, err := p.request("cs_test_x", ModeTest)
		require.NoError(t, err)
		require.Equal(t, "base", req.Chain)
		require.Equal(t, "0xab", req.Authorization.Signature)
		_, err = p.request("cs_live_x", ModeLive)
		require.True(t, IsValidation(err), "base-sepolia is no live network")
	}
	for _, bad := range []string{"!!", base64.StdEncoding.EncodeToString([]byte("[1]")), strings.Repeat("A", X402PaymentMaxBytes+1)} {
		_, err := DecodeX402Payment(bad)
		require.True(t, IsValidation(err), "%q: %v", bad[:2], err)
	}
}
