package evm

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/devnet"
)

// signedBy signs a third party's TransferWithAuthorization as a wallet
// would (eth_signTypedData_v4: v 27 or 28).
func signedBy(tb testing.TB, key *ecdsa.PrivateKey, domain common.Hash, to common.Address, value int64, validAfter, validBefore int64, nonce [32]byte) chains.Authorization {
	tb.Helper()
	a := authorization{
		From: crypto.PubkeyToAddress(key.PublicKey), To: to, Value: big.NewInt(value),
		ValidAfter: big.NewInt(validAfter), ValidBefore: big.NewInt(validBefore), Nonce: nonce,
	}
	d := a.digest(domain)
	sig, err := crypto.Sign(d[:], key)
	require.NoError(tb, err)
	sig[64] += 27
	return chains.Authorization{
		From: a.From.Hex(), To: to.Hex(), Value: a.Value, ValidAfter: a.ValidAfter, ValidBefore: a.ValidBefore,
		Nonce: nonce, Signature: sig,
	}
}

func TestTokenDomain(t *testing.T) {
	c := startChain(t, chains.Base)
	l := c.ledger(t, false)
	d, err := l.TokenDomain(context.Background())
	require.NoError(t, err)
	require.Equal(t, chains.TokenDomain{Name: "USD Coin", Version: "2", ChainID: devnet.DefaultChainIDs[chains.Base], VerifyingContract: c.USDC.Hex()}, d)
	require.Equal(t, uint64(84532), d.ChainID, "the base devnet signs as Base Sepolia, the network x402 clients name base-sepolia")
}

// TestRelayAuthorization relays a payer's signed authorization on the
// devnet's real token bytecode: refusals cost nothing and change nothing,
// the good one moves the value once, paid for by the gas wallet, and
// relaying it again answers the same transaction or "used".
func TestRelayAuthorization(t *testing.T) {
	ctx := context.Background()
	c := startChain(t, chains.Base)
	l := c.ledger(t, false)
	payerKey, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(payerKey.PublicKey)
	_, err = c.Send(ctx, payer, big.NewInt(5_000_000))
	require.NoError(t, err)
	to := randomAddress(t)
	now := time.Now().Unix()
	nonce := randomRef(t)
	good := signedBy(t, payerKey, l.domain, to, 2_500_000, now-600, now+300, nonce)

	otherKey, err := crypto.GenerateKey()
	require.NoError(t, err)
	wrongChain := eip712Domain("USD Coin", "2", big.NewInt(8453), c.USDC)
	refusals := []struct {
		name   string
		a      chains.Authorization
		reason chains.AuthorizationReason
	}{
		{"signed by another key", func() chains.Authorization {
			a := signedBy(t, otherKey, l.domain, to, 2_500_000, now-600, now+300, nonce)
			a.From = payer.Hex()
			return a
		}(), chains.AuthorizationSignature},
		{"signed for another chain", signedBy(t, payerKey, wrongChain, to, 2_500_000, now-600, now+300, nonce), chains.AuthorizationSignature},
		{"value changed after signing", func() chains.Authorization {
			a := good
			a.Value = big.NewInt(2_500_001)
			return a
		}(), chains.AuthorizationSignature},
		{"recipient changed after signing", func() chains.Authorization {
			a := good
			a.To = randomAddress(t).Hex()
			return a
		}(), chains.AuthorizationSignature},
		{"expired", signedBy(t, payerKey, l.domain, to, 2_500_000, now-600, now-1, nonce), chains.AuthorizationExpired},
		{"expiring within the margin", signedBy(t, payerKey, l.domain, to, 2_500_000, now-600, now+2, nonce), chains.AuthorizationExpired},
		{"not yet valid", signedBy(t, payerKey, l.domain, to, 2_500_000, now+600, now+900, nonce), chains.AuthorizationNotYetValid},
		{"more than the balance", signedBy(t, payerKey, l.domain, to, 5_000_001, now-600, now+300, nonce), chains.AuthorizationInsufficient},
		{"short signature", func() chains.Authorization {
			a := good
			a.Signature = a.Signature[:64]
			return a
		}(), chains.AuthorizationMalformed},
		{"zero value", func() chains.Authorization {
			a := good
			a.Value = new(big.Int)
			return a
		}(), chains.AuthorizationMalformed},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			err := l.VerifyAuthorization(ctx, tc.a)
			require.Equal(t, tc.reason, chains.AuthorizationRefusal(err).Reason, "%v", err)
			_, err = l.RelayAuthorization(ctx, tc.a)
			require.Equal(t, tc.reason, chains.AuthorizationRefusal(err).Reason, "%v", err)
			require.ErrorIs(t, err, chains.ErrRefused)
		})
	}
	require.Equal(t, int64(5_000_000), c.usdcBalance(t, l, payer).Int64(), "no refusal moved anything")

	require.NoError(t, l.VerifyAuthorization(ctx, good))
	sub, err := l.RelayAuthorization(ctx, good)
	require.NoError(t, err)
	require.Equal(t, payer.Hex(), sub.From)
	again, err := l.RelayAuthorization(ctx, good)
	require.NoError(t, err)
	require.Equal(t, sub, again, "relayed again while pending: the same transaction")
	rc := c.include(t, l, sub.TxHash)
	require.Equal(t, chains.TxIncluded, rc.State)
	require.Equal(t, int64(2_500_000), c.usdcBalance(t, l, to).Int64())
	require.Equal(t, int64(2_500_000), c.usdcBalance(t, l, payer).Int64())

	deps, err := l.DepositsIn(ctx, sub.TxHash, to.Hex())
	require.NoError(t, err)
	require.Len(t, deps, 1)
	require.Equal(t, payer.Hex(), deps[0].From)

	// Once used, the nonce is refused by verification, and the
	// transaction that used it is found by FindTransfer.
	err = l.VerifyAuthorization(ctx, good)
	require.ErrorIs(t, err, chains.ErrAlreadyUsed)
	require.NotErrorIs(t, err, chains.ErrRefused)
	hash, found, err := l.FindTransfer(ctx, chains.TransferQuery{From: payer.Hex(), To: to.Hex(), Amount: big.NewInt(2_500_000), Ref: nonce})
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, sub.TxHash, hash)

	// A second ledger (another instance) relaying it is refused as used.
	other := c.ledger(t, true)
	_, err = other.RelayAuthorization(ctx, good)
	require.ErrorIs(t, err, chains.ErrAlreadyUsed)
	require.Equal(t, int64(2_500_000), c.usdcBalance(t, l, to).Int64(), "moved once")
}
