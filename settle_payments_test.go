package agentpay

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/merchant"
	"agentpay/ent/payment"
	paysandbox "agentpay/payout/sandbox"
)

// settlementFixture is the payment fixture with a merchant settling USDC to
// a fresh address on base, and a confirmed payment of 7.25 to settle.
type settlementFixture struct {
	*paymentFixture
	ledger   chains.Ledger
	payee    common.Address
	sess     *ent.CheckoutSession
	deposit  common.Address
	payment  *ent.Payment
	stopMine func()
}

func newSettlementFixture(t *testing.T, configure func(*ent.MerchantUpdateOne)) *settlementFixture {
	t.Helper()
	ctx := context.Background()
	f := &settlementFixture{paymentFixture: newPaymentFixture(t)}
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	f.payee = crypto.PubkeyToAddress(key.PublicKey)
	upd := f.db.Ent.Merchant.UpdateOneID(f.merchant.ID).SetSettlementAddress(f.payee.Hex())
	if configure != nil {
		configure(upd)
	}
	f.merchant = upd.SaveX(ctx)
	f.ledger, err = f.svc.ledger(ModeTest, chains.Base)
	require.NoError(t, err)

	f.sess, f.deposit = f.open(t, "7.25")
	f.pay(t, f.deposit, 7_250_000)
	f.mine(t, func() bool { return f.reload(t, f.sess).Status == checkoutsession.StatusConfirmed })
	f.payment = f.db.Ent.Payment.Query().Where(payment.SessionID(f.sess.ID)).OnlyX(ctx)
	require.Equal(t, payment.SettlementStatusPending, *f.payment.SettlementStatus)
	f.stopMine = autoMine(t, f.evm)
	return f
}

// autoMine commits a block every 20 ms until the test ends or stop is
// called, so transactions the service broadcasts get included.
func autoMine(t *testing.T, e *devnet.EVM) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				e.Commit()
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

func (f *settlementFixture) balance(t *testing.T, addr string) int64 {
	t.Helper()
	b, err := f.ledger.Balance(context.Background(), addr)
	require.NoError(t, err)
	return b.Int64()
}

func (f *settlementFixture) reloadPayment(t *testing.T) *ent.Payment {
	t.Helper()
	p, err := f.db.Ent.Payment.Get(context.Background(), f.payment.ID)
	require.NoError(t, err)
	return p
}

func (f *settlementFixture) settlementEvents(t *testing.T) []recordedEvent {
	t.Helper()
	var out []recordedEvent
	for _, e := range f.sessionEvents(t, f.sess) {
		if e.Type == EventSettlementCompleted {
			out = append(out, e)
		}
	}
	return out
}

// atOnce settles without waiting for a minimum or an interval: every
// swept payment is paid in the next batch.
var atOnce = SettlementOptions{Wait: 10 * time.Second, BatchInterval: -1}

func (f *settlementFixture) settle(t *testing.T) SettleResult {
	t.Helper()
	res, err := f.svc.settlePaymentWith(context.Background(), f.payment.ID, atOnce)
	require.NoError(t, err)
	return res
}

func TestSettlementPaysMerchantAndSweepsDeposit(t *testing.T) {
	f := newSettlementFixture(t, nil)
	treasury := f.svc.cfg.Treasury.EVMAddress
	require.Equal(t, int64(7_250_000), f.balance(t, f.deposit.Hex()))
	require.Zero(t, f.balance(t, treasury))

	require.True(t, f.settle(t).Done)

	require.Zero(t, f.balance(t, f.deposit.Hex()), "deposit swept")
	require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()), "merchant paid net")
	require.Equal(t, int64(7_250), f.balance(t, treasury), "treasury keeps the fee")

	p := f.reloadPayment(t)
	require.Equal(t, payment.SettlementStatusCompleted, *p.SettlementStatus)
	require.NotEmpty(t, p.SweepTxHash)
	require.NotEmpty(t, p.SettlementTxHash)
	require.Equal(t, p.SettlementTxHash, p.SettlementReference)
	require.Equal(t, "base", p.SettlementChain)
	require.Equal(t, f.payee.Hex(), p.SettlementAddress)
	require.NotNil(t, p.SettledAt)
	require.Empty(t, p.SettlementError)

	evs := f.settlementEvents(t)
	require.Len(t, evs, 1)
	d := evs[0].Data
	require.Equal(t, f.sess.ExternalID, d["session_external_id"])
	require.Equal(t, p.ExternalID, d["payment_external_id"])
	requireDec(t, "7.25", d["amount_usd"])
	requireDec(t, "7.25", d["gross_usd"])
	requireDec(t, "0.00725", d["fee_usd"])
	requireDec(t, "7.24275", d["net_usd"])
	require.Equal(t, "crypto_usdc", d["settlement_type"])
	require.Equal(t, p.SettlementTxHash, d["payout_reference"])
	require.Equal(t, p.SettlementTxHash, d["settlement_tx_hash"])
	require.Equal(t, p.SweepTxHash, d["sweep_tx_hash"])
	require.Equal(t, "base", d["settlement_chain"])
	require.Equal(t, f.payee.Hex(), d["settlement_address"])
	require.Equal(t, p.TxHash, d["tx_hash"])
	require.Equal(t, map[string]any{"order_id": "A-17", "qty": float64(2)}, d["metadata"])

	// Settling again moves nothing and reports nothing new.
	require.True(t, f.settle(t).Done)
	require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()))
	require.Equal(t, int64(7_250), f.balance(t, treasury))
	require.Len(t, f.settlementEvents(t), 1)
}

