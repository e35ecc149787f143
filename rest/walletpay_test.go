package rest

import (
	"crypto/ecdsa"
	"math/big"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// signWalletPayment signs, as a browser wallet's eth_signTypedData_v4
// does, the TransferWithAuthorization of value to the deposit of a select
// answer under its eip712_domain, and answers the body the page posts.
func signWalletPayment(t *testing.T, key *ecdsa.PrivateKey, deposit map[string]any, value string, nonce byte) map[string]any {
	t.Helper()
	dom := deposit["eip712_domain"].(map[string]any)
	from := crypto.PubkeyToAddress(key.PublicKey).Hex()
	validBefore := strconv.FormatInt(time.Now().Add(10*time.Minute).Unix(), 10)
	n := hexutil.Encode(common.LeftPadBytes([]byte{nonce, 0x42}, 32))
	td := apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain": {{Name: "name", Type: "string"}, {Name: "version", Type: "string"}, {Name: "chainId", Type: "uint256"}, {Name: "verifyingContract", Type: "address"}},
			"TransferWithAuthorization": {{Name: "from", Type: "address"}, {Name: "to", Type: "address"}, {Name: "value", Type: "uint256"},
				{Name: "validAfter", Type: "uint256"}, {Name: "validBefore", Type: "uint256"}, {Name: "nonce", Type: "bytes32"}},
		},
		PrimaryType: "TransferWithAuthorization",
		Domain: apitypes.TypedDataDomain{
			Name: dom["name"].(string), Version: dom["version"].(string),
			ChainId:           math.NewHexOrDecimal256(int64(dom["chain_id"].(float64))),
			VerifyingContract: dom["verifying_contract"].(string),
		},
		Message: apitypes.TypedDataMessage{
			"from": from, "to": deposit["address"], "value": value, "validAfter": "0", "validBefore": validBefore, "nonce": n,
		},
	}
	hash, _, err := apitypes.TypedDataAndHash(td)
	require.NoError(t, err)
	sig, err := crypto.Sign(hash, key)
	require.NoError(t, err)
	sig[64] += 27
	v, _ := new(big.Int).SetString(value, 10)
	return map[string]any{
		"chain": "base", "from": from, "to": deposit["address"], "value": v.Int64(),
		"valid_after": 0, "valid_before": validBefore, "nonce": n, "signature": hexutil.Encode(sig),
	}
}

// A browser wallet's signed authorization pays a test session over REST:
// 200 with the payment detected (recorded from the relay's transaction)
// and the session confirming; posting it again answers the same payment,
// replayed; the payer held no ETH and still holds none. Refusals are
// {detail} with the spec's statuses and pay nothing.
func TestWalletPayOverREST(t *testing.T) {
	api := agentPayAPI(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 12.5, "currency": "USD"})
	short, _ := api.createSession(m.test(), map[string]any{"amount": 12.5, "currency": "USD"})
	id := sess.Session.ExternalID
	sel := api.do(http.MethodPost, "/checkout/pay/"+id+"/select", map[string]any{"chain": "base", "token": "USDC"}, nil)
	require.Equal(t, http.StatusOK, sel.Status, string(sel.Body))
	deposit := sel.Map(t)
	require.NotNil(t, deposit["eip712_domain"], "the select answer carries what the wallet signs under")

	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(key.PublicKey)
	api.Env.Fund(t, chains.Base, payer.Hex(), 12_500_000) // USDC only

	path := "/checkout/pay/" + id + "/authorization"
	body := signWalletPayment(t, key, deposit, "12500000", 1)
	resp := api.do(http.MethodPost, path, body, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Contains(t, string(resp.Body), `"amount_usd":12.5`)
	got := resp.Map(t)
	require.Equal(t, "detected", got["status"])
	require.Equal(t, "confirming", got["session_status"])
	require.Equal(t, payer.Hex(), got["from_address"])
	require.Equal(t, deposit["address"], got["to_address"])
	require.Regexp(t, `^pay_`, got["payment_id"])
	require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
	extra := sessionExtra(id)
	extra[got["payment_id"].(string)] = "<payment_id>"
	assertGolden(t, "wallet_pay_detected", resp.Body, extra)

	again := api.do(http.MethodPost, path, body, nil)
	require.Equal(t, http.StatusOK, again.Status, string(again.Body))
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, got["payment_id"], again.Map(t)["payment_id"])
	require.Equal(t, true, again.Map(t)["replayed"])

	eth, err := api.Env.EVM(chains.Base).Client().BalanceAt(t.Context(), payer, nil)
	require.NoError(t, err)
	require.Zero(t, eth.Sign(), "the treasury paid the gas")

	// Refusals, on a second session the payer cannot afford now.
	shortPath := "/checkout/pay/" + short.Session.ExternalID + "/authorization"
	sel = api.do(http.MethodPost, "/checkout/pay/"+short.Session.ExternalID+"/select", map[string]any{"chain": "base", "token": "USDC"}, nil)
	require.Equal(t, http.StatusOK, sel.Status, string(sel.Body))
	shortDeposit := sel.Map(t)
	valid := signWalletPayment(t, key, shortDeposit, "12500000", 2)
	with := func(k string, v any) map[string]any {
		out := map[string]any{}
		for kk, vv := range valid {
			out[kk] = vv
		}
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		path   string
		body   any
		status int
		detail string
	}{
		{"short of USDC", shortPath, valid, 400, "insufficient balance"},
		{"unknown session", "/checkout/pay/cs_test_nope/authorization", valid, 404, "not found"},
		{"paid session", path, signWalletPayment(t, key, deposit, "12500000", 3), 409, "payment"},
		{"missing signature", shortPath, with("signature", nil), 422, "signature: is required"},
		{"fractional value", shortPath, with("value", 12.5), 422, "value: must be a non-negative integer"},
		{"negative valid_before", shortPath, with("valid_before", "-1"), 422, "valid_before: must be a non-negative integer"},
		{"not the amount", shortPath, signWalletPayment(t, key, shortDeposit, "12000000", 4), 422, "value"},
		{"signed by another key", shortPath, with("from", common.HexToAddress("0x1").Hex()), 422, "signature"},
		{"solana", shortPath, with("chain", "solana"), 422, "chain"},
		{"unknown field", shortPath, with("amount", 1), 422, "unknown field"},
		{"not JSON", shortPath, "{", 422, "malformed JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, tc.path, tc.body, nil)
			require.Equal(t, tc.status, resp.Status, string(resp.Body))
			require.Contains(t, resp.Map(t)["detail"], tc.detail)
		})
	}
	st := api.do(http.MethodGet, "/checkout/pay/"+short.Session.ExternalID+"/status", nil, nil)
	require.Equal(t, http.StatusOK, st.Status)
	require.Equal(t, "detecting", st.Map(t)["status"], "no refusal paid anything")
	require.EqualValues(t, 0, st.Map(t)["amount_paid"])
}
