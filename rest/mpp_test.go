package rest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/internal/clock"
	"agentpay/internal/testenv"
)

// mppDo is testAPI.do for MPP answers (402 bodies are problem+json),
// validated against openapi.json all the same.
func (a *testAPI) mppDo(path string, header http.Header) apiResponse {
	a.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, a.Server.URL+path, nil)
	require.NoError(a.t, err)
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := a.Server.Client().Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	validateOpenAPI(a.t, req, nil, resp, out)
	return apiResponse{Status: resp.StatusCode, Header: resp.Header, Body: out}
}

var mppParam = regexp.MustCompile(`([a-z]+)="((?:[^"\\]|\\.)*)"`)

// parseMPPChallenges reads WWW-Authenticate: Payment values (one
// challenge each, as the service writes them).
func parseMPPChallenges(t testing.TB, h http.Header) []agentpay.MPPChallenge {
	t.Helper()
	var out []agentpay.MPPChallenge
	for _, v := range h.Values("WWW-Authenticate") {
		require.True(t, strings.HasPrefix(v, "Payment "), v)
		p := map[string]string{}
		for _, m := range mppParam.FindAllStringSubmatch(v, -1) {
			p[m[1]] = m[2]
		}
		out = append(out, agentpay.MPPChallenge{ID: p["id"], Realm: p["realm"], Method: p["method"], Intent: p["intent"],
			Request: p["request"], Expires: p["expires"]})
	}
	return out
}

func mppRequestOf(t testing.TB, c agentpay.MPPChallenge) agentpay.MPPChargeRequest {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(c.Request)
	require.NoError(t, err)
	var req agentpay.MPPChargeRequest
	require.NoError(t, json.Unmarshal(raw, &req))
	return req
}