// A run that crashed after broadcasting a leg, before recording its hash,
// is resumed without paying twice.
func TestSettlementResumesAfterCrashMidLeg(t *testing.T) {
	send := func(t *testing.T, f *settlementFixture, key []byte, to string, amount int64, ref [32]byte) {
		ctx := context.Background()
		sub, err := f.ledger.Transfer(ctx, chains.TransferRequest{Key: key, To: to, Amount: big.NewInt(amount), Ref: ref})
		require.NoError(t, err)
		r, err := f.ledger.Wait(ctx, sub.TxHash)
		require.NoError(t, err)
		require.Equal(t, chains.TxIncluded, r.State)
	}
	t.Run("sweep", func(t *testing.T) {
		ctx := context.Background()
		f := newSettlementFixture(t, nil)
		treasury := f.svc.cfg.Treasury
		da := f.db.Ent.DepositAddress.GetX(ctx, *f.payment.DepositAddressID)
		depositKey, err := f.svc.DepositAddressKey(da)
		require.NoError(t, err)
		// What the crashed run did: its write before the broadcast, and the
		// broadcast itself; not the hash.
		f.db.Ent.Payment.UpdateOneID(f.payment.ID).SetSweepSubmittedAt(time.Now().UTC().Truncate(time.Microsecond)).ExecX(ctx)
		send(t, f, depositKey, treasury.EVMAddress, 7_250_000, settlementRef("sweep", f.payment.ID))

		require.True(t, f.settle(t).Done)
		require.Zero(t, f.balance(t, f.deposit.Hex()))
		require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()), "paid once")
		require.Equal(t, int64(7_250), f.balance(t, treasury.EVMAddress))
		require.Len(t, f.settlementEvents(t), 1)
	})
	t.Run("payout", func(t *testing.T) {
		ctx := context.Background()
		f := newSettlementFixture(t, func(u *ent.MerchantUpdateOne) { u.ClearSettlementAddress() })
		treasury := f.svc.cfg.Treasury
		// Swept and batched; the payout waits for an address.
		require.False(t, f.settle(t).Done)
		b := f.db.Ent.SettlementBatch.Query().OnlyX(ctx)
		// What the crashed run did: its write before the broadcast (the
		// destination fixed), and the broadcast; not the hash.
		f.db.Ent.SettlementBatch.UpdateOneID(b.ID).SetStatus("submitted").
			SetPayoutChain("base").SetPayoutAddress(f.payee.Hex()).ExecX(ctx)
		send(t, f, treasury.EVM, f.payee.Hex(), 7_242_750, batchPayoutRef(b.ID))

		require.True(t, f.settle(t).Done)
		require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()), "paid once")
		require.Equal(t, int64(7_250), f.balance(t, treasury.EVMAddress))
		b = f.db.Ent.SettlementBatch.GetX(ctx, b.ID)
		require.Equal(t, "completed", string(b.Status))
		require.NotEmpty(t, b.TxHash)
		require.Len(t, f.settlementEvents(t), 1)
	})
}

