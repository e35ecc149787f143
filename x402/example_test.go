package x402_test

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"

	"agentpay/x402"
)

// A Go client pays an x402 v2 resource (an agentpay session's
// /checkout/pay/{id}/x402, or its pay URL): the first GET answers 402 with
// the requirements in PAYMENT-REQUIRED; the client picks an EVM exact
// requirement, signs the EIP-3009 authorization it asks for under the
// token's EIP-712 domain, and asks again with the payload in
// PAYMENT-SIGNATURE, under a payment id of its own so that a retry after
// a timeout is the same payment; the answer carries PAYMENT-RESPONSE.
func Example_client() {
	key, _ := crypto.HexToECDSA("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
	server := httptest.NewServer(exampleSeller()) // stands for agentpay
	defer server.Close()

	// 1. The 402 and its requirements.
	resp, err := http.Get(server.URL + "/checkout/pay/cs_test_example/x402")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	required, err := x402.DecodePaymentRequired(resp.Header.Get(x402.HeaderPaymentRequired))
	if err != nil {
		panic(err)
	}
	var chosen *x402.Requirements
	for i, r := range required.Accepts {
		if _, evm := x402.EVMChainID(r.Network); evm && r.Scheme == x402.SchemeExact {
			chosen = &required.Accepts[i]
			break
		}
	}
	fmt.Println(resp.StatusCode, chosen.Network, chosen.Amount, "to", chosen.PayTo)

	// 2. The authorization, signed, as PAYMENT-SIGNATURE.
	payload := &x402.PaymentPayload{X402Version: x402.Version2, Resource: &required.Resource, Accepted: *chosen}
	now := time.Now().Unix()
	var nonce [32]byte
	_, _ = rand.Read(nonce[:])
	payload.Payload.Authorization = x402.Authorization{
		From: crypto.PubkeyToAddress(key.PublicKey).Hex(), To: chosen.PayTo, Value: chosen.Amount,
		ValidAfter: strconv.FormatInt(now-60, 10), ValidBefore: strconv.FormatInt(now+int64(chosen.MaxTimeoutSeconds), 10),
		Nonce: hexutil.Encode(nonce[:]),
	}
	digest, err := transferWithAuthorizationDigest(*chosen, payload.Payload.Authorization)
	if err != nil {
		panic(err)
	}
	sig, _ := crypto.Sign(digest, key)
	sig[64] += 27
	payload.Payload.Signature = hexutil.Encode(sig)
	if required.Extensions != nil && required.Extensions.PaymentIdentifier != nil {
		payload.SetPaymentID(x402.NewPaymentID()) // keep it for retries
	}
	header, _ := x402.EncodeHeader(payload)
	req, _ := http.NewRequest(http.MethodGet, server.URL+"/checkout/pay/cs_test_example/x402", nil)
	req.Header.Set(x402.HeaderPaymentSignature, header)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	// 3. The settlement.
	settled, err := x402.DecodePaymentResponse(resp.Header.Get(x402.HeaderPaymentResponse))
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, settled.Success, settled.Network, settled.Payer == payload.Payload.Authorization.From)
	// Output:
	// 402 eip155:84532 1250000 to 0x209693Bc6afc0C5328bA36FaF03C514EF312287C
	// 200 true eip155:84532 true
}

// transferWithAuthorizationDigest is the EIP-712 digest of auth under the
// token domain req names (extra.name, extra.version, the network's chain
// id, the asset), which the payer signs.
func transferWithAuthorizationDigest(req x402.Requirements, auth x402.Authorization) ([]byte, error) {
	chainID, _ := x402.EVMChainID(req.Network)
	value, _ := new(big.Int).SetString(auth.Value, 10)
	after, _ := new(big.Int).SetString(auth.ValidAfter, 10)
	before, _ := new(big.Int).SetString(auth.ValidBefore, 10)
	typed := apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain": {{Name: "name", Type: "string"}, {Name: "version", Type: "string"}, {Name: "chainId", Type: "uint256"}, {Name: "verifyingContract", Type: "address"}},
			"TransferWithAuthorization": {{Name: "from", Type: "address"}, {Name: "to", Type: "address"}, {Name: "value", Type: "uint256"},
				{Name: "validAfter", Type: "uint256"}, {Name: "validBefore", Type: "uint256"}, {Name: "nonce", Type: "bytes32"}},
		},
		PrimaryType: "TransferWithAuthorization",
		Domain: apitypes.TypedDataDomain{Name: req.Extra.Name, Version: req.Extra.Version,
			ChainId: math.NewHexOrDecimal256(int64(chainID)), VerifyingContract: req.Asset},
		Message: apitypes.TypedDataMessage{
			"from": auth.From, "to": auth.To, "value": (*math.HexOrDecimal256)(value),
			"validAfter": (*math.HexOrDecimal256)(after), "validBefore": (*math.HexOrDecimal256)(before), "nonce": auth.Nonce,
		},
	}
	digest, _, err := apitypes.TypedDataAndHash(typed)
	return digest, err
}

// exampleSeller answers as an x402 v2 seller does, for the example: a 402
// with its requirements, then, given a payment whose signature recovers to
// its from, the settlement (agentpay relays the authorization instead).
func exampleSeller() http.Handler {
	offer := x402.Requirements{
		Scheme: x402.SchemeExact, Network: x402.EVMNetwork(84532), Amount: "1250000",
		Asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e", PayTo: common.HexToAddress("0x209693bc6afc0c5328ba36faf03c514ef312287c").Hex(), MaxTimeoutSeconds: 120,
		Extra: x402.Extra{Name: "USDC", Version: "2", AssetTransferMethod: "eip3009"},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := x402.DecodePaymentSignature(r.Header.Get(x402.HeaderPaymentSignature))
		if r.Header.Get(x402.HeaderPaymentSignature) == "" || err != nil {
			pi := &x402.PaymentIdentifier{Schema: x402.PaymentIdentifierSchema()}
			h, _ := x402.EncodeHeader(x402.PaymentRequired{X402Version: x402.Version2,
				Resource: x402.ResourceInfo{URL: "http://" + r.Host + r.URL.Path}, Accepts: []x402.Requirements{offer},
				Extensions: &x402.Extensions{PaymentIdentifier: pi}})
			w.Header().Set(x402.HeaderPaymentRequired, h)
			w.WriteHeader(http.StatusPaymentRequired)
			return
		}
		digest, _ := transferWithAuthorizationDigest(p.Accepted, p.Payload.Authorization)
		sig, _ := hexutil.Decode(p.Payload.Signature)
		sig[64] -= 27
		pub, err := crypto.SigToPub(digest, sig)
		ok := err == nil && crypto.PubkeyToAddress(*pub).Hex() == p.Payload.Authorization.From && x402.ValidPaymentID(p.PaymentID())
		h, _ := x402.EncodeHeader(x402.SettleResponse{Success: ok, Network: p.Accepted.Network, Payer: p.Payload.Authorization.From})
		w.Header().Set(x402.HeaderPaymentResponse, h)
	})
}
