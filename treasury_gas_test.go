package agentpay

import (
	"context"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/gagliardetto/solana-go"
	solanarpc "github.com/gagliardetto/solana-go/rpc"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent/gasspend"
)

// treasuryNative reads the treasury's gas token balance in its smallest
// unit (wei, lamports) straight from the devnet.
func (e *sendEnv) treasuryNative(t *testing.T, c chains.Name) *big.Int {
	t.Helper()
	ctx := context.Background()
	addr := e.treasuryAddress(c)
	if c == chains.Solana {
		b, err := e.env.Solana().Client().GetBalance(ctx, solana.MustPublicKeyFromBase58(addr), solanarpc.CommitmentConfirmed)
		require.NoError(t, err)
		return new(big.Int).SetUint64(b.Value)
	}
	b, err := e.env.EVM(c).Client().BalanceAt(ctx, common.HexToAddress(addr), nil)
	require.NoError(t, err)
	return b
}

// An agent's send costs the treasury two transactions on each chain (the
// amount and the fee legs). The gas tally records both, once, with what
// they really cost: the treasury's native balance falls by exactly the
// recorded fees plus rent. On Solana the recipient's first token account
// is the treasury's rent to pay; the second send to it pays none.
func TestGasLedgerRecordsWhatTheTreasuryPaid(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		t.Run(string(c), func(t *testing.T) {
			alice, bob := e.register(t, "alice"), e.register(t, "bob")
			e.fund(t, alice, c, "100")
			e.onChain(t, c, e.wallet(t, alice, c)) // the funding is readable
			before := e.treasuryNative(t, c)

			var hashes []string
			for range 2 {
				res, _, err := e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("10"), Chain: string(c)})
				require.NoError(t, err)
				require.Equal(t, "completed", res.Status)
				hashes = append(hashes, res.TxHash, res.FeeTxHash)
			}
			e.onChain(t, c, e.treasuryAddress(c)) // the last block is readable
			spent := new(big.Int).Sub(before, e.treasuryNative(t, c))

			tally, err := e.svc.TallyGas(ctx)
			require.NoError(t, err)
			require.Equal(t, 4, tally.Recorded)
			require.Zero(t, tally.Unread)

			rows := e.db.Ent.GasSpend.Query().Where(gasspend.Chain(string(c))).AllX(ctx)
			require.Len(t, rows, 4)
			recorded := new(big.Int)
			byHash := map[string]string{}
			var rent int64
			for _, g := range rows {
				require.Equal(t, gasspend.ModeTest, g.Mode)
				require.Positive(t, g.Fee)
				recorded.Add(recorded, big.NewInt(g.Fee+g.Rent))
				byHash[g.TxHash] = g.Purpose
				rent += g.Rent
			}
			require.Equal(t, 0, spent.Cmp(recorded), "treasury spent %s, the ledger says %s", spent, recorded)
			require.Equal(t, map[string]string{
				hashes[0]: GasPurposeSend, hashes[1]: GasPurposeSendFee,
				hashes[2]: GasPurposeSend, hashes[3]: GasPurposeSendFee,
			}, byHash)
			if c == chains.Solana {
				// The first send opens bob's token account (and the
				// treasury's, on a fresh devnet, with its fee leg); the
				// second opens none.
				first := e.db.Ent.GasSpend.Query().Where(gasspend.TxHash(hashes[0])).OnlyX(ctx)
				require.EqualValues(t, 2_039_280, first.Rent)
				for _, h := range hashes[2:] {
					require.Zero(t, e.db.Ent.GasSpend.Query().Where(gasspend.TxHash(h)).OnlyX(ctx).Rent)
				}
			} else {
				require.Zero(t, rent)
			}

			again, err := e.svc.TallyGas(ctx)
			require.NoError(t, err)
			require.Zero(t, again.Recorded, "a transaction is recorded once")

			reports, err := e.svc.GasReports(ctx)
			require.NoError(t, err)
			var report *GasReport
			for i := range reports {
				if reports[i].Chain == c && reports[i].Mode == ModeTest {
					report = &reports[i]
				}
			}
			require.NotNil(t, report)
			require.EqualValues(t, 4, report.Transactions)
			decimals := nativeDecimals(c)
			require.True(t, decimal.NewFromBigInt(recorded, -decimals).Equal(report.Fees.Add(report.Rent)), "report %s + %s", report.Fees, report.Rent)
			requireDecimal(t, "0.02", report.SendFees, "0.1% of two sends of 10")

			info, err := e.svc.Treasury(ctx)
			require.NoError(t, err)
			for _, w := range info.Wallets {
				if w.Chain == c {
					require.EqualValues(t, 4, w.Gas.Transactions)
					require.True(t, report.Fees.Equal(w.Gas.Fees))
				}
			}
		})
	}
}

// Two tallies at once record each transaction once (the unique index), and
// a recorded row is not read again.
func TestGasTallyConcurrent(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Base, "100")
	e.onChain(t, chains.Base, e.wallet(t, alice, chains.Base))
	for range 3 {
		_, _, err := e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Chain: string(chains.Base)})
		require.NoError(t, err)
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := e.svc.TallyGas(ctx)
			errs <- err
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, 6, e.db.Ent.GasSpend.Query().CountX(ctx))
}

// The send policy: where the operator raises a chain's minimum, a smaller
// send there is refused with the minimum named (nothing recorded), one
// without a chain goes to a chain whose minimum it reaches, and one below
// every minimum is refused. Withdrawals follow the same rule.
func TestSendMinimumsPerChain(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	svc := newTestService(t, e.env, Config{AgentMode: ModeTest, SendMinimums: map[chains.Name]decimal.Decimal{
		chains.Base: dec("0.50"), chains.Solana: dec("0.20"),
	}})
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Base, "10")
	e.onChain(t, chains.Base, e.wallet(t, alice, chains.Base))
	require.Equal(t, "0.5", svc.SendMinimum(chains.Base).String())
	require.Equal(t, "0.01", svc.SendMinimum(chains.Arbitrum).String(), "a chain not listed: 0.01")

	for _, tc := range []struct {
		amount, chain, detail string
	}{
		{"0.40", "base", "amount_usd: must be at least 0.50 on base: below it the gas the treasury pays exceeds the send's fee"},
		{"0.10", "", "amount_usd: must be at least 0.20: below it the gas the treasury pays exceeds the send's fee on every chain"},
	} {
		_, _, err := svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec(tc.amount), Chain: tc.chain})
		require.True(t, IsValidation(err), "%s: %v", tc.amount, err)
		require.EqualError(t, err, tc.detail)
	}
	require.Zero(t, e.db.Ent.Transfer.Query().CountX(ctx), "a refused send records nothing")

	// 0.30 without a chain: solana's minimum (0.20) is reached but the
	// balance is on base, whose minimum (0.50) is not: refused as short of
	// balance where it could go, not sent below the minimum.
	_, _, err := svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("0.30")})
	require.ErrorIs(t, err, ErrInsufficientFunds)
	require.Zero(t, e.db.Ent.Transfer.Query().CountX(ctx))

	// At the minimum it goes.
	res, _, err := svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("0.50")})
	require.NoError(t, err)
	require.Equal(t, chains.Base, res.Chain)
	require.Equal(t, "completed", res.Status)
}