// Without a settlement address the deposit is swept and the payout waits,
// visibly, until the merchant sets one.
func TestSettlementWaitsForSettlementAddress(t *testing.T) {
	ctx := context.Background()
	f := newSettlementFixture(t, func(u *ent.MerchantUpdateOne) { u.ClearSettlementAddress() })
	res := f.settle(t)
	require.False(t, res.Done)
	require.Contains(t, res.Waiting, "settlement_address")
	p := f.reloadPayment(t)
	require.Equal(t, payment.SettlementStatusSubmitted, *p.SettlementStatus, "in a batch")
	b := f.db.Ent.SettlementBatch.Query().OnlyX(ctx)
	require.Contains(t, b.Error, "settlement_address")
	require.Zero(t, f.balance(t, f.deposit.Hex()), "swept while waiting")
	require.Empty(t, f.settlementEvents(t))

	keys, err := f.svc.DueSettlements(ctx, -time.Hour, 10)
	require.NoError(t, err)
	require.Equal(t, []SettlementKey{{MerchantID: f.merchant.ID, Chain: "base"}}, keys, "left for settle_pending")

	f.db.Ent.Merchant.UpdateOneID(f.merchant.ID).SetSettlementAddress(f.payee.Hex()).ExecX(ctx)
	require.True(t, f.settle(t).Done)
	require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()))
	require.Empty(t, f.db.Ent.SettlementBatch.GetX(ctx, b.ID).Error)
	require.Len(t, f.settlementEvents(t), 1)
	keys, err = f.svc.DueSettlements(ctx, -time.Hour, 10)
	require.NoError(t, err)
	require.Empty(t, keys)
}

func TestSettlementFiatPix(t *testing.T) {
	f := newSettlementFixture(t, func(u *ent.MerchantUpdateOne) {
		u.SetSettlementType(merchant.SettlementTypeFiatPix).ClearSettlementAddress()
	})
	sandbox := f.svc.cfg.Payouts[ModeTest].(*paysandbox.Pix)
	require.True(t, f.settle(t).Done)
	require.True(t, f.settle(t).Done)
	require.Equal(t, 1, sandbox.Payouts(), "one payout however often it runs")

	require.Zero(t, f.balance(t, f.deposit.Hex()), "swept to the treasury, which funds the fiat payout")
	require.Equal(t, int64(7_250_000), f.balance(t, f.svc.cfg.Treasury.EVMAddress))
	p := f.reloadPayment(t)
	require.Equal(t, payment.SettlementStatusCompleted, *p.SettlementStatus)
	require.Equal(t, "5.4321", p.SettlementFxRate)
	require.Equal(t, "BRL", p.SettlementFiatCurrency)
	// 7.24275 USD x 5.4321 = 39.343342... BRL, on the batch
	require.Equal(t, "39.34", f.db.Ent.SettlementBatch.Query().OnlyX(context.Background()).FiatAmount)
	require.Regexp(t, `^pix_sbx_[0-9a-f]{24}$`, p.SettlementReference)
	require.Empty(t, p.SettlementTxHash)

	evs := f.settlementEvents(t)
	require.Len(t, evs, 1)
	d := evs[0].Data
	require.Equal(t, "fiat_pix", d["settlement_type"])
	require.Equal(t, p.SettlementReference, d["payout_reference"])
	requireDec(t, "5.4321", d["fx_rate"])
	requireDec(t, "39.34", d["payout_amount"])
	require.Equal(t, "BRL", d["payout_currency"])
	requireDec(t, "7.24275", d["net_usd"])
	require.NotContains(t, d, "settlement_tx_hash")
}

// settlement_chain other than the paid chain pays out of the treasury's
// liquidity there.
func TestSettlementToAnotherChain(t *testing.T) {
	ctx := context.Background()
	f := newSettlementFixture(t, func(u *ent.MerchantUpdateOne) { u.SetSettlementChain("polygon") })
	treasury := f.svc.cfg.Treasury
	f.env.AddChain(chains.Polygon)
	pl := f.env.Ledger(chains.Polygon)
	cfg := f.svc.cfg
	cfg.Test = f.env.Test // base and polygon
	f.svc = newTestService(t, f.env, cfg)
	autoMine(t, f.env.EVM(chains.Polygon))

	// The treasury is empty on polygon: the payout waits for liquidity.
	res := f.settle(t)
	require.False(t, res.Done)
	require.Contains(t, res.Waiting, "short of USDC on polygon")
	require.Zero(t, f.balance(t, f.deposit.Hex()), "swept on base")

	f.env.Fund(t, chains.Polygon, treasury.EVMAddress, 100_000_000)
	require.True(t, f.settle(t).Done)
	got, err := pl.Balance(ctx, f.payee.Hex())
	require.NoError(t, err)
	require.Equal(t, int64(7_242_750), got.Int64())
	require.Zero(t, f.balance(t, f.payee.Hex()), "nothing paid on base")
	p := f.reloadPayment(t)
	require.Equal(t, "polygon", p.SettlementChain)
	require.Equal(t, "polygon", f.settlementEvents(t)[0].Data["settlement_chain"])
	require.Equal(t, int64(7_250_000), f.balance(t, treasury.EVMAddress), "base treasury keeps the gross")
}
