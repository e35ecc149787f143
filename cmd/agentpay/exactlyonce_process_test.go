package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/devnet/usdc"
	"agentpay/x402"
)

// Exactly once, end to end (docs/agent-commerce.md#exactly-once): the API
// process that broadcast a payment is killed (SIGKILL, by its own crash
// point CRASH_AFTER_BROADCAST, right after the broadcast and before
// anything is recorded or answered), the client retries with the same key
// on another instance on the same database, and there is one payment, one
// transfer on chain and one of each webhook. On either engine: on SQLite
// the processes share one database file (newProcEnvAnyDB says why that
// holds).

// TestProcessKillAfterBroadcastAgentPay: an agent's checkout payment
// (REST agent-pay with an Idempotency-Key) whose API dies right after
// broadcasting the agent's transfer.
func TestProcessKillAfterBroadcastAgentPay(t *testing.T) {
	e := newProcEnvAnyDB(t)
	crashing, apiA := e.ServeWith("serve-a", "CRASH_AFTER_BROADCAST=send")
	_, apiB := e.Serve("serve-b")
	e.Worker("worker")
	e.WaitFirstScan()

	m := e.RegisterMerchant(apiB)
	id := e.CreateSession(apiB, m, "12.50", testMetadata)
	other := e.CreateSession(apiB, m, "12.50", testMetadata)
	agent := registerTestAgent(t, apiB, "once_agent")
	wallet := agent.wallets["base"]
	require.NotEmpty(t, wallet)
	e.Pay(wallet, big.NewInt(20_000_000))

	const key = "agent-pay-7d5d747be160e280"
	pay := func(api, session string) (int, map[string]any, http.Header, error) {
		req, err := http.NewRequest(http.MethodPost, api+"/checkout/pay/"+session+"/agent-pay", strings.NewReader(`{"chain":"base"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Agent-Key", agent.key)
		req.Header.Set("Idempotency-Key", key)
		return do(req)
	}

	// The first request never answers: its process died after the
	// broadcast (the transfer is in the devnet's pool; no block is mined
	// yet).
	_, _, _, err := pay(apiA, id)
	require.Error(t, err, "the crashing instance answers nothing")
	<-crashing.done
	require.Contains(t, crashing.err.Error(), "killed")

	// The retry on the other instance: the first payment, pending while
	// the chain has not decided; never a second transfer.
	status, first, h, err := pay(apiB, id)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%v", first)
	require.Equal(t, "true", h.Get("Idempotent-Replayed"))
	require.Equal(t, "pending", first["status"], "%v", first)
	// Another request under the key is refused.
	status, body, _, err := pay(apiB, other)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", body)

	e.KeepMining(200 * time.Millisecond)
	got := requirePaidSessionEvents(t, e, apiB, m, id)
	require.Contains(t, got, agentpay.EventPaymentConfirmed)
	// Asked every 7 s: the agent's tier takes 10 requests a minute.
	var again map[string]any
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(7 * time.Second) {
		_, again, _, err = pay(apiB, id)
		require.NoError(t, err)
		if again["status"] == "confirmed" || time.Now().After(deadline) {
			break
		}
	}
	require.Equal(t, "confirmed", again["status"], "the retry answers the payment confirmed: %v", again)
	require.Equal(t, first["transfer_id"], again["transfer_id"], "%v %v", first, again)
	require.Len(t, e.tokenTransfersFrom(t, wallet), 1, "one transfer on chain")
	require.Equal(t, "7500000", e.tokenBalance(t, wallet).String(), "paid once")
}

// TestProcessKillAfterBroadcastX402: an x402 v2 payment under a
// payment-identifier whose API dies right after relaying the payer's
// authorization; the client's retry signs again (a new nonce), as an x402
// client does, and is answered the first payment.
func TestProcessKillAfterBroadcastX402(t *testing.T) {
	e := newProcEnvAnyDB(t)
	crashing, apiA := e.ServeWith("serve-a", "CRASH_AFTER_BROADCAST=relay")
	_, apiB := e.Serve("serve-b")
	e.Worker("worker")
	e.WaitFirstScan()

	m := e.RegisterMerchant(apiB)
	id := e.CreateSession(apiB, m, "12.50", testMetadata)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(key.PublicKey)
	e.Pay(payer.Hex(), big.NewInt(20_000_000))

	path := "/checkout/pay/" + id + "/x402"
	resp, err := http.Get(apiB + path)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusPaymentRequired, resp.StatusCode)
	raw, err := base64.StdEncoding.DecodeString(resp.Header.Get("Payment-Required"))
	require.NoError(t, err)
	var pr x402.PaymentRequired
	require.NoError(t, json.Unmarshal(raw, &pr), string(raw))
	require.Len(t, pr.Accepts, 1)

	const paymentID = "pay_0f4c3a9e6b2d41d8a7c5e1f2"
	pay := func(api string) (int, map[string]any, http.Header, error) {
		req, err := http.NewRequest(http.MethodGet, api+path, nil)
		require.NoError(t, err)
		req.Header.Set("Payment-Signature", signX402V2(t, key, pr, paymentID))
		return do(req)
	}

	_, _, _, err = pay(apiA)
	require.Error(t, err, "the crashing instance answers nothing")
	<-crashing.done
	require.Contains(t, crashing.err.Error(), "killed")

	status, first, h, err := pay(apiB)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%v", first)
	require.Equal(t, true, first["replayed"], "%v", first)
	require.Contains(t, []any{"pending", "detected"}, first["status"], "%v", first)
	require.NotEmpty(t, h.Get("Payment-Response"), "answered as x402 v2")

	e.KeepMining(200 * time.Millisecond)
	requirePaidSessionEvents(t, e, apiB, m, id)
	status, again, _, err := pay(apiB)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%v", again)
	require.Equal(t, "confirmed", again["status"], "%v", again)
	if first["tx_hash"] != nil && first["tx_hash"] != "" {
		require.Equal(t, first["tx_hash"], again["tx_hash"])
	}
	require.Len(t, e.tokenTransfersFrom(t, payer.Hex()), 1, "one transfer on chain")
	require.Equal(t, "7500000", e.tokenBalance(t, payer.Hex()).String(), "paid once")
}

// TestProcessKillAfterBroadcastMPP: an MPP payment under an
// Idempotency-Key whose API dies right after relaying the payer's
// authorization; the client's retry answers a fresh challenge with a new
// authorization (another nonce), as mppx does when it starts again, and
// is answered the first payment: 202 while the chain has not decided,
// then 200 with the first's transaction as the receipt's reference.
func TestProcessKillAfterBroadcastMPP(t *testing.T) {
	e := newProcEnvAnyDB(t)
	crashing, apiA := e.ServeWith("serve-a", "CRASH_AFTER_BROADCAST=relay")
	_, apiB := e.Serve("serve-b")
	e.Worker("worker")
	e.WaitFirstScan()

	m := e.RegisterMerchant(apiB)
	id := e.CreateSession(apiB, m, "12.50", testMetadata)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(key.PublicKey)
	e.Pay(payer.Hex(), big.NewInt(20_000_000))
	domain := e.tokenDomain(t)

	path := "/checkout/pay/" + id + "/mpp"
	// Two challenges, as a first attempt and a retry get them: the retry's
	// expires a second later (another id, another nonce).
	first := mppChallengeAt(t, apiA, path)
	var retry map[string]string
	waitFor(t, 10*time.Second, func() bool {
		retry = mppChallengeAt(t, apiB, path)
		return retry["id"] != first["id"]
	}, "a challenge of a later second")

	const idemKey = "mpp-order-7d5d747be160e280"
	pay := func(api string, challenge map[string]string) (int, map[string]any, http.Header, error) {
		req, err := http.NewRequest(http.MethodGet, api+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", signMPP(t, key, domain, challenge))
		req.Header.Set("Idempotency-Key", idemKey)
		return do(req)
	}

	_, _, _, err = pay(apiA, first)
	require.Error(t, err, "the crashing instance answers nothing")
	<-crashing.done
	require.Contains(t, crashing.err.Error(), "killed")

	status, body, _, err := pay(apiB, retry)
	require.NoError(t, err)
	require.Equal(t, true, body["replayed"], "%d %v", status, body)
	require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, status, "%v", body)

	e.KeepMining(200 * time.Millisecond)
	requirePaidSessionEvents(t, e, apiB, m, id)
	status, again, h, err := pay(apiB, retry)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%v", again)
	require.Equal(t, "confirmed", again["status"], "%v", again)
	raw, err := base64.RawURLEncoding.DecodeString(h.Get("Payment-Receipt"))
	require.NoError(t, err)
	var receipt agentpay.MPPReceipt
	require.NoError(t, json.Unmarshal(raw, &receipt))
	require.Equal(t, again["tx_hash"], receipt.Reference)
	require.Equal(t, retry["id"], receipt.ChallengeID)
	transfers := e.tokenTransfersFrom(t, payer.Hex())
	require.Len(t, transfers, 1, "one transfer on chain")
	require.Equal(t, transfers[0].TxHash.Hex(), receipt.Reference, "the first authorization's transfer")
	require.Equal(t, "7500000", e.tokenBalance(t, payer.Hex()).String(), "paid once")
}

// TestProcessKillAfterBroadcastACP: an ACP checkout completed
// (POST /checkout_sessions/{id}/complete with an Idempotency-Key and an
// x402 v2 payload carrying no payment-identifier) whose API dies right
// after relaying the payer's authorization; the agent's platform retries
// the same request on another instance within the dead request's lease and
// is answered the session, complete_in_progress while the chain has not
// decided (not 409 idempotency_in_flight), then completed.
func TestProcessKillAfterBroadcastACP(t *testing.T) {
	e := newProcEnvAnyDB(t)
	crashing, apiA := e.ServeWith("serve-a", "CRASH_AFTER_BROADCAST=relay")
	_, apiB := e.Serve("serve-b")
	e.Worker("worker")
	e.WaitFirstScan()

	m := e.RegisterMerchant(apiB)
	acp := func(api, path, key string, body any) (int, map[string]any, http.Header, error) {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, api+path, bytes.NewReader(raw))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+m.TestSecretKey)
		req.Header.Set("API-Version", agentpay.ACPVersion)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		return do(req)
	}
	status, created, _, err := acp(apiB, "/checkout_sessions", "acp-create-7d5d747be160e280", map[string]any{
		"currency": "usd", "capabilities": map[string]any{},
		"line_items": []any{map[string]any{"id": "book_1", "name": "A book", "unit_amount": 1250}},
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status, "%v", created)
	id, _ := created["id"].(string)
	require.NotEmpty(t, id, "%v", created)

	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(key.PublicKey)
	e.Pay(payer.Hex(), big.NewInt(20_000_000))
	resp, err := http.Get(apiB + "/checkout/pay/" + id + "/x402")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusPaymentRequired, resp.StatusCode)
	raw, err := base64.StdEncoding.DecodeString(resp.Header.Get("Payment-Required"))
	require.NoError(t, err)
	var pr x402.PaymentRequired
	require.NoError(t, json.Unmarshal(raw, &pr), string(raw))
	require.Len(t, pr.Accepts, 1)

	// One request, sent as is on every attempt: the agent's platform
	// retries what it sent.
	complete := map[string]any{"payment_data": map[string]any{
		"handler_id": agentpay.ACPX402HandlerID,
		"instrument": map[string]any{"type": "crypto", "credential": map[string]any{
			"type": agentpay.ACPCredentialX402, "token": signX402V2(t, key, pr, ""),
		}},
	}}
	const idemKey = "acp-complete-7d5d747be160e280"
	path := "/checkout_sessions/" + id + "/complete"

	_, _, _, err = acp(apiA, path, idemKey, complete)
	require.Error(t, err, "the crashing instance answers nothing")
	<-crashing.done
	require.Contains(t, crashing.err.Error(), "killed")

	status, first, h, err := acp(apiB, path, idemKey, complete)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "the retry is answered the first's payment: %v", first)
	require.Equal(t, "true", h.Get("Idempotent-Replayed"))
	require.Equal(t, "complete_in_progress", first["status"], "pending while the chain has not decided: %v", first)

	e.KeepMining(200 * time.Millisecond)
	requirePaidSessionEvents(t, e, apiB, m, id)
	status, again, _, err := acp(apiB, path, idemKey, complete)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%v", again)
	require.Equal(t, "completed", again["status"], "%v", again)
	require.NotNil(t, again["order"], "%v", again)
	require.Len(t, e.tokenTransfersFrom(t, payer.Hex()), 1, "one transfer on chain")
	require.Equal(t, "7500000", e.tokenBalance(t, payer.Hex()).String(), "paid once")
}

var mppParam = regexp.MustCompile(`([a-z]+)="((?:[^"\\]|\\.)*)"`)

// mppChallengeAt is the session's Payment challenge at api+path (its
// parameters by name).
func mppChallengeAt(t *testing.T, api, path string) map[string]string {
	t.Helper()
	resp, err := http.Get(api + path)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusPaymentRequired, resp.StatusCode)
	out := map[string]string{}
	for _, m := range mppParam.FindAllStringSubmatch(resp.Header.Get("WWW-Authenticate"), -1) {
		out[m[1]] = m[2]
	}
	require.NotEmpty(t, out["id"])
	return out
}

