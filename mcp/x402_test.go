package mcp

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent/payment"
)

// TestMCPPayX402: pay_checkout_x402 over x402's MCP transport with the Go
// SDK's client: without _meta["x402/payment"] the PaymentRequired (isError,
// structuredContent and the same JSON as text); with a payload signed by a
// wallet holding USDC and no gas, the payment relayed and recorded, its
// settlement in _meta["x402/payment-response"]; a payload paying the
// wrong amount is refused with the requirements again and a failed
// settlement.
func TestMCPPayX402(t *testing.T) {
	ctx := context.Background()
	m := newTestMCP(t)
	_, key := m.agent(t, "x402mcp", 0)
	sess := m.session(t, "2.25")
	cs, err := connect(t, m.URL, key)
	require.NoError(t, err)

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: payX402Tool, Arguments: map[string]any{"external_id": sess.ExternalID}})
	require.NoError(t, err)
	require.True(t, res.IsError, textOf(res))
	var required struct {
		X402Version int
		Error       string
		Accepts     []struct {
			Network, Amount, Asset, PayTo string
			Extra                         struct{ Name, Version string }
		}
	}
	remarshal(t, res.StructuredContent, &required)
	require.Equal(t, 2, required.X402Version)
	require.Contains(t, textOf(res), `"x402Version":2`)
	require.NotEmpty(t, required.Accepts)
	acc := required.Accepts[0]
	require.Equal(t, "2250000", acc.Amount)

	payer, err := crypto.GenerateKey()
	require.NoError(t, err)
	m.Env.Fund(t, chains.Base, crypto.PubkeyToAddress(payer.PublicKey).Hex(), 5_000_000)
	chainID, err := strconv.ParseUint(strings.TrimPrefix(acc.Network, "eip155:"), 10, 64)
	require.NoError(t, err)
	payload := func(value int64) map[string]any {
		auth := signAuthorization(t, payer, acc.Extra.Name, acc.Extra.Version, chainID, acc.Asset, acc.PayTo, value)
		sig := auth["signature"]
		delete(auth, "signature")
		return map[string]any{"x402Version": 2, "accepted": map[string]any{"scheme": "exact", "network": acc.Network, "amount": fmt.Sprint(value),
			"asset": acc.Asset, "payTo": acc.PayTo, "maxTimeoutSeconds": 120, "extra": map[string]any{"name": acc.Extra.Name, "version": acc.Extra.Version}},
			"payload": map[string]any{"signature": sig, "authorization": auth}}
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: payX402Tool, Arguments: map[string]any{"external_id": sess.ExternalID},
		Meta: sdk.Meta{metaX402Payment: payload(1_000_000)}})
	require.NoError(t, err)
	require.True(t, res.IsError, "a payment of the wrong amount: %s", textOf(res))
	var failed map[string]any
	remarshal(t, res.Meta[metaX402PaymentResponse], &failed)
	require.Equal(t, false, failed["success"])
	require.Zero(t, m.Env.DB.Ent.Payment.Query().CountX(ctx))

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: payX402Tool, Arguments: map[string]any{"external_id": sess.ExternalID},
		Meta: sdk.Meta{metaX402Payment: payload(2_250_000)}})
	require.NoError(t, err)
	require.False(t, res.IsError, textOf(res))
	var paid map[string]any
	remarshal(t, res.StructuredContent, &paid)
	require.Equal(t, sess.ExternalID, paid["external_id"])
	require.Equal(t, 2.25, paid["amount_usd"])
	var settle map[string]any
	remarshal(t, res.Meta[metaX402PaymentResponse], &settle)
	require.Equal(t, true, settle["success"])
	require.Equal(t, paid["tx_hash"], settle["transaction"])
	require.True(t, strings.EqualFold(crypto.PubkeyToAddress(payer.PublicKey).Hex(), settle["payer"].(string)))
	require.Equal(t, 1, m.Env.DB.Ent.Payment.Query().Where(payment.ExternalID(paid["payment_id"].(string))).CountX(ctx))
}

// signAuthorization signs an EIP-3009 TransferWithAuthorization as a
// payer's wallet does (eth_signTypedData_v4), from the EIP-712 definitions.
func signAuthorization(t *testing.T, key *ecdsa.PrivateKey, name, version string, chainID uint64, token, to string, value int64) map[string]any {
	t.Helper()
	var nonce [32]byte
	_, err := rand.Read(nonce[:])
	require.NoError(t, err)
	from := crypto.PubkeyToAddress(key.PublicKey)
	validAfter, validBefore := time.Now().Add(-time.Minute).Unix(), time.Now().Add(2*time.Minute).Unix()
	domain := crypto.Keccak256(
		crypto.Keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")),
		crypto.Keccak256([]byte(name)), crypto.Keccak256([]byte(version)),
		math.U256Bytes(new(big.Int).SetUint64(chainID)), common.LeftPadBytes(common.HexToAddress(token).Bytes(), 32))
	toAddr := common.HexToAddress(to)
	structHash := crypto.Keccak256(
		crypto.Keccak256([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")),
		common.LeftPadBytes(from.Bytes(), 32), common.LeftPadBytes(toAddr.Bytes(), 32),
		math.U256Bytes(big.NewInt(value)), math.U256Bytes(big.NewInt(validAfter)), math.U256Bytes(big.NewInt(validBefore)), nonce[:])
	sig, err := crypto.Sign(crypto.Keccak256([]byte("\x19\x01"), domain, structHash), key)
	require.NoError(t, err)
	sig[64] += 27
	return map[string]any{"from": from.Hex(), "to": toAddr.Hex(), "value": fmt.Sprint(value), "validAfter": fmt.Sprint(validAfter),
		"validBefore": fmt.Sprint(validBefore), "nonce": "0x" + common.Bytes2Hex(nonce[:]), "signature": "0x" + common.Bytes2Hex(sig)}
}