// mppCredentialFor signs c as mppx's evm charge does: an EIP-3009
// authorization of the request's amount to its recipient, validBefore the
// challenge's expiry, nonce the challenge hash; value overrides the
// amount when not empty, nonce the nonce when not nil.
func mppCredentialFor(t testing.TB, key *ecdsa.PrivateKey, domain chains.TokenDomain, c agentpay.MPPChallenge, value string, nonce *[32]byte) string {
	t.Helper()
	req := mppRequestOf(t, c)
	if value == "" {
		value = req.Amount
	}
	n := agentpay.MPPChallengeHash(c.ID, c.Realm)
	if nonce != nil {
		n = *nonce
	}
	expires, err := time.Parse(time.RFC3339, c.Expires)
	require.NoError(t, err)
	v, ok := new(big.Int).SetString(value, 10)
	require.True(t, ok)
	from := crypto.PubkeyToAddress(key.PublicKey)
	dom := crypto.Keccak256(
		crypto.Keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")),
		crypto.Keccak256([]byte(domain.Name)), crypto.Keccak256([]byte(domain.Version)),
		math.U256Bytes(new(big.Int).SetUint64(req.MethodDetails.ChainID)), common.LeftPadBytes(common.HexToAddress(req.Currency).Bytes(), 32),
	)
	structHash := crypto.Keccak256(
		crypto.Keccak256([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")),
		common.LeftPadBytes(from.Bytes(), 32), common.LeftPadBytes(common.HexToAddress(req.Recipient).Bytes(), 32),
		math.U256Bytes(v), math.U256Bytes(big.NewInt(0)), math.U256Bytes(big.NewInt(expires.Unix())), n[:],
	)
	sig, err := crypto.Sign(crypto.Keccak256([]byte("\x19\x01"), dom, structHash), key)
	require.NoError(t, err)
	sig[64] += 27
	cred := map[string]any{
		"challenge": c,
		"payload": map[string]any{
			"type": "authorization", "from": from.Hex(), "to": common.HexToAddress(req.Recipient).Hex(), "value": value,
			"validAfter": "0", "validBefore": fmt.Sprint(expires.Unix()), "nonce": "0x" + common.Bytes2Hex(n[:]),
			"signature": "0x" + common.Bytes2Hex(sig),
		},
		"source": fmt.Sprintf("did:pkh:eip155:%d:%s", req.MethodDetails.ChainID, from.Hex()),
	}
	raw, err := json.Marshal(cred)
	require.NoError(t, err)
	return "Payment " + base64.RawURLEncoding.EncodeToString(raw)
}

func mppReceiptOf(t testing.TB, h http.Header) agentpay.MPPReceipt {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(h.Get("Payment-Receipt"))
	require.NoError(t, err)
	var r agentpay.MPPReceipt
	require.NoError(t, json.Unmarshal(raw, &r))
	return r
}

func tokenDomain(t testing.TB, api *testAPI) chains.TokenDomain {
	t.Helper()
	d, err := api.Env.Ledger(chains.Base).(chains.AuthorizationRelayer).TokenDomain(context.Background())
	require.NoError(t, err)
	return d
}

func sessionPayments(t testing.TB, api *testAPI, externalID string) int {
	t.Helper()
	n, err := api.Env.DB.Ent.Payment.Query().Where(payment.HasSessionWith(checkoutsession.ExternalID(externalID))).Count(context.Background())
	require.NoError(t, err)
	return n
}

// TestMPPSession: a session's MPP address answers 402 with the evm charge
// challenge (HMAC-bound id, expiry, the session's amount, USDC, deposit
// address and chain id) and the payment-required problem; refused
// credentials are 402 with the draft's problem and fresh challenges,
// changing nothing; a good one is relayed (200, Payment-Receipt); the same
// credential again answers the same payment, once paid.
func TestMPPSession(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 12.5, "currency": "USD"})
	id := sess.Session.ExternalID
	path := "/checkout/pay/" + id + "/mpp"
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(key.PublicKey).Hex()
	api.Env.Fund(t, chains.Base, payer, 20_000_000)
	domain := tokenDomain(t, api)

	resp := api.mppDo(path, nil)
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	cs := parseMPPChallenges(t, resp.Header)
	require.Len(t, cs, 1)
	c := cs[0]
	require.Equal(t, "evm", c.Method)
	require.Equal(t, "charge", c.Intent)
	require.Equal(t, strings.TrimPrefix(api.Server.URL, "http://"), c.Realm)
	exp, err := time.Parse(time.RFC3339, c.Expires)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(agentpay.MPPChallengeTTL), exp, 5*time.Second)
	req := mppRequestOf(t, c)
	require.Equal(t, "12500000", req.Amount)
	require.Equal(t, api.Env.Ledger(chains.Base).Token(), req.Currency)
	require.Equal(t, uint64(84532), req.MethodDetails.ChainID)
	require.Equal(t, []string{"authorization"}, req.MethodDetails.CredentialTypes)
	require.Equal(t, 6, req.MethodDetails.Decimals)
	require.Equal(t, id, req.ExternalID)
	d, err := api.Svc.SelectPaymentMethod(context.Background(), id, "", "base", "USDC")
	require.NoError(t, err)
	require.Equal(t, d.Address, req.Recipient)
	// The request is JCS: what a client re-serializes comes back byte-equal.
	raw, _ := base64.RawURLEncoding.DecodeString(c.Request)
	require.Equal(t, `{"amount":"12500000","currency":"`+req.Currency+`","externalId":"`+id+`","methodDetails":{"chainId":84532,"credentialTypes":["authorization"],"decimals":6},"recipient":"`+req.Recipient+`"}`, string(raw))
	assertGolden(t, "mpp_payment_required", resp.Body, nil)

	// Refusals: 402, the problem, fresh challenges; nothing moves.
	tampered := c
	tamperedReq := req
	tamperedReq.Amount = "1"
	rawT, _ := json.Marshal(tamperedReq)
	tampered.Request = base64.RawURLEncoding.EncodeToString(rawT)
	otherNonce := [32]byte{1}
	expired := c
	expired.Expires = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, header, problem, detail string
	}{
		{"not base64", "Payment not*base64", "malformed-credential", "base64url"},
		{"not json", "Payment " + base64.RawURLEncoding.EncodeToString([]byte("{")), "malformed-credential", "JSON"},
		{"tampered request", mppCredentialFor(t, key, domain, tampered, "1", nil), "invalid-challenge", "does not bind"},
		{"expiry moved", mppCredentialFor(t, key, domain, expired, "", nil), "invalid-challenge", "does not bind"},
		{"less than due", mppCredentialFor(t, key, domain, c, "12499999", nil), "verification-failed", "payload.value"},
		{"another nonce", mppCredentialFor(t, key, domain, c, "", &otherNonce), "verification-failed", "challenge hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.mppDo(path, http.Header{"Authorization": {tc.header}})
			require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
			var p mppProblem
			resp.JSON(t, &p)
			require.Equal(t, agentpay.MPPProblemBase+tc.problem, p.Type, string(resp.Body))
			require.Contains(t, p.Detail, tc.detail)
			require.Len(t, parseMPPChallenges(t, resp.Header), 1, "a fresh challenge")
			require.Empty(t, resp.Header.Get("Payment-Receipt"))
		})
	}
	require.Equal(t, int64(20_000_000), api.Env.Balance(t, chains.Base, payer).Int64())
	require.Equal(t, 0, sessionPayments(t, api, id))

	cred := mppCredentialFor(t, key, domain, c, "", nil)
	resp = api.mppDo(path, http.Header{"Authorization": {cred}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, "private", resp.Header.Get("Cache-Control"))
	body := resp.Map(t)
	require.Equal(t, "detected", body["status"])
	require.Equal(t, "confirming", body["session_status"])
	require.Equal(t, payer, body["payer"])
	rc := mppReceiptOf(t, resp.Header)
	require.Equal(t, "evm", rc.Method)
	require.Equal(t, "success", rc.Status)
	require.Equal(t, c.ID, rc.ChallengeID)
	require.Equal(t, body["tx_hash"], rc.Reference)
	require.Equal(t, uint64(84532), rc.ChainID)
	require.Equal(t, id, rc.ExternalID)
	_, err = time.Parse(time.RFC3339, rc.Timestamp)
	require.NoError(t, err)
	extra := sessionExtra(id)
	extra[body["payment_id"].(string)] = "<payment_id>"
	extra[body["tx_hash"].(string)] = "<tx_hash>"
	extra[payer] = "<payer>"
	assertGolden(t, "mpp_paid", resp.Body, extra)

	// A replayed credential: the same payment, one transfer.
	again := api.mppDo(path, http.Header{"Authorization": {cred}})
	require.Equal(t, http.StatusOK, again.Status, string(again.Body))
	require.Equal(t, true, again.Map(t)["replayed"])
	require.Equal(t, body["payment_id"], again.Map(t)["payment_id"])
	require.Equal(t, rc.Reference, mppReceiptOf(t, again.Header).Reference)
	require.Equal(t, int64(7_500_000), api.Env.Balance(t, chains.Base, payer).Int64(), "paid once")
	require.Equal(t, 1, sessionPayments(t, api, id))
	eth, err := api.Env.EVM(chains.Base).Client().BalanceAt(t.Context(), common.HexToAddress(payer), nil)
	require.NoError(t, err)
	require.Zero(t, eth.Sign(), "the payer holds no gas; the treasury paid it")

	// Paid: no more challenges.
	resp = api.mppDo(path, nil)
	require.Equal(t, http.StatusConflict, resp.Status, string(resp.Body))
	resp = api.mppDo("/checkout/pay/cs_test_nope/mpp", nil)
	require.Equal(t, http.StatusNotFound, resp.Status, string(resp.Body))
}

