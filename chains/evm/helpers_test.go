package evm

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/devnet"
)

// testChain is a devnet with a funded gas wallet.
type testChain struct {
	*devnet.EVM
	gasKey *ecdsa.PrivateKey
}

// startChain starts a devnet that mines only on Commit, so tests decide
// exactly when blocks happen.
func startChain(tb testing.TB, chain chains.Name) *testChain {
	tb.Helper()
	gasKey, err := crypto.GenerateKey()
	require.NoError(tb, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dn, err := devnet.StartEVM(ctx, devnet.EVMConfig{Chain: chain, Fund: []common.Address{crypto.PubkeyToAddress(gasKey.PublicKey)}})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = dn.Close() })
	return &testChain{EVM: dn, gasKey: gasKey}
}

// config for the chain; viaRPC picks JSON-RPC over HTTP instead of the
// in-process client.
func (c *testChain) config(viaRPC bool) Config {
	cfg := Config{
		Chain:        c.Chain,
		ChainID:      c.ChainID,
		USDC:         c.USDC.Hex(),
		GasKey:       crypto.FromECDSA(c.gasKey),
		PollInterval: 5 * time.Millisecond,
	}
	if viaRPC {
		cfg.RPCURL = c.RPCURL
	} else {
		cfg.Client = c.Client()
	}
	return cfg
}

func (c *testChain) ledger(tb testing.TB, viaRPC bool) *Ledger {
	tb.Helper()
	l, err := New(context.Background(), c.config(viaRPC))
	require.NoError(tb, err)
	tb.Cleanup(l.Close)
	return l
}

// newKey returns a fresh key and its address; it holds nothing.
func newKey(tb testing.TB) ([]byte, common.Address) {
	tb.Helper()
	k, err := crypto.GenerateKey()
	require.NoError(tb, err)
	return crypto.FromECDSA(k), crypto.PubkeyToAddress(k.PublicKey)
}

// fundedKey is a new key holding units of USDC (and no native coin).
func (c *testChain) fundedKey(tb testing.TB, units int64) ([]byte, common.Address) {
	tb.Helper()
	key, addr := newKey(tb)
	_, err := c.Send(context.Background(), addr, big.NewInt(units))
	require.NoError(tb, err)
	return key, addr
}

func randomRef(tb testing.TB) [32]byte {
	var r [32]byte
	_, err := rand.Read(r[:])
	require.NoError(tb, err)
	return r
}

func randomAddress(tb testing.TB) common.Address {
	var a common.Address
	_, err := rand.Read(a[:])
	require.NoError(tb, err)
	return a
}

var erc20Transfer = crypto.Keccak256([]byte("transfer(address,uint256)"))[:4]

// payerTransfers sends plain ERC-20 transfers from the devnet payer, perBlock
// per block, committing as it goes, and returns the transactions' hashes.
func (c *testChain) payerTransfers(tb testing.TB, to []common.Address, amount *big.Int, perBlock int) []common.Hash {
	tb.Helper()
	ctx := context.Background()
	client := c.Client()
	payer := crypto.PubkeyToAddress(c.Payer.PublicKey)
	nonce, err := client.PendingNonceAt(ctx, payer)
	require.NoError(tb, err)
	signer := types.LatestSignerForChainID(new(big.Int).SetUint64(c.ChainID))
	var hashes []common.Hash
	var group []common.Hash
	for i, addr := range to {
		data := append(append(append([]byte{}, erc20Transfer...), common.LeftPadBytes(addr[:], 32)...), common.LeftPadBytes(amount.Bytes(), 32)...)
		tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{
			ChainID: new(big.Int).SetUint64(c.ChainID), Nonce: nonce, To: &c.USDC, Gas: 150_000,
			GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(100e9), Data: data,
		}), signer, c.Payer)
		require.NoError(tb, err)
		require.NoError(tb, client.SendTransaction(ctx, tx))
		hashes = append(hashes, tx.Hash())
		group = append(group, tx.Hash())
		nonce++
		if len(group) == perBlock || i == len(to)-1 {
			c.awaitPooled(tb, len(group))
			c.commitAll(tb, group)
			group = group[:0]
		}
	}
	return hashes
}

// usdcBalance reads a balance straight from the token.
func (c *testChain) usdcBalance(tb testing.TB, l *Ledger, a common.Address) *big.Int {
	tb.Helper()
	b, err := l.Balance(context.Background(), a.Hex())
	require.NoError(tb, err)
	return b
}

// include commits blocks until the transaction is in one and returns its
// receipt. Committing more than once matters on a loaded machine: a block
// can be sealed before the pool has promoted a just-sent transaction.
func (c *testChain) include(tb testing.TB, l *Ledger, txHash string) chains.Receipt {
	tb.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		c.Commit()
		r, err := l.Receipt(ctx, txHash)
		require.NoError(tb, err)
		if r.State == chains.TxIncluded || r.State == chains.TxFailed {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("transaction %s not included within 30 s", txHash)
	return chains.Receipt{}
}

// commitAll commits until every transaction is included and succeeded.
func (c *testChain) commitAll(tb testing.TB, hashes []common.Hash) {
	tb.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		c.Commit()
		missing := false
		for _, h := range hashes {
			r, err := c.Client().TransactionReceipt(ctx, h)
			if err != nil {
				missing = true
				break
			}
			require.Equal(tb, types.ReceiptStatusSuccessful, r.Status)
		}
		if !missing {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("transactions not included within 30 s")
}

// awaitPooled waits until the pool holds n executable transactions, so the
// next block carries them all (over JSON-RPC; the in-process client cannot
// ask).
func (c *testChain) awaitPooled(tb testing.TB, n int) {
	tb.Helper()
	raw, ok := c.Client().(rawRPC)
	if !ok {
		return
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		var status struct {
			Pending hexutil.Uint `json:"pending"`
		}
		require.NoError(tb, raw.Client().CallContext(context.Background(), &status, "txpool_status"))
		if int(status.Pending) >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatalf("the pool never held %d transactions", n)
}
