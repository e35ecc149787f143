package agentpay

import (
	"context"
	"math/big"
	"testing"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/dustdeposit"
	"agentpay/ent/gasspend"
	"agentpay/ent/payment"
	"agentpay/ent/webhookevent"
)

// newDustFixture is the payment fixture on base and Solana, so a session
// can switch chains.
func newDustFixture(t *testing.T) *paymentFixture {
	t.Helper()
	ctx := context.Background()
	f := &paymentFixture{checkoutFixture: startCheckoutFixture(t, true, true)}
	reg := f.checkoutFixture.merchant(t, "Shop", nil)
	f.db.Ent.Merchant.UpdateOneID(reg.Merchant.ID).SetWebhookURL("http://127.0.0.1:9/hook").SetTestWebhookURL("http://127.0.0.1:9/hook").ExecX(ctx)
	f.merchant = f.db.Ent.Merchant.GetX(ctx, reg.Merchant.ID)
	f.scan(t)
	return f
}

// dustOn is the dust recorded on a deposit address, oldest first.
func dustOn(t *testing.T, f *paymentFixture, address string) []*ent.DustDeposit {
	t.Helper()
	ctx := context.Background()
	da := f.db.Ent.DepositAddress.Query().Where(depositaddress.Address(address)).OnlyX(ctx)
	return f.db.Ent.DustDeposit.Query().Where(dustdeposit.DepositAddressID(da.ID)).
		Order(ent.Asc(dustdeposit.FieldCreatedAt), ent.Asc(dustdeposit.FieldID)).AllX(ctx)
}