// TestMPPBesideX402: the x402 address's 402 carries the session's
// Payment challenge beside x402's body, and takes its credential.
func TestMPPBesideX402(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
	path := "/checkout/pay/" + sess.Session.ExternalID + "/x402"
	resp := api.x402Do(http.MethodGet, path, nil, nil)
	require.Equal(t, http.StatusPaymentRequired, resp.Status)
	var ch x402ChallengeBody
	resp.JSON(t, &ch)
	require.Len(t, ch.Accepts, 1, "x402's body is unchanged")
	cs := parseMPPChallenges(t, resp.Header)
	require.Len(t, cs, 1)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	api.Env.Fund(t, chains.Base, crypto.PubkeyToAddress(key.PublicKey).Hex(), 1_000_000)
	// Not validated against the x402 operation, whose 200 carries
	// X-PAYMENT-RESPONSE: an MPP payment's answer carries Payment-Receipt.
	req, err := http.NewRequest(http.MethodGet, api.Server.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", mppCredentialFor(t, key, tokenDomain(t, api), cs[0], "", nil))
	paid, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer paid.Body.Close()
	body, _ := io.ReadAll(paid.Body)
	require.Equal(t, http.StatusOK, paid.StatusCode, string(body))
	require.Equal(t, cs[0].ID, mppReceiptOf(t, paid.Header).ChallengeID)
	require.Empty(t, paid.Header.Get("X-Payment-Response"))
}

// TestMPPExpiredChallenge: past its expiry a challenge's credential is
// refused (402 payment-expired, nothing relayed), unless its
// authorization was already relayed for the session: then the payment it
// made is answered, so a client retrying after a timeout learns the
// outcome instead of paying again.
func TestMPPExpiredChallenge(t *testing.T) {
	var offset atomic.Int64
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: time.Second,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest,
		Clock: clock.Func(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })}})
	m := api.registerMerchant(nil)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(key.PublicKey).Hex()
	api.Env.Fund(t, chains.Base, payer, 5_000_000)
	domain := tokenDomain(t, api)
	later := int64(agentpay.MPPChallengeTTL + time.Minute)

	// Unused and expired: refused, nothing moves.
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
	path := "/checkout/pay/" + sess.Session.ExternalID + "/mpp"
	c := parseMPPChallenges(t, api.mppDo(path, nil).Header)[0]
	cred := mppCredentialFor(t, key, domain, c, "", nil)
	offset.Store(later)
	resp := api.mppDo(path, http.Header{"Authorization": {cred}})
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	var p mppProblem
	resp.JSON(t, &p)
	require.Equal(t, agentpay.MPPProblemBase+"payment-expired", p.Type)
	require.Equal(t, c.ID, p.ChallengeID)
	require.Equal(t, int64(5_000_000), api.Env.Balance(t, chains.Base, payer).Int64())
	require.Equal(t, 0, sessionPayments(t, api, sess.Session.ExternalID))

	// Used in time, then sent again after expiry: the same payment.
	offset.Store(0)
	c = parseMPPChallenges(t, api.mppDo(path, nil).Header)[0]
	cred = mppCredentialFor(t, key, domain, c, "", nil)
	paid := api.mppDo(path, http.Header{"Authorization": {cred}})
	require.Equal(t, http.StatusOK, paid.Status, string(paid.Body))
	offset.Store(later)
	again := api.mppDo(path, http.Header{"Authorization": {cred}})
	require.Equal(t, http.StatusOK, again.Status, string(again.Body))
	require.Equal(t, true, again.Map(t)["replayed"])
	require.Equal(t, paid.Map(t)["payment_id"], again.Map(t)["payment_id"])
	require.Equal(t, mppReceiptOf(t, paid.Header).Reference, mppReceiptOf(t, again.Header).Reference)
	require.Equal(t, int64(4_000_000), api.Env.Balance(t, chains.Base, payer).Int64(), "paid once")
	require.Equal(t, 1, sessionPayments(t, api, sess.Session.ExternalID))
}

