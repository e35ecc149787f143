package rest

import (
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
	"github.com/stretchr/testify/require"
)

// evmSigner is an external wallet as a test holds it.
type evmSigner struct {
	key  *ecdsa.PrivateKey
	addr string
}

func newEVMSigner(t *testing.T) evmSigner {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	return evmSigner{key: key, addr: crypto.PubkeyToAddress(key.PublicKey).Hex()}
}

// sign signs the typed_data of a signature-message answer as a wallet's
// eth_signTypedData_v4 does: the JSON served is exactly what gets signed.
func (s evmSigner) sign(t *testing.T, typedData json.RawMessage) string {
	t.Helper()
	var td apitypes.TypedData
	require.NoError(t, json.Unmarshal(typedData, &td))
	hash, _, err := apitypes.TypedDataAndHash(td)
	require.NoError(t, err)
	sig, err := crypto.Sign(hash, s.key)
	require.NoError(t, err)
	sig[64] += 27
	return "0x" + hex.EncodeToString(sig)
}

type signatureMessageAnswer struct {
	Purpose   string          `json:"purpose"`
	TypedData json.RawMessage `json:"typed_data"`
}

func getSignatureMessage(t *testing.T, api *testAPI, username, wallet string) (apiResponse, signatureMessageAnswer) {
	t.Helper()
	resp := api.do(http.MethodGet, "/agents/signature-message?"+url.Values{
		"username": {username}, "wallet_address": {wallet},
	}.Encode(), nil, nil)
	var m signatureMessageAnswer
	if resp.Status == http.StatusOK {
		resp.JSON(t, &m)
	}
	return resp, m
}

func TestSignatureMessageEndpoint(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	w := newEVMSigner(t)

	resp, m := getSignatureMessage(t, api, "alice_adv", w.addr)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, "register", m.Purpose)
	assertGolden(t, "signature_message_register", resp.Body, nil)

	for _, tt := range []struct {
		name, query, golden string
	}{
		{"bad username", "username=Alice&wallet_address=" + w.addr, "signature_message_bad_username"},
		{"bad wallet", "username=alice_adv&wallet_address=0x1234", "signature_message_bad_wallet"},
		{"missing wallet", "username=alice_adv", "signature_message_bad_wallet"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := api.do(http.MethodGet, "/agents/signature-message?"+tt.query, nil, nil)
			require.Equal(t, http.StatusBadRequest, resp.Status)
			assertGolden(t, tt.golden, resp.Body, nil)
		})
	}
}

