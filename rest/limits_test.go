package rest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/internal/httpx"
)

// millionDigits is an amount whose parse alone (decimal.NewFromString is
// quadratic) costs seconds of CPU; the body carrying it is under the 1 MiB
// cap, so only the length check stands in its way.
var millionDigits = strings.Repeat("7", 1_000_000)

// TestMillionDigitAmountRefusedByItsLength: a JSON number of a million
// digits is refused by its length (the message names the bound) wherever
// an amount or a metadata number is read; a parse would have answered
// "must be at most ..." or taken seconds.
func TestMillionDigitAmountRefusedByItsLength(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	agent := api.register("digits_agent")
	mc := api.registerMerchant(nil)
	tooLong := "must be a number of at most 64 characters"

	resp := api.do(http.MethodPost, "/agents/me/wallet/send",
		`{"to_username":"someone","amount_usd":`+millionDigits+`}`, agentKey(agent.APIKey))
	require.Equal(t, http.StatusBadRequest, resp.Status)
	require.Equal(t, "amount_usd: "+tooLong, resp.Map(t)["detail"])

	resp = api.do(http.MethodPost, "/checkout/sessions", `{"amount":`+millionDigits+`,"currency":"USD"}`, mc.test())
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	require.Equal(t, "amount: "+tooLong, resp.Map(t)["detail"])

	resp = api.do(http.MethodPost, "/checkout/sessions",
		`{"amount":12.5,"currency":"USD","metadata":{"n":`+millionDigits+`}}`, mc.test())
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	require.Equal(t, "metadata.n: "+tooLong, resp.Map(t)["detail"])

	// At the bound an amount is read and judged as usual.
	resp = api.do(http.MethodPost, "/checkout/sessions",
		`{"amount":12.5`+strings.Repeat("0", agentpay.MaxNumberLen-4)+`,"currency":"USD"}`, mc.test())
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
}

// TestRequestBodyCap: every route's body is capped at 1 MiB. A body
// declared larger is refused with 413 before it is read; one sent without
// a length is refused when reading passes the cap; one at the cap is read.
func TestRequestBodyCap(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	mc := api.registerMerchant(nil)
	body := func(n int) []byte {
		b := []byte(`{"amount":12.5,"currency":"USD"}`)
		return append(b, bytes.Repeat([]byte(" "), n-len(b))...)
	}

	resp := api.do(http.MethodPost, "/checkout/sessions", body(httpx.MaxBodyBytes+1), mc.test())
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.Status)
	require.Equal(t, "request body must be at most 1048576 bytes", resp.Map(t)["detail"])
	resp = api.do(http.MethodPost, "/agents/quick-register", body(httpx.MaxBodyBytes+1), nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.Status)

	// Chunked: no length to refuse up front.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, api.Server.URL+"/checkout/sessions",
		io.MultiReader(bytes.NewReader(body(httpx.MaxBodyBytes+1))))
	require.NoError(t, err)
	require.Equal(t, int64(0), req.ContentLength, "sent chunked")
	req.Header = secretKey(mc.TestSecret)
	req.Header.Set("Content-Type", "application/json")
	res, err := api.Server.Client().Do(req)
	require.NoError(t, err)
	out, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, string(out))
	validateOpenAPI(t, req, nil, res, out)

	resp = api.do(http.MethodPost, "/checkout/sessions", body(httpx.MaxBodyBytes), mc.test())
	require.Equal(t, http.StatusCreated, resp.Status, "a body of exactly 1 MiB is read")
}
