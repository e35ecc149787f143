package evm

import (
	"encoding/hex"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

func testMessage(wallet string) chains.TypedMessage {
	return chains.TypedMessage{
		Domain: chains.MessageDomain{Name: "agentpay", Version: "1", ChainID: 84532},
		Type:   "AgentRegistration",
		Fields: []chains.MessageField{
			{Name: "username", Type: "string", Value: "alice"},
			{Name: "wallet", Type: "address", Value: wallet},
		},
	}
}

// The payload is what a wallet signs: decoded as eth_signTypedData_v4 does,
// it hashes to what Verify checks.
func TestSigningPayloadAndVerify(t *testing.T) {
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	addr := crypto.PubkeyToAddress(key.PublicKey).Hex()
	m := testMessage(addr)

	payload, err := Wallets{}.SigningPayload(m)
	require.NoError(t, err)
	require.JSONEq(t, `{
		"types": {
			"EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"}, {"name": "chainId", "type": "uint256"}],
			"AgentRegistration": [{"name": "username", "type": "string"}, {"name": "wallet", "type": "address"}]
		},
		"primaryType": "AgentRegistration",
		"domain": {"name": "agentpay", "version": "1", "chainId": 84532},
		"message": {"username": "alice", "wallet": "`+addr+`"}
	}`, string(payload))

	var td apitypes.TypedData
	require.NoError(t, json.Unmarshal(payload, &td))
	hash, _, err := apitypes.TypedDataAndHash(td)
	require.NoError(t, err)
	raw, err := crypto.Sign(hash, key)
	require.NoError(t, err)
	raw[64] += 27
	sig, err := Wallets{}.ParseSignature("0x" + hex.EncodeToString(raw))
	require.NoError(t, err)

	ok, err := Wallets{}.Verify(m, sig, addr)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = Wallets{}.Verify(m, sig, NormalizeAddress(addr))
	require.NoError(t, err)
	require.True(t, ok, "any case of the address")

	other := testMessage(addr)
	other.Fields[0].Value = "mallory"
	ok, err = Wallets{}.Verify(other, sig, addr)
	require.NoError(t, err)
	require.False(t, ok, "another message")
	other = testMessage(addr)
	other.Type = "WalletVerification"
	ok, err = Wallets{}.Verify(other, sig, addr)
	require.NoError(t, err)
	require.False(t, ok, "another type")
	other = testMessage(addr)
	other.Domain.ChainID = 8453
	ok, err = Wallets{}.Verify(other, sig, addr)
	require.NoError(t, err)
	require.False(t, ok, "another chain")
}

func TestParseSignature(t *testing.T) {
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	raw, err := crypto.Sign(crypto.Keccak256([]byte("x")), key)
	require.NoError(t, err)
	good := hex.EncodeToString(raw) // v 0/1

	sig, err := Wallets{}.ParseSignature(good)
	require.NoError(t, err)
	require.Equal(t, raw, sig)
	withV27 := append([]byte(nil), raw...)
	withV27[64] += 27
	sig, err = Wallets{}.ParseSignature("0x" + hex.EncodeToString(withV27))
	require.NoError(t, err)
	require.Equal(t, raw, sig, "v is answered as 0/1")

	// The same signature with s mirrored (n - s) is valid ECDSA but malleable.
	n := crypto.S256().Params().N
	highS := append([]byte(nil), raw...)
	new(big.Int).Sub(n, new(big.Int).SetBytes(raw[32:64])).FillBytes(highS[32:64])
	highS[64] ^= 1
	for name, s := range map[string]string{
		"empty":     "",
		"short":     good[:128],
		"not hex":   "zz" + good[2:],
		"bad v":     good[:128] + "1d",
		"malleable": hex.EncodeToString(highS),
	} {
		_, err := Wallets{}.ParseSignature(s)
		require.Error(t, err, name)
	}
}
