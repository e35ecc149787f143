package agentpay

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	solanago "github.com/gagliardetto/solana-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/internal/clock"
	"agentpay/internal/testenv"
)

// TestScanDepositsResumesFromSavedCursor drives the deposit scan the worker
// runs against a real devnet: a deposit to a session's derived address is
// seen, confirmed once, and a restarted service (same database, new
// watcher) neither reports it again nor misses what arrived meanwhile.
func TestScanDepositsResumesFromSavedCursor(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, Confirmations: map[chains.Name]uint64{chains.Base: 3}})
	db, v, chain := env.DB, env.Vault, env.EVM(chains.Base)
	// A new service is a restarted process: a new watcher on the same
	// database.
	newService := func() *Service { return newTestService(t, env, Config{}) }

	families := env.Families
	_, depositAddr, err := families[chains.FamilyEVM].DeriveKey(v.DepositSeed(), 7)
	require.NoError(t, err)
	merchant := db.Ent.Merchant.Create().SetName("Shop").SetEmail("shop@example.com").
		SetWebhookSecretEncrypted([]byte{1}).SaveX(ctx)
	session := db.Ent.CheckoutSession.Create().SetMerchantID(merchant.ID).SetExternalID("cs_test_1").
		SetLivemode(false).SetAmountUsd(decimal.RequireFromString("12.5")).SetCurrency("USD").
		SetStatus(checkoutsession.StatusDetecting).SetExpiresAt(time.Now().Add(30 * time.Minute).UTC()).SaveX(ctx)
	db.Ent.DepositAddress.Create().SetSessionID(session.ID).SetChain("base").SetChainFamily("evm").
		SetAddress(depositAddr).SetDerivationIndex(7).SaveX(ctx)

	svc := newService()
	res, err := svc.ScanDeposits(ctx, ModeTest, chains.Base)
	require.NoError(t, err)
	require.Empty(t, res.Events)

	_, unwatched, err := families[chains.FamilyEVM].NewKey()
	require.NoError(t, err)
	_, err = chain.Send(ctx, common.HexToAddress(unwatched), big.NewInt(5_000_000))
	require.NoError(t, err)
	txHash, err := chain.Send(ctx, common.HexToAddress(depositAddr), big.NewInt(12_500_000))
	require.NoError(t, err)

	res, err = svc.ScanDeposits(ctx, ModeTest, chains.Base)
	require.NoError(t, err)
	require.Len(t, res.Events, 1, "only the watched address is reported")
	seen := res.Events[0]
	require.Equal(t, chains.DepositSeen, seen.Kind)
	require.Equal(t, txHash.Hex(), seen.Deposit.TxHash)
	require.Equal(t, big.NewInt(12_500_000), seen.Deposit.Amount)
	normalize := families[chains.FamilyEVM].NormalizeAddress
	require.Equal(t, normalize(depositAddr), normalize(seen.Deposit.To))

	chain.Commit()
	// A restart: a new service, with a new watcher built from the saved cursor.
	svc = newService()
	chain.Commit()
	var kinds []chains.DepositEventKind
	for i := 0; i < 3; i++ {
		res, err = svc.ScanDeposits(ctx, ModeTest, chains.Base)
		require.NoError(t, err)
		for _, ev := range res.Events {
			require.NotEqual(t, chains.DepositSeen, ev.Kind, "a deposit is seen once, across restarts")
			kinds = append(kinds, ev.Kind)
		}
		chain.Commit()
	}
	require.Contains(t, kinds, chains.DepositFinal)
	final := 0
	for _, k := range kinds {
		if k == chains.DepositFinal {
			final++
		}
	}
	require.Equal(t, 1, final, "final is reported once")

	cursor, err := svc.loadCursor(ctx, ModeTest, chains.Base)
	require.NoError(t, err)
	require.Equal(t, res.Next, cursor.Next)
	require.Empty(t, cursor.Pending, "a final deposit is no longer pending")
}