// A 0.001 USDC deposit to a session's address on base is dust: recorded
// once final (a replayed scan records it once), no payment, no webhook,
// the session unchanged and free to switch chains; the books balance with
// it on the address. It is not swept while the address's dust is worth
// less than a sweep's gas (none before the gas ledger has measured a
// sweep), and is swept together with more dust, in one transfer, once it
// is; the books balance after, and the gas ledger records the sweep.
func TestDustIsNoPaymentAndIsSweptOnceWorthTheGas(t *testing.T) {
	ctx := context.Background()
	f := newDustFixture(t)
	sess, addr := f.open(t, "5")
	f.pay(t, addr, 1_000) // 0.001 USDC
	f.mine(t, func() bool { return len(dustOn(t, f, addr.Hex())) == 1 })
	f.mine(t, func() bool { return true })
	f.replay(t)
	d := dustOn(t, f, addr.Hex())
	require.Len(t, d, 1, "recorded once")
	require.Equal(t, int64(1_000), d[0].Amount)
	require.False(t, d[0].Livemode)

	require.Zero(t, f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).CountX(ctx), "no payment")
	require.Zero(t, f.db.Ent.WebhookEvent.Query().Where(webhookevent.SessionID(sess.ID)).CountX(ctx), "no webhook")
	require.Equal(t, checkoutsession.StatusDetecting, f.reload(t, sess).Status, "the session still waits for its payment")
	sol, err := f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "solana", "USDC")
	require.NoError(t, err, "no chain lock: the session can be paid on another chain")
	require.NotEmpty(t, sol.Address)
	b := requireBalanced(t, f.env, f.svc)
	require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses).OnChain.Cmp(big.NewInt(1_000)), "the dust is on its address, and in the records")

	// No sweep has been measured on base yet: the dust waits.
	due, err := f.svc.DustToSweep(ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, due)
	res, err := f.svc.sweepDustWith(ctx, d[0].DepositAddressID, atOnce)
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Nil(t, dustOn(t, f, addr.Hex())[0].SweepID, "not taken")

	// A held payment's sweep, which the gas ledger measures.
	late, lateAddr := f.open(t, "1")
	f.pastDeadline(t, late)
	_, err = f.svc.ExpireSessions(ctx)
	require.NoError(t, err)
	f.pay(t, lateAddr, 1_000_000)
	f.finalAll(t)
	held := f.db.Ent.Payment.Query().Where(payment.SessionID(late.ID)).OnlyX(ctx)
	stop := autoMine(t, f.evm)
	res, err = f.svc.sweepHeldWith(ctx, held.ID, atOnce)
	require.NoError(t, err)
	require.True(t, res.Done, res.Waiting)
	stop()
	_, err = f.svc.TallyGas(ctx)
	require.NoError(t, err)
	gas, ok, err := f.svc.sweepGasEstimate(ctx, chains.Base, ModeTest)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, gas.IsPositive())
	// Priced so a sweep costs half a cent: the 0.001 is not worth it.
	f.svc.cfg.GasTokenPrices = map[chains.Name]decimal.Decimal{chains.Base: decimal.RequireFromString("0.005").DivRound(gas, 30)}
	minimum, ok, err := f.svc.DustSweepMinimum(ctx, chains.Base, ModeTest)
	require.NoError(t, err)
	require.True(t, ok)
	require.InDelta(t, 5_000, minimum, 1)
	due, err = f.svc.DustToSweep(ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, due, "0.001 is worth less than the gas")

	// More dust: 0.001 + 0.0045 is worth it, swept in one transfer.
	f.pay(t, addr, 4_500)
	f.mine(t, func() bool { return len(dustOn(t, f, addr.Hex())) == 2 })
	requireBalanced(t, f.env, f.svc)
	due, err = f.svc.DustToSweep(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{d[0].DepositAddressID}, due)

	// A run claims the address's dust and dies before sending it; dust
	// recorded after the claim is not in that sweep.
	da := f.db.Ent.DepositAddress.GetX(ctx, d[0].DepositAddressID)
	claimed, err := f.svc.claimDust(ctx, da, chains.Base, ModeTest)
	require.NoError(t, err)
	require.NotEqual(t, uuid.Nil, claimed)
	f.pay(t, addr, 2_000)
	f.mine(t, func() bool { return len(dustOn(t, f, addr.Hex())) == 3 })
	due, err = f.svc.DustToSweep(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{d[0].DepositAddressID}, due, "the sweep under way")

	treasury := f.svc.cfg.Treasury.Address(chains.Base)
	before := f.ledgerBalance(t, treasury)
	stop = autoMine(t, f.evm)
	res, err = f.svc.sweepDustWith(ctx, d[0].DepositAddressID, atOnce)
	require.NoError(t, err)
	require.True(t, res.Done, res.Waiting)
	stop()
	swept := dustOn(t, f, addr.Hex())
	require.Len(t, swept, 3)
	for _, r := range swept[:2] {
		require.NotNil(t, r.SweptAt)
		require.Equal(t, claimed, *r.SweepID, "one sweep, the one claimed")
		require.Equal(t, swept[0].SweepTxHash, r.SweepTxHash)
	}
	require.NotEmpty(t, swept[0].SweepTxHash)
	require.Nil(t, swept[2].SweepID, "0.002 came after the claim, and is worth less than the gas")
	require.Equal(t, int64(5_500), f.ledgerBalance(t, treasury)-before, "the treasury has the dust swept")
	b = requireBalanced(t, f.env, f.svc)
	require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses).OnChain.Cmp(big.NewInt(2_000)))
	require.Zero(t, f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).CountX(ctx), "still no payment")

	// Swept once: again, nothing moves; the gas ledger has the sweep.
	res, err = f.svc.sweepDustWith(ctx, d[0].DepositAddressID, atOnce)
	require.NoError(t, err)
	require.True(t, res.Done)
	_, err = f.svc.TallyGas(ctx)
	require.NoError(t, err)
	require.True(t, f.db.Ent.GasSpend.Query().Where(gasspend.TxHash(swept[0].SweepTxHash), gasspend.Purpose(GasPurposeSweep)).ExistX(ctx))
	requireBalanced(t, f.env, f.svc)
}

// The minimum worth counting is per chain and configurable: at 0 a
// deposit of one base unit is a payment; a payment of a whole session is
// never dust at the default.
func TestDustMinimumPerChain(t *testing.T) {
	f := newPaymentFixture(t)
	cases := []struct {
		minimums map[chains.Name]decimal.Decimal
		units    int64
		dust     bool
	}{
		{nil, 9_999, true},
		{nil, 10_000, false},
		{map[chains.Name]decimal.Decimal{chains.Base: decimal.RequireFromString("0.05")}, 49_999, true},
		{map[chains.Name]decimal.Decimal{chains.Solana: decimal.RequireFromString("0.05")}, 49_999, false},
		{map[chains.Name]decimal.Decimal{chains.Base: decimal.Zero}, 1, false},
	}
	for _, c := range cases {
		f.svc.cfg.DustMinimums = c.minimums
		require.Equal(t, c.dust, f.svc.isDust(chains.Base, big.NewInt(c.units), USDCDecimals), "%v %d", c.minimums, c.units)
	}
}

// ledgerBalance reads an address's USDC on base, a block after the last
// transfer.
func (f *paymentFixture) ledgerBalance(t *testing.T, address string) int64 {
	t.Helper()
	l, err := f.svc.ledger(ModeTest, chains.Base)
	require.NoError(t, err)
	nextBaseBlock(t, f.env)
	b, err := l.Balance(context.Background(), address)
	require.NoError(t, err)
	return b.Int64()
}