// signMPP is the Authorization: Payment credential mppx sends for the
// challenge: an EIP-3009 authorization of the request's amount to its
// recipient, valid until the challenge expires, its nonce the challenge
// hash.
func signMPP(t *testing.T, key *ecdsa.PrivateKey, domain chains.TokenDomain, c map[string]string) string {
	t.Helper()
	rawReq, err := base64.RawURLEncoding.DecodeString(c["request"])
	require.NoError(t, err)
	var req agentpay.MPPChargeRequest
	require.NoError(t, json.Unmarshal(rawReq, &req))
	expires, err := time.Parse(time.RFC3339, c["expires"])
	require.NoError(t, err)
	value, ok := new(big.Int).SetString(req.Amount, 10)
	require.True(t, ok)
	nonce := agentpay.MPPChallengeHash(c["id"], c["realm"])
	from := crypto.PubkeyToAddress(key.PublicKey)
	dom := crypto.Keccak256(
		crypto.Keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")),
		crypto.Keccak256([]byte(domain.Name)), crypto.Keccak256([]byte(domain.Version)),
		math.U256Bytes(new(big.Int).SetUint64(req.MethodDetails.ChainID)), common.LeftPadBytes(common.HexToAddress(req.Currency).Bytes(), 32),
	)
	structHash := crypto.Keccak256(
		crypto.Keccak256([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")),
		common.LeftPadBytes(from.Bytes(), 32), common.LeftPadBytes(common.HexToAddress(req.Recipient).Bytes(), 32),
		math.U256Bytes(value), math.U256Bytes(big.NewInt(0)), math.U256Bytes(big.NewInt(expires.Unix())), nonce[:],
	)
	sig, err := crypto.Sign(crypto.Keccak256([]byte("\x19\x01"), dom, structHash), key)
	require.NoError(t, err)
	sig[64] += 27
	cred, err := json.Marshal(map[string]any{
		"challenge": map[string]string{"id": c["id"], "realm": c["realm"], "method": c["method"], "intent": c["intent"],
			"request": c["request"], "expires": c["expires"]},
		"payload": map[string]any{
			"type": "authorization", "from": from.Hex(), "to": common.HexToAddress(req.Recipient).Hex(), "value": req.Amount,
			"validAfter": "0", "validBefore": fmt.Sprint(expires.Unix()), "nonce": "0x" + common.Bytes2Hex(nonce[:]),
			"signature": "0x" + common.Bytes2Hex(sig),
		},
	})
	require.NoError(t, err)
	return "Payment " + base64.RawURLEncoding.EncodeToString(cred)
}

// tokenDomain is the devnet USDC's EIP-712 domain, as a client is told it.
func (e *procEnv) tokenDomain(t *testing.T) chains.TokenDomain {
	t.Helper()
	token, err := usdc.NewUSDC(e.base.USDC, e.base.Client())
	require.NoError(t, err)
	opts := &bind.CallOpts{Context: t.Context()}
	name, err := token.Name(opts)
	require.NoError(t, err)
	version, err := token.Version(opts)
	require.NoError(t, err)
	return chains.TokenDomain{Name: name, Version: version}
}

// do makes req and answers its status, JSON body and headers; err when
// no answer came (the process died).
func do(req *http.Request) (int, map[string]any, http.Header, error) {
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	var body map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			return 0, nil, nil, fmt.Errorf("%s: %w", raw, err)
		}
	}
	return resp.StatusCode, body, resp.Header, nil
}