// TestMPPIdempotencyKey: under an Idempotency-Key a retry that asked for
// a fresh challenge and signed again (another nonce, as a client does
// after a timeout) is answered the first payment, replayed, and relays
// nothing, before and after its challenge expires; without the key the
// same retry is refused (the session is paid), and another payer under
// the key is 422. The key is the session's, shared with x402's
// payment-identifier: a payment made in either dialect is answered to a
// retry in the other, one transfer on chain.
func TestMPPIdempotencyKey(t *testing.T) {
	var offset atomic.Int64
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: time.Second,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest,
		Clock: clock.Func(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })}})
	m := api.registerMerchant(nil)
	payer := newX402Payer(t, api, 10_000_000)
	other := newX402Payer(t, api, 10_000_000)
	domain := tokenDomain(t, api)
	keyed := func(cred, key string) http.Header {
		return http.Header{"Authorization": {cred}, "Idempotency-Key": {key}}
	}
	// challenge is a fresh challenge: a later expiry, so another id and
	// another nonce to sign.
	challenge := func(path string) agentpay.MPPChallenge {
		offset.Add(int64(2 * time.Second))
		return parseMPPChallenges(t, api.mppDo(path, nil).Header)[0]
	}

	sess, _ := api.createSession(m.test(), map[string]any{"amount": 2, "currency": "USD"})
	id := sess.Session.ExternalID
	path := "/checkout/pay/" + id + "/mpp"
	c1, c2, c3 := challenge(path), challenge(path), challenge(path)
	require.NotEqual(t, c1.ID, c2.ID)
	const key = "mpp-retry-5be1c7d0a2f94e31"

	resp := api.mppDo(path, keyed(mppCredentialFor(t, payer.key, domain, c1, "", nil), key))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	first := resp.Map(t)
	require.Equal(t, false, first["replayed"])
	firstReceipt := mppReceiptOf(t, resp.Header)

	t.Run("a new credential under the key is the first payment", func(t *testing.T) {
		resp := api.mppDo(path, keyed(mppCredentialFor(t, payer.key, domain, c2, "", nil), `"`+key+`"`))
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		again := resp.Map(t)
		require.Equal(t, true, again["replayed"])
		require.Equal(t, first["payment_id"], again["payment_id"])
		require.Equal(t, first["tx_hash"], again["tx_hash"])
		rc := mppReceiptOf(t, resp.Header)
		require.Equal(t, firstReceipt.Reference, rc.Reference)
		require.Equal(t, c2.ID, rc.ChallengeID, "the receipt answers the credential sent")
	})
	t.Run("without the key the retry is another payment, refused", func(t *testing.T) {
		resp := api.mppDo(path, http.Header{"Authorization": {mppCredentialFor(t, payer.key, domain, c3, "", nil)}})
		require.Equal(t, http.StatusConflict, resp.Status, string(resp.Body))
	})
	t.Run("another payer under the key", func(t *testing.T) {
		resp := api.mppDo(path, keyed(mppCredentialFor(t, other.key, domain, c3, "", nil), key))
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
		require.Contains(t, resp.Map(t)["detail"], "Idempotency-Key")
	})
	t.Run("a malformed key", func(t *testing.T) {
		resp := api.mppDo(path, keyed(mppCredentialFor(t, payer.key, domain, c3, "", nil), strings.Repeat("k", agentpay.IdempotencyKeyMaxLen+1)))
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
		require.Contains(t, resp.Map(t)["detail"], "Idempotency-Key: must be 1 to 255")
	})
	t.Run("past expiry the key answers its payment", func(t *testing.T) {
		later := offset.Load() + int64(agentpay.MPPChallengeTTL+time.Minute)
		offset.Store(later)
		cred := mppCredentialFor(t, payer.key, domain, c3, "", nil)
		resp := api.mppDo(path, http.Header{"Authorization": {cred}})
		require.Equal(t, http.StatusConflict, resp.Status, "never relayed, expired, the session paid: %s", resp.Body)
		resp = api.mppDo(path, keyed(cred, key))
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		require.Equal(t, first["payment_id"], resp.Map(t)["payment_id"])
		offset.Store(0)
	})
	require.Equal(t, int64(8_000_000), api.Env.Balance(t, chains.Base, payer.addr).Int64(), "paid once")
	require.Equal(t, int64(10_000_000), api.Env.Balance(t, chains.Base, other.addr).Int64())
	require.Equal(t, 1, sessionPayments(t, api, id))

	// One key across the two dialects, both ways.
	for _, tc := range []struct {
		name   string
		x402At int // which of the two requests is x402's
	}{{"x402 then MPP", 0}, {"MPP then x402", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			offset.Store(0)
			sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
			id := sess.Session.ExternalID
			mppPath, x402Path := "/checkout/pay/"+id+"/mpp", "/checkout/pay/"+id+"/x402"
			c := challenge(mppPath)
			pr := paymentRequired(t, api.x402Do(http.MethodGet, x402Path, nil, nil).Header)
			require.Equal(t, mppRequestOf(t, c).Recipient, pr.Accepts[0].PayTo, "one deposit address for both dialects")
			key := "pay_" + strings.ReplaceAll(tc.name, " ", "_") + "_3f9a61c2"
			before := api.Env.Balance(t, chains.Base, payer.addr).Int64()
			var answers []map[string]any
			for i := range 2 {
				var resp apiResponse
				if i == tc.x402At {
					resp = api.x402Do(http.MethodGet, x402Path, nil, payer.payV2(t, pr.Resource, pr.Accepts[0], "1000000", key))
				} else {
					resp = api.mppDo(mppPath, keyed(mppCredentialFor(t, payer.key, domain, c, "", nil), key))
				}
				require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
				answers = append(answers, resp.Map(t))
			}
			require.Equal(t, false, answers[0]["replayed"])
			require.Equal(t, true, answers[1]["replayed"])
			require.Equal(t, answers[0]["payment_id"], answers[1]["payment_id"])
			require.Equal(t, answers[0]["tx_hash"], answers[1]["tx_hash"])
			require.Equal(t, before-1_000_000, api.Env.Balance(t, chains.Base, payer.addr).Int64(), "one transfer")
			require.Equal(t, 1, sessionPayments(t, api, id))
		})
	}
}