func TestRegisterEndpoint(t *testing.T) {
	type request = map[string]any
	for _, tt := range []struct {
		name string
		// build returns the request from a fresh message for alice_adv
		// signed by signer (whose address is the wallet).
		build  func(t *testing.T, w evmSigner, m signatureMessageAnswer) request
		status int
		golden string
		detail string
	}{
		{name: "created", status: http.StatusCreated, golden: "register_created",
			build: func(t *testing.T, w evmSigner, m signatureMessageAnswer) request {
				return request{"username": "alice_adv", "wallet_address": w.addr, "signature": w.sign(t, m.TypedData), "signature_type": "eip712"}
			}},
		{name: "wrong signer", status: http.StatusBadRequest, golden: "register_wrong_signer",
			build: func(t *testing.T, w evmSigner, m signatureMessageAnswer) request {
				return request{"username": "alice_adv", "wallet_address": w.addr, "signature": newEVMSigner(t).sign(t, m.TypedData), "signature_type": "eip712"}
			}},
		{name: "tampered message", status: http.StatusBadRequest, detail: "does not recover to wallet_address",
			build: func(t *testing.T, w evmSigner, m signatureMessageAnswer) request {
				tampered := strings.Replace(string(m.TypedData), `"username":"alice_adv"`, `"username":"mallory"`, 1)
				require.NotEqual(t, string(m.TypedData), tampered)
				return request{"username": "alice_adv", "wallet_address": w.addr, "signature": w.sign(t, json.RawMessage(tampered)), "signature_type": "eip712"}
			}},
		{name: "wrong signature type", status: http.StatusBadRequest, golden: "register_wrong_signature_type",
			build: func(t *testing.T, w evmSigner, m signatureMessageAnswer) request {
				return request{"username": "alice_adv", "wallet_address": w.addr, "signature": w.sign(t, m.TypedData), "signature_type": "personal_sign"}
			}},
		{name: "malformed signature", status: http.StatusBadRequest, detail: "65-byte signature",
			build: func(t *testing.T, w evmSigner, m signatureMessageAnswer) request {
				return request{"username": "alice_adv", "wallet_address": w.addr, "signature": "0x1234", "signature_type": "eip712"}
			}},
		{name: "unknown field", status: http.StatusBadRequest, detail: "unknown field",
			build: func(t *testing.T, w evmSigner, m signatureMessageAnswer) request {
				return request{"username": "alice_adv", "wallet_address": w.addr, "signature": w.sign(t, m.TypedData), "signature_type": "eip712", "chain": "base"}
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newTestAPI(t, testAPIConfig{})
			w := newEVMSigner(t)
			_, m := getSignatureMessage(t, api, "alice_adv", w.addr)
			req := tt.build(t, w, m)
			resp := api.do(http.MethodPost, "/agents/register", req, nil)
			require.Equal(t, tt.status, resp.Status, string(resp.Body))
			if tt.golden != "" {
				extra := map[string]string{"alice_adv": "<username>"}
				if resp.Status == http.StatusCreated {
					reg := resp.Map(t)
					extra[reg["invite_code"].(string)] = "<invite_code>"
					extra[reg["wallet_address"].(string)] = "<solana-address>"
				}
				assertGolden(t, tt.golden, resp.Body, extra)
			}
			if tt.detail != "" {
				require.Contains(t, resp.Map(t)["detail"], tt.detail)
			}
			if tt.status != http.StatusCreated {
				return
			}
			reg := resp.Map(t)
			require.Equal(t, "alice_adv", reg["username"])

			// The key works, and the external wallet is the agent's.
			me := api.do(http.MethodGet, "/agents/me/wallets", nil, agentKey(reg["api_key"].(string)))
			if me.Status != http.StatusNotImplemented {
				require.Equal(t, http.StatusOK, me.Status, string(me.Body))
				require.Contains(t, string(me.Body), w.addr)
			}

			// Replaying the request is refused, and says why.
			replay := api.do(http.MethodPost, "/agents/register", req, nil)
			require.Equal(t, http.StatusBadRequest, replay.Status)
			assertGolden(t, "register_replayed", replay.Body, nil)

			// The username is now taken: a fresh message for it is a wallet
			// verification one, which register does not accept.
			other := newEVMSigner(t)
			_, m2 := getSignatureMessage(t, api, "alice_adv", other.addr)
			require.Equal(t, "verify_wallet", m2.Purpose)
			taken := api.do(http.MethodPost, "/agents/register", request{
				"username": "alice_adv", "wallet_address": other.addr, "signature": other.sign(t, m2.TypedData), "signature_type": "eip712",
			}, nil)
			require.Equal(t, http.StatusConflict, taken.Status)
			assertGolden(t, "register_username_taken", taken.Body, map[string]string{"alice_adv": "<username>"})

			// The same wallet for another username: 409.
			_, m3 := getSignatureMessage(t, api, "bob_adv", w.addr)
			dup := api.do(http.MethodPost, "/agents/register", request{
				"username": "bob_adv", "wallet_address": w.addr, "signature": w.sign(t, m3.TypedData), "signature_type": "eip712",
			}, nil)
			require.Equal(t, http.StatusConflict, dup.Status)
			assertGolden(t, "register_wallet_taken", dup.Body, nil)
		})
	}
}

