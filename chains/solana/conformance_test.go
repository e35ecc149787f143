package solana_test

import (
	"context"
	"math/big"
	"testing"

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
}

func TestWalletsConformance(t *testing.T) {
	chainstest.TestWallets(t, agentsolana.Wallets{})
}