// TestScanDepositsResumesFromSavedCursorSolana is the same on Solana, whose
// watcher follows the mint's transfers slot by slot: a deposit to a
// session's derived address is seen once, a transfer to an unwatched owner
// is not reported, and restarted services (new watchers from the cursor in
// chain_cursors) neither report the deposit seen again nor miss one made
// while none ran.
func TestScanDepositsResumesFromSavedCursorSolana(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Solana}, Confirmations: map[chains.Name]uint64{chains.Solana: 8}})
	db, v, sol := env.DB, env.Vault, env.Solana()
	newService := func() *Service { return newTestService(t, env, Config{}) }

	family := env.Families[chains.FamilySolana]
	_, depositAddr, err := family.DeriveKey(v.DepositSeed(), 7)
	require.NoError(t, err)
	merchant := db.Ent.Merchant.Create().SetName("Shop").SetEmail("shop@example.com").
		SetWebhookSecretEncrypted([]byte{1}).SaveX(ctx)
	session := db.Ent.CheckoutSession.Create().SetMerchantID(merchant.ID).SetExternalID("cs_test_sol").
		SetLivemode(false).SetAmountUsd(decimal.RequireFromString("12.5")).SetCurrency("USD").
		SetStatus(checkoutsession.StatusDetecting).SetExpiresAt(time.Now().Add(30 * time.Minute).UTC()).SaveX(ctx)
	db.Ent.DepositAddress.Create().SetSessionID(session.ID).SetChain("solana").SetChainFamily("solana").
		SetAddress(depositAddr).SetDerivationIndex(7).SaveX(ctx)

	svc := newService()
	res, err := svc.ScanDeposits(ctx, ModeTest, chains.Solana)
	require.NoError(t, err)
	require.Empty(t, res.Events)

	_, unwatched, err := family.NewKey()
	require.NoError(t, err)
	_, err = sol.Send(ctx, solanago.MustPublicKeyFromBase58(unwatched), 5_000_000)
	require.NoError(t, err)
	first, err := sol.Send(ctx, solanago.MustPublicKeyFromBase58(depositAddr), 5_000_000)
	require.NoError(t, err)

	seen := map[string]int{}
	final := map[string]int{}
	scan := func(svc *Service) {
		t.Helper()
		res, err := svc.ScanDeposits(ctx, ModeTest, chains.Solana)
		require.NoError(t, err)
		for _, ev := range res.Events {
			require.Equal(t, depositAddr, ev.Deposit.To, "only the watched address is reported")
			switch ev.Kind {
			case chains.DepositSeen:
				seen[ev.Deposit.TxHash]++
			case chains.DepositFinal:
				final[ev.Deposit.TxHash]++
			}
		}
	}
	for seen[first.String()] == 0 {
		scan(svc)
		time.Sleep(50 * time.Millisecond)
	}

	// Restarts, and a deposit made while no service runs.
	svc = newService()
	scan(svc)
	second, err := sol.Send(ctx, solanago.MustPublicKeyFromBase58(depositAddr), 7_500_000)
	require.NoError(t, err)
	svc = newService()
	for final[first.String()] == 0 || final[second.String()] == 0 {
		scan(svc)
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, map[string]int{first.String(): 1, second.String(): 1}, seen, "each deposit seen once, across restarts")
	require.Equal(t, map[string]int{first.String(): 1, second.String(): 1}, final)

	cursor, err := svc.loadCursor(ctx, ModeTest, chains.Solana)
	require.NoError(t, err)
	require.Empty(t, cursor.Pending, "final deposits are no longer pending")
	p, err := db.Ent.Payment.Query().Where(payment.SessionID(session.ID)).All(ctx)
	require.NoError(t, err)
	require.Len(t, p, 2)
}

