package worker

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/dustdeposit"
	"agentpay/ent/gasspend"
	"agentpay/ent/payment"
	"agentpay/internal/testenv"
)

// TestHeldPaymentsAreSwept: a late payment (held for refund, never
// settled) is swept to the treasury by the sweep_payment job settle_pending
// enqueues, on an EVM chain and on Solana, and its address is marked swept.
func TestHeldPaymentsAreSwept(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base, chains.Solana}, Jobs: true, BlockTime: 100 * time.Millisecond})
	h := newHarness(t, env, agentpay.Config{})
	m, _ := h.merchant(t, "http://127.0.0.1:9/hook")
	auth := &agentpay.MerchantAuth{Merchant: m, Mode: agentpay.ModeTest}

	type held struct {
		chain   chains.Name
		address string
		session uuid.UUID
	}
	var all []held
	for _, chain := range []chains.Name{chains.Base, chains.Solana} {
		env.Fund(t, chain, env.Treasury.Address(chain), 1) // its token account exists
		amount := decimal.RequireFromString("5")
		created, err := h.svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
		require.NoError(t, err)
		sess := created.Session
		d, err := h.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", string(chain), "USDC")
		require.NoError(t, err)
		// Paid after the session expired: recorded by the scan as late.
		h.db.Ent.CheckoutSession.UpdateOne(sess).SetStatus(checkoutsession.StatusExpired).ExecX(ctx)
		env.Fund(t, chain, d.Address, 5_000_000)
		all = append(all, held{chain, d.Address, sess.ID})
	}
	// Scans until the payments are final: the worker's first scan now
	// comes at its start, before they are (it came after River's leader
	// election, 1 to 2 s later, and with it the one scan this test had).
	h.startWorker(t, Config{ScanInterval: 200 * time.Millisecond})
	for _, w := range all {
		var p *ent.Payment
		require.Eventually(t, func() bool {
			var err error
			p, err = h.db.Ent.Payment.Query().Where(payment.SessionID(w.session)).Only(ctx)
			return err == nil && p.SweptAt != nil
		}, 90*time.Second, 100*time.Millisecond, "sweep on %s", w.chain)
		require.True(t, p.Late, w.chain)
		require.Nil(t, p.SettlementStatus, w.chain)
		da := h.db.Ent.DepositAddress.GetX(ctx, *p.DepositAddressID)
		require.True(t, da.Swept, w.chain)
		require.Equal(t, p.SweepTxHash, da.SweepTxHash, w.chain)
		require.Zero(t, env.Balance(t, w.chain, w.address).Int64(), w.chain)
		require.Equal(t, int64(5_000_001), env.Balance(t, w.chain, env.Treasury.Address(w.chain)).Int64(), w.chain)
	}
}

// TestDustIsSweptByTheWorker: dust on a deposit address, on an EVM chain
// and on Solana, is recorded by the worker's scan (no payment), and once
// the address's dust is worth a sweep's gas, by the gas ledger's measure
// and the configured gas token price, the sweep_dust job settle_pending
// enqueues sweeps all of it to the treasury in one transfer; the books
// balance.
func TestDustIsSweptByTheWorker(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base, chains.Solana}, Jobs: true, BlockTime: 100 * time.Millisecond})
	// A sweep costs 0.000001 ETH on base and 0.000005 SOL on Solana (the
	// gas ledger's measure, below): at these prices, half a cent.
	h := newHarness(t, env, agentpay.Config{GasTokenPrices: map[chains.Name]decimal.Decimal{
		chains.Base: decimal.NewFromInt(5_000), chains.Solana: decimal.NewFromInt(1_000),
	}})
	for _, g := range []struct {
		chain    chains.Name
		fee      int64
		decimals int32
	}{{chains.Base, 1_000_000_000_000, 18}, {chains.Solana, 5_000, 9}} {
		h.db.Ent.GasSpend.Create().SetChain(string(g.chain)).SetMode(gasspend.ModeTest).SetTxHash("measured-" + string(g.chain)).
			SetPurpose(agentpay.GasPurposeSweep).SetFee(g.fee).SetDecimals(g.decimals).ExecX(ctx)
		minimum, ok, err := h.svc.DustSweepMinimum(ctx, g.chain, agentpay.ModeTest)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(5_000), minimum, g.chain)
	}
	m, _ := h.merchant(t, "http://127.0.0.1:9/hook")
	auth := &agentpay.MerchantAuth{Merchant: m, Mode: agentpay.ModeTest}
	addresses := map[chains.Name]string{}
	for _, chain := range []chains.Name{chains.Base, chains.Solana} {
		env.Fund(t, chain, env.Treasury.Address(chain), 1) // its token account exists
		amount := decimal.RequireFromString("5")
		created, err := h.svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
		require.NoError(t, err)
		d, err := h.svc.SelectPaymentMethod(ctx, created.Session.ExternalID, "", string(chain), "USDC")
		require.NoError(t, err)
		env.Fund(t, chain, d.Address, 4_000)
		env.Fund(t, chain, d.Address, 3_000)
		addresses[chain] = d.Address
	}
	h.startWorker(t, Config{ScanInterval: 200 * time.Millisecond})
	for chain, address := range addresses {
		da := h.db.Ent.DepositAddress.Query().Where(depositaddress.Address(address)).OnlyX(ctx)
		require.Eventually(t, func() bool {
			rows := h.db.Ent.DustDeposit.Query().Where(dustdeposit.DepositAddressID(da.ID), dustdeposit.SweptAtNotNil()).AllX(ctx)
			return len(rows) == 2
		}, 90*time.Second, 200*time.Millisecond, "dust swept on %s", chain)
		rows := h.db.Ent.DustDeposit.Query().Where(dustdeposit.DepositAddressID(da.ID)).AllX(ctx)
		require.Equal(t, *rows[0].SweepID, *rows[1].SweepID, "one sweep on %s", chain)
		require.Zero(t, h.db.Ent.Payment.Query().Where(payment.DepositAddressID(da.ID)).CountX(ctx), "no payment on %s", chain)
		require.Zero(t, env.Balance(t, chain, address).Int64(), chain)
		require.Equal(t, int64(7_001), env.Balance(t, chain, env.Treasury.Address(chain)).Int64(), chain)
	}
	books, err := h.svc.Books(ctx)
	require.NoError(t, err)
	require.NoError(t, books.Err())
}
