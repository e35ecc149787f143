package graph

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/internal/httpx"
)

func secret(key string) http.Header { return http.Header{httpx.MerchantKeyHeader: {key}} }

// TestGraphQLMillionDigitAmountRefusedByItsLength: the Decimal scalar and
// the metadata numbers refuse a million-digit number by its length (the
// message names the bound), whether it comes as a JSON number or a string.
func TestGraphQLMillionDigitAmountRefusedByItsLength(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Digits", agentpay.MerchantInput{})
	million := strings.Repeat("7", 1_000_000)
	for name, in := range map[string]map[string]any{
		"number":          {"amount": json.Number(million), "currency": "USD"},
		"string":          {"amount": million, "currency": "USD"},
		"metadata number": {"amount": 12.5, "currency": "USD", "metadata": map[string]any{"n": json.Number(million)}},
	} {
		t.Run(name, func(t *testing.T) {
			status, out := post(t, api.URL, secret(m.Keys.TestSecretKey),
				bytes.NewReader(operation(t, `mutation($in: CreateSessionInput!) { createSession(input: $in) { id } }`, map[string]any{"in": in})))
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, "BAD_USER_INPUT", out.code(t))
			require.Contains(t, out.Errors[0].Message, "must be a number of at most 64 characters")
		})
	}
}