// A customer can pay as soon as select answers, even before the worker has
// ever scanned the chain: the scan must still start before that payment.
func TestPaymentBeforeFirstScanIsFound(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, false)
	reg := f.merchant(t, "Shop", nil)
	m, err := f.db.Ent.Merchant.Get(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	sess := f.session(t, m, "3")
	d, err := f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "base", "USDC")
	require.NoError(t, err)
	_, err = f.evm.Send(ctx, common.HexToAddress(d.Address), big.NewInt(3_000_000))
	require.NoError(t, err)
	f.evm.Commit()

	_, err = f.svc.ScanDeposits(ctx, ModeTest, chains.Base)
	require.NoError(t, err)
	p, err := f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).Only(ctx)
	require.NoError(t, err, "the payment made before the first scan is recorded")
	require.Equal(t, int64(3_000_000), p.AmountToken)
}

// TestDepositAddressesAreWatchedUntilTheLateWindowEnds: a session's deposit
// addresses are watched while it is open and for LatePaymentWindow after it
// ended, whether confirmed, expired or cancelled (a late payment in the
// window is recorded as ever); after the window the scan no longer reads
// them, so what is paid to them then is not seen, while an open session's
// address stays watched however old.
func TestDepositAddressesAreWatchedUntilTheLateWindowEnds(t *testing.T) {
	ctx := context.Background()
	f := newPaymentFixture(t)
	clk := clock.NewStub(time.Now())
	svc := newTestService(t, f.env, Config{Clock: clk, LatePaymentWindow: time.Hour})
	f.svc = svc

	cancelled, cancelledAddr := f.open(t, "5")
	_, err := svc.CancelSession(ctx, &MerchantAuth{Merchant: f.merchant, Mode: ModeTest}, cancelled.ExternalID)
	require.NoError(t, err)
	expired, expiredAddr := f.open(t, "5")
	f.pastDeadline(t, expired)
	n, err := svc.ExpireSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	confirmed, confirmedAddr := f.open(t, "5")
	f.pay(t, confirmedAddr, 5_000_000)
	f.finalAll(t)
	require.Equal(t, checkoutsession.StatusConfirmed, f.reload(t, confirmed).Status)
	open, openAddr := f.open(t, "5")

	watched := func() []string {
		t.Helper()
		list, err := svc.watchedAddresses(ctx, ModeTest, chains.Base)
		require.NoError(t, err)
		return list
	}
	all := []string{cancelledAddr.Hex(), expiredAddr.Hex(), confirmedAddr.Hex(), openAddr.Hex()}
	require.ElementsMatch(t, all, watched(), "ended sessions are watched until their end is recorded")
	marked, err := svc.EndDepositWatches(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, marked)
	marked, err = svc.EndDepositWatches(ctx)
	require.NoError(t, err)
	require.Zero(t, marked, "idempotent")
	require.ElementsMatch(t, all, watched(), "within the late window")

	// A late payment within the window is recorded, as ever.
	f.pay(t, cancelledAddr, 1_000_000)
	late, err := f.db.Ent.Payment.Query().Where(payment.SessionID(cancelled.ID)).Only(ctx)
	require.NoError(t, err)
	require.True(t, late.Late)

	f.finalAll(t)

	// Swept within the window (the confirmed session's payment by its
	// settlement, which then waits for a settlement address): still
	// watched until the window ends.
	stopMine := autoMine(t, f.evm)
	counted, err := f.db.Ent.Payment.Query().Where(payment.SessionID(confirmed.ID)).Only(ctx)
	require.NoError(t, err)
	_, err = svc.settlePaymentWith(ctx, counted.ID, SettlementOptions{Wait: 10 * time.Second})
	require.NoError(t, err)
	counted, err = f.db.Ent.Payment.Get(ctx, counted.ID)
	require.NoError(t, err)
	require.NotNil(t, counted.SweptAt)
	da, err := f.db.Ent.DepositAddress.Get(ctx, *counted.DepositAddressID)
	require.NoError(t, err)
	require.True(t, da.Swept)
	require.Equal(t, counted.SweepTxHash, da.SweepTxHash)
	require.ElementsMatch(t, all, watched(), "swept, within the late window")

	clk.Set(clk.Now().Add(time.Hour + time.Second))
	require.ElementsMatch(t, []string{openAddr.Hex(), cancelledAddr.Hex()}, watched(),
		"past the window: the open session's address, and the one holding a late payment not swept yet")
	res, err := svc.sweepHeldWith(ctx, late.ID, SettlementOptions{Wait: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, res.Done, res.Waiting)
	stopMine()
	require.Equal(t, []string{openAddr.Hex()}, watched(), "only the open session's address, past the window and swept")
	f.pay(t, expiredAddr, 1_000_000)
	f.pay(t, openAddr, 1_000_000)
	paid, err := f.db.Ent.Payment.Query().Where(payment.SessionID(expired.ID)).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, paid, "no longer watched")
	paid, err = f.db.Ent.Payment.Query().Where(payment.SessionID(open.ID)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, paid, "the open session's address is still watched")
}