// waitConfirmed scans until the session is confirmed (the devnet seals a
// block a second).
func waitConfirmed(t testing.TB, api *testAPI, m merchantCreds, externalID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := api.Svc.ScanDeposits(context.Background(), agentpay.ModeTest, chains.Base)
		require.NoError(t, err)
		var got sessionEnvelope
		api.do(http.MethodGet, "/checkout/sessions/"+externalID, nil, m.test()).JSON(t, &got)
		if got.Session.Status == string(checkoutsession.StatusConfirmed) {
			return
		}
		require.True(t, time.Now().Before(deadline), "session %s still %s", externalID, got.Session.Status)
		time.Sleep(250 * time.Millisecond)
	}
}

// mppNodeDir is testdata/mppclient with its node_modules, or a skip when
// node is missing.
func mppNodeDir(t testing.TB) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the mppx npm client cannot run (TestMPPSession covers the protocol)")
	}
	dir, err = filepath.Abs(filepath.Join("..", "testdata", "mppclient"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "mppx")); err != nil {
		t.Fatalf("%s has no node_modules: run make deps (npm ci there)", dir)
	}
	return node, dir
}

// runMPPClient runs pay.mjs: mppx 0.11.0's fetch paying url with key.
func runMPPClient(t testing.TB, api *testAPI, node, dir, url string, key *ecdsa.PrivateKey, env ...string) map[string]any {
	t.Helper()
	d := tokenDomain(t, api)
	cmd := exec.Command(node, "pay.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append(env, "SESSION_URL="+url, "PAYER_KEY=0x"+common.Bytes2Hex(crypto.FromECDSA(key)),
		"TOKEN_NAME="+d.Name, "TOKEN_VERSION="+d.Version)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node pay.mjs: %s", stderr.String())
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	return got
}

