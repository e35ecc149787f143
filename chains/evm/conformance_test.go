package evm_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/adapters"
	"agentpay/chains/chainstest"
	"agentpay/chains/devnet"
	"agentpay/chains/evm"
)

// startConformanceChain starts a devnet making a block every 50 ms and
// connects it as the service does.
func startConformanceChain(t *testing.T, name chains.Name) chainstest.Chain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gasKey, err := crypto.GenerateKey()
	require.NoError(t, err)
	dn, err := devnet.StartEVM(ctx, devnet.EVMConfig{
		Chain: name, BlockTime: 50 * time.Millisecond,
		Fund: []common.Address{crypto.PubkeyToAddress(gasKey.PublicKey)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dn.Close() })
	cfg := adapters.Chain{RPCURL: dn.RPCURL, USDC: dn.USDC.Hex(), Confirmations: 3, GasKey: crypto.FromECDSA(gasKey), PollInterval: 20 * time.Millisecond}
	connect := func(t testing.TB) chains.Network {
		n, err := adapters.Network(context.Background(), name, cfg)
		require.NoError(t, err)
		return n
	}
	other, err := dn.DeployToken(ctx)
	require.NoError(t, err)
	otherCfg := cfg
	otherCfg.USDC = other.Address.Hex()
	otherNet, err := adapters.Network(ctx, name, otherCfg)
	require.NoError(t, err)
	return chainstest.Chain{
		RPCURL: dn.RPCURL,
		Connect: func(t testing.TB, rpcURL string, rpcTimeout time.Duration) chains.Network {
			cfg := cfg
			cfg.RPCURL, cfg.RPCTimeout = rpcURL, rpcTimeout
			n, err := adapters.Network(context.Background(), name, cfg)
			require.NoError(t, err)
			return n
		},
		Network: connect(t),
		Reopen:  func(t testing.TB) chains.Ledger { return connect(t).Ledger },
		Wallets: evm.Wallets{},
		Fund: func(ctx context.Context, address string, amount *big.Int) (string, error) {
			h, err := dn.Send(ctx, common.HexToAddress(address), amount)
			return h.Hex(), err
		},
		OtherToken: chainstest.Token{
			Ledger: otherNet.Ledger,
			Fund: func(ctx context.Context, address string, amount *big.Int) (string, error) {
				h, err := other.Mint(ctx, common.HexToAddress(address), amount)
				return h.Hex(), err
			},
		},
	}
}

func TestConformance(t *testing.T) {
	for _, name := range chains.EVMChains {
		t.Run(string(name), func(t *testing.T) {
			t.Parallel()
			c := startConformanceChain(t, name)
			chainstest.TestLedger(t, c)
			t.Run("Watcher", func(t *testing.T) { chainstest.TestWatcher(t, c) })
			t.Run("RPCDeadline", func(t *testing.T) { chainstest.TestRPCDeadline(t, c) })
		})
	}
}

func TestWalletsConformance(t *testing.T) {
	chainstest.TestWallets(t, evm.Wallets{})
}