// pollHook is a watcher that runs before once, then polls as the real one.
type pollHook struct {
	chains.Watcher
	before func()
}

func (p *pollHook) Poll(ctx context.Context, watched chains.Watchlist) ([]chains.DepositEvent, error) {
	if p.before != nil {
		p.before()
		p.before = nil
	}
	return p.Watcher.Poll(ctx, watched)
}

// TestAddressIssuedDuringAScanIsWatched: an address issued and paid while a
// scan is under way (after the scan started, before its watcher read the
// chain's head: a slow RPC call is enough) is found. The watched addresses
// were read when the scan started, so the poll scanned the payment's block
// without the address and the cursor moved past it: the payment was never
// recorded.
func TestAddressIssuedDuringAScanIsWatched(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}})
	db, chain := env.DB, env.EVM(chains.Base)
	cfg := Config{}
	env.Fill(&cfg)
	var hook *pollHook
	base := cfg.Test[chains.Base]
	newWatcher := base.NewWatcher
	base.NewWatcher = func(ctx context.Context, st chains.WatcherState) (chains.Watcher, error) {
		w, err := newWatcher(ctx, st)
		if err != nil {
			return nil, err
		}
		hook = &pollHook{Watcher: w}
		return hook, nil
	}
	cfg.Test[chains.Base] = base
	svc, err := NewService(cfg)
	require.NoError(t, err)

	merchant := db.Ent.Merchant.Create().SetName("Shop").SetEmail("shop@example.com").
		SetWebhookSecretEncrypted([]byte{1}).SaveX(ctx)
	session := db.Ent.CheckoutSession.Create().SetMerchantID(merchant.ID).SetExternalID("cs_test_race").
		SetLivemode(false).SetAmountUsd(decimal.RequireFromString("2")).SetCurrency("USD").
		SetExpiresAt(time.Now().Add(30 * time.Minute).UTC()).SaveX(ctx)
	_, err = svc.ScanDeposits(ctx, ModeTest, chains.Base)
	require.NoError(t, err)

	_, addr, err := env.Families[chains.FamilyEVM].DeriveKey(env.Vault.DepositSeed(), 11)
	require.NoError(t, err)
	hook.before = func() {
		db.Ent.DepositAddress.Create().SetSessionID(session.ID).SetChain("base").SetChainFamily("evm").
			SetAddress(addr).SetDerivationIndex(11).SaveX(ctx)
		_, err := chain.Send(ctx, common.HexToAddress(addr), big.NewInt(2_000_000))
		require.NoError(t, err)
	}
	var seen []chains.DepositEvent
	for range 3 {
		res, err := svc.ScanDeposits(ctx, ModeTest, chains.Base)
		require.NoError(t, err)
		seen = append(seen, res.Events...)
		chain.Commit()
	}
	require.NotEmpty(t, seen, "the payment to the address issued during the scan is seen")
	require.Equal(t, chains.DepositSeen, seen[0].Kind)
	require.Equal(t, big.NewInt(2_000_000), seen[0].Deposit.Amount)
	n, err := db.Ent.Payment.Query().Where(payment.SessionID(session.ID)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "recorded once")
}