// TestMPPNodeClient: mppx 0.11.0 (npm, testdata/mppclient) under node
// pays a base devnet session at its x402 address by the MPP challenge
// beside x402's, from a wallet holding USDC and no gas; the credential
// sent again answers the same payment; the session ends confirmed with
// one payment; a refund through the refunds API goes to the payer.
func TestMPPNodeClient(t *testing.T) {
	node, dir := mppNodeDir(t)
	api := x402API(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 1.25, "currency": "USD"})
	id := sess.Session.ExternalID
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(key.PublicKey).Hex()
	api.Env.Fund(t, chains.Base, payer, 10_000_000)

	got := runMPPClient(t, api, node, dir, api.Server.URL+"/checkout/pay/"+id+"/x402", key)
	require.Equal(t, float64(200), got["status"], "%v", got)
	require.Equal(t, float64(1), got["credentials"], "one credential sent")
	body := got["body"].(map[string]any)
	require.Equal(t, "detected", body["status"])
	require.Equal(t, 1.25, body["amount_usd"])
	require.Equal(t, payer, body["payer"])
	rc := got["receipt"].(map[string]any)
	require.Equal(t, "evm", rc["method"])
	require.Equal(t, "success", rc["status"])
	require.Equal(t, body["tx_hash"], rc["reference"])
	require.Equal(t, float64(84532), rc["chainId"])
	replay := got["replay"].(map[string]any)
	require.Equal(t, float64(200), replay["status"], "%v", replay)
	require.Equal(t, true, replay["body"].(map[string]any)["replayed"])
	require.Equal(t, body["payment_id"], replay["body"].(map[string]any)["payment_id"])

	waitConfirmed(t, api, m, id)
	require.Equal(t, 1, sessionPayments(t, api, id), "one payment")
	require.Equal(t, int64(8_750_000), api.Env.Balance(t, chains.Base, payer).Int64(), "paid once")
	eth, err := api.Env.EVM(chains.Base).Client().BalanceAt(t.Context(), common.HexToAddress(payer), nil)
	require.NoError(t, err)
	require.Zero(t, eth.Sign(), "the payer never held gas")

	// Refunded through the one refunds API: to the payer by default.
	resp := api.do(http.MethodPost, "/checkout/sessions/"+id+"/refunds", map[string]any{"reason": "requested_by_customer"},
		http.Header{"X-Checkout-Secret-Key": {m.TestSecret}, "Idempotency-Key": {"mpp-refund-" + id}})
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	var refund refundBody
	resp.JSON(t, &refund)
	require.Equal(t, payer, common.HexToAddress(refund.ToAddress).Hex(), "an MPP payment is refunded to the payer's address")
	require.Equal(t, body["payment_id"], refund.PaymentID)
}

