package solana_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/adapters"
	"agentpay/chains/chainstest"
	agentsolana "agentpay/chains/solana"
)

func TestConformance(t *testing.T) {
	tc := startChain(t)
	cfg := adapters.Chain{RPCURL: tc.dn.RPCURL, USDC: tc.dn.Mint.String(), Confirmations: testFinalizedDepth, GasKey: tc.treasury, PollInterval: testSlotTime}
	connect := func(t testing.TB) chains.Network {
		n, err := adapters.Network(context.Background(), chains.Solana, cfg)
		require.NoError(t, err)
		return n
	}
	other, err := tc.dn.NewMint(context.Background())
	require.NoError(t, err)
	otherCfg := cfg
	otherCfg.USDC = other.String()
	otherNet, err := adapters.Network(context.Background(), chains.Solana, otherCfg)
	require.NoError(t, err)
	c := chainstest.Chain{
		RPCURL: tc.dn.RPCURL,
		Connect: func(t testing.TB, rpcURL string, rpcTimeout time.Duration) chains.Network {
			cfg := cfg
			cfg.RPCURL, cfg.RPCTimeout = rpcURL, rpcTimeout
			n, err := adapters.Network(context.Background(), chains.Solana, cfg)
			require.NoError(t, err)
			return n
		},
		Network: connect(t),
		Reopen:  func(t testing.TB) chains.Ledger { return connect(t).Ledger },
		Wallets: agentsolana.Wallets{},
		Fund: func(ctx context.Context, address string, amount *big.Int) (string, error) {
			sig, err := tc.dn.Send(ctx, mustPub(t, address), amount.Uint64())
			return sig.String(), err
		},
		OtherToken: chainstest.Token{
			Ledger: otherNet.Ledger,
			Fund: func(ctx context.Context, address string, amount *big.Int) (string, error) {
				sig, err := tc.dn.MintTo(ctx, other, mustPub(t, address), amount.Uint64())
				return sig.String(), err
			},
		},
	}
	chainstest.TestLedger(t, c)
	t.Run("Watcher", func(t *testing.T) { chainstest.TestWatcher(t, c) })
	t.Run("RPCDeadline", func(t *testing.T) { chainstest.TestRPCDeadline(t, c) })
}

func TestWalletsConformance(t *testing.T) {
	chainstest.TestWallets(t, agentsolana.Wallets{})
}