func TestVerifyWalletEndpoint(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	register := func(username string) (string, evmSigner) {
		w := newEVMSigner(t)
		_, m := getSignatureMessage(t, api, username, w.addr)
		resp := api.do(http.MethodPost, "/agents/register", map[string]any{
			"username": username, "wallet_address": w.addr, "signature": w.sign(t, m.TypedData), "signature_type": "eip712",
		}, nil)
		require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
		return resp.Map(t)["api_key"].(string), w
	}
	aliceKey, _ := register("alice_v")
	bobKey, bobWallet := register("bob_v")

	ext := newEVMSigner(t)
	resp, m := getSignatureMessage(t, api, "alice_v", ext.addr)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, "verify_wallet", m.Purpose)
	assertGolden(t, "signature_message_verify_wallet", resp.Body, map[string]string{"alice_v": "<username>"})
	sig := ext.sign(t, m.TypedData)
	body := map[string]any{"wallet_address": ext.addr, "signature": sig, "signature_type": "eip712", "chain": "base", "set_as_primary": true}

	for _, tt := range []struct {
		name   string
		key    string
		body   map[string]any
		status int
		golden string
	}{
		{"no key", "", body, http.StatusUnauthorized, ""},
		{"another agent", bobKey, body, http.StatusBadRequest, "verify_wallet_not_issued"},
		{"solana", aliceKey, map[string]any{"wallet_address": ext.addr, "signature": sig, "signature_type": "eip712", "chain": "solana"}, http.StatusBadRequest, "verify_wallet_not_evm"},
		{"signature type", aliceKey, map[string]any{"wallet_address": ext.addr, "signature": sig, "signature_type": "ed25519", "chain": "base"}, http.StatusBadRequest, ""},
		{"wallet of another agent", aliceKey, map[string]any{"wallet_address": bobWallet.addr, "signature": sig, "signature_type": "eip712"}, http.StatusConflict, "verify_wallet_taken"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var h http.Header
			if tt.key != "" {
				h = agentKey(tt.key)
			}
			resp := api.do(http.MethodPost, "/agents/me/wallets/verify", tt.body, h)
			require.Equal(t, tt.status, resp.Status, string(resp.Body))
			if tt.golden != "" {
				assertGolden(t, tt.golden, resp.Body, nil)
			}
		})
	}

	resp = api.do(http.MethodPost, "/agents/me/wallets/verify", body, agentKey(aliceKey))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "verify_wallet_primary", resp.Body, nil)
	require.Equal(t, ext.addr, resp.Map(t)["wallet"].(map[string]any)["address"])

	// Replayed: refused.
	resp = api.do(http.MethodPost, "/agents/me/wallets/verify", body, agentKey(aliceKey))
	require.Equal(t, http.StatusBadRequest, resp.Status)
	require.Contains(t, resp.Map(t)["detail"], "already used")

	// The profile shows the new primary wallet.
	prof := api.do(http.MethodGet, "/agents/me/profile", nil, agentKey(aliceKey))
	require.Equal(t, http.StatusOK, prof.Status)
	require.Equal(t, ext.addr, prof.Map(t)["wallet_address"])
}

// TestSignatureMessagesOfAnotherClient: a client asking for many messages
// for someone else's username and wallet (from another address) does not
// block that someone's registration with the message they asked for. The
// requester is the client's address (a loopback client can dial from any
// 127.0.0.0/8 address).
func TestSignatureMessagesOfAnotherClient(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	w := newEVMSigner(t)
	resp, m := getSignatureMessage(t, api, "flooded", w.addr)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))

	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)},
	}).DialContext}}
	defer other.CloseIdleConnections()
	for range 30 {
		r, err := other.Get(api.Server.URL + "/agents/signature-message?" + url.Values{
			"username": {"flooded"}, "wallet_address": {w.addr},
		}.Encode())
		require.NoError(t, err)
		_ = r.Body.Close()
		require.Equal(t, http.StatusOK, r.StatusCode)
	}

	resp = api.do(http.MethodPost, "/agents/register", map[string]any{
		"username": "flooded", "wallet_address": w.addr, "signature": w.sign(t, m.TypedData), "signature_type": "eip712",
	}, nil)
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
}