// TestMPPNodeClientIdempotencyKey: mppx 0.11.0 (npm, testdata/mppclient)
// under node pays a session with an Idempotency-Key (mppx keeps the
// caller's header on its paid retry); the credential mppx signed for the
// same session from another challenge, as it signs when it starts again
// after a timeout, is answered under the key with the first payment, and
// refused without it; one payment, one transfer.
func TestMPPNodeClientIdempotencyKey(t *testing.T) {
	node, dir := mppNodeDir(t)
	var offset atomic.Int64
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: time.Second,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest,
		Clock: clock.Func(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })}})
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 1.25, "currency": "USD"})
	path := "/checkout/pay/" + sess.Session.ExternalID + "/mpp"
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(key.PublicKey).Hex()
	api.Env.Fund(t, chains.Base, payer, 10_000_000)
	const idemKey = "mppx-retry-0b7e4d2c9a61f835"

	// Made first: a challenge is offered only while the session is unpaid.
	retry := runMPPClient(t, api, node, dir, api.Server.URL+path, key, "CREDENTIAL_ONLY=1")["credential"].(string)
	offset.Add(int64(2 * time.Second)) // the paying run's challenge is another

	got := runMPPClient(t, api, node, dir, api.Server.URL+path, key, "IDEMPOTENCY_KEY="+idemKey, "REPLAY=0")
	require.Equal(t, float64(200), got["status"], "%v", got)
	body := got["body"].(map[string]any)
	require.Equal(t, false, body["replayed"])

	resp := api.mppDo(path, http.Header{"Authorization": {retry}, "Idempotency-Key": {idemKey}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	again := resp.Map(t)
	require.Equal(t, true, again["replayed"])
	require.Equal(t, body["payment_id"], again["payment_id"])
	require.Equal(t, body["tx_hash"], mppReceiptOf(t, resp.Header).Reference)
	require.NotEqual(t, got["receipt"].(map[string]any)["challengeId"], mppReceiptOf(t, resp.Header).ChallengeID, "another challenge")

	resp = api.mppDo(path, http.Header{"Authorization": {retry}})
	require.Equal(t, http.StatusConflict, resp.Status, "without the key, a second payment of a paid session: %s", resp.Body)
	require.Equal(t, 1, sessionPayments(t, api, sess.Session.ExternalID))
	require.Equal(t, int64(8_750_000), api.Env.Balance(t, chains.Base, payer).Int64(), "paid once")
}

// BenchmarkMPPRoundTrip: an MPP paid request on the base devnet (1 s
// blocks, as agentpay dev): the 402 with the challenge, the signature (in
// Go, as mppx signs), the credential settled (relayed, waited for until
// included), the 200 with its receipt; p50 and p99 of b.N round trips,
// one session each (created outside the timing).
func BenchmarkMPPRoundTrip(b *testing.B) {
	env := testenv.New(b, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: time.Second,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	api := newTestAPI(b, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest}})
	m := api.registerMerchant(nil)
	key, err := crypto.GenerateKey()
	require.NoError(b, err)
	env.Fund(b, chains.Base, crypto.PubkeyToAddress(key.PublicKey).Hex(), int64(b.N)*1_000_000)
	domain := tokenDomain(b, api)
	client := &http.Client{}
	get := func(url, auth string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
		url := api.Server.URL + "/checkout/pay/" + sess.Session.ExternalID + "/mpp"
		b.StartTimer()
		start := time.Now()
		resp, err := get(url, "")
		require.NoError(b, err)
		require.Equal(b, http.StatusPaymentRequired, resp.StatusCode)
		cs := parseMPPChallenges(b, resp.Header)
		resp, err = get(url, mppCredentialFor(b, key, domain, cs[0], "", nil))
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode)
		require.NotEmpty(b, resp.Header.Get("Payment-Receipt"))
		latencies = append(latencies, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	b.ReportMetric(float64(latencies[len(latencies)/2].Milliseconds()), "p50_ms")
	b.ReportMetric(float64(latencies[(len(latencies)*99)/100].Milliseconds()), "p99_ms")
}