// signX402V2 is the PAYMENT-SIGNATURE an x402 v2 client sends for pr's
// first requirement under the payment-identifier id (none when ""): an EIP-3009
// authorization with a fresh nonce, signed again on every call as the
// client signs again on every retry.
func signX402V2(t *testing.T, key *ecdsa.PrivateKey, pr x402.PaymentRequired, id string) string {
	t.Helper()
	req := pr.Accepts[0]
	chainID, ok := new(big.Int).SetString(strings.TrimPrefix(req.Network, "eip155:"), 10)
	require.True(t, ok, req.Network)
	value, ok := new(big.Int).SetString(req.Amount, 10)
	require.True(t, ok, req.Amount)
	var nonce [32]byte
	_, err := rand.Read(nonce[:])
	require.NoError(t, err)
	now := time.Now().Unix()
	validAfter, validBefore := big.NewInt(now-600), big.NewInt(now+int64(req.MaxTimeoutSeconds))
	from := crypto.PubkeyToAddress(key.PublicKey)
	domain := crypto.Keccak256(
		crypto.Keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")),
		crypto.Keccak256([]byte(req.Extra.Name)), crypto.Keccak256([]byte(req.Extra.Version)),
		math.U256Bytes(chainID), common.LeftPadBytes(common.HexToAddress(req.Asset).Bytes(), 32),
	)
	structHash := crypto.Keccak256(
		crypto.Keccak256([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")),
		common.LeftPadBytes(from.Bytes(), 32), common.LeftPadBytes(common.HexToAddress(req.PayTo).Bytes(), 32),
		math.U256Bytes(value), math.U256Bytes(validAfter), math.U256Bytes(validBefore), nonce[:],
	)
	sig, err := crypto.Sign(crypto.Keccak256([]byte("\x19\x01"), domain, structHash), key)
	require.NoError(t, err)
	sig[64] += 27
	payload := map[string]any{
		"x402Version": 2, "resource": pr.Resource, "accepted": req,
		"payload": map[string]any{
			"signature": "0x" + common.Bytes2Hex(sig),
			"authorization": map[string]any{
				"from": from.Hex(), "to": req.PayTo, "value": req.Amount,
				"validAfter": validAfter.String(), "validBefore": validBefore.String(),
				"nonce": "0x" + common.Bytes2Hex(nonce[:]),
			},
		},
	}
	if id != "" {
		payload["extensions"] = map[string]any{"payment-identifier": map[string]any{"info": map[string]any{"required": false, "id": id}}}
	}
	raw, err := json.Marshal(payload)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(raw)
}

// tokenTransfersFrom are the devnet USDC's Transfer logs from address.
func (e *procEnv) tokenTransfersFrom(t *testing.T, address string) []types.Log {
	t.Helper()
	logs, err := e.base.Client().FilterLogs(t.Context(), ethereum.FilterQuery{
		FromBlock: big.NewInt(0),
		Addresses: []common.Address{e.base.USDC},
		Topics: [][]common.Hash{
			{crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))},
			{common.BytesToHash(common.LeftPadBytes(common.HexToAddress(address).Bytes(), 32))},
		},
	})
	require.NoError(t, err)
	return logs
}

// tokenBalance is address's devnet USDC balance in base units.
func (e *procEnv) tokenBalance(t *testing.T, address string) *big.Int {
	t.Helper()
	token, err := usdc.NewUSDC(e.base.USDC, e.base.Client())
	require.NoError(t, err)
	bal, err := token.BalanceOf(&bind.CallOpts{Context: t.Context()}, common.HexToAddress(address))
	require.NoError(t, err)
	return bal
}
