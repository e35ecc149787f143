package agentpay

import (
	"context"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
	solanago "github.com/gagliardetto/solana-go"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/payment"
	"agentpay/internal/store"
	"agentpay/internal/testenv"
	"agentpay/internal/vault"
	"agentpay/payout"
	paysandbox "agentpay/payout/sandbox"
)

// checkoutFixture is a service whose test mode has a real base devnet (and
// optionally a real Solana devnet), blocks only on Commit, 2 confirmations
// required on base; live mode has no chains.
type checkoutFixture struct {
	env   *testenv.Env
	svc   *Service
	db    *store.DB
	vault *vault.Vault
	evm   *devnet.EVM
	sol   *devnet.Solana
}

func newCheckoutFixture(t *testing.T, withSolana bool) *checkoutFixture {
	t.Helper()
	return startCheckoutFixture(t, withSolana, false)
}

// startCheckoutFixture is newCheckoutFixture whose service enqueues jobs
// (an insert-only River client) when jobs is set.
func startCheckoutFixture(t *testing.T, withSolana, jobs bool) *checkoutFixture {
	t.Helper()
	opts := testenv.Options{
		Chains:        []chains.Name{chains.Base},
		Confirmations: map[chains.Name]uint64{chains.Base: 2, chains.Polygon: 2, chains.Solana: 8},
		Jobs:          jobs,
	}
	if withSolana {
		opts.Chains = append(opts.Chains, chains.Solana)
	}
	env := testenv.New(t, opts)
	f := &checkoutFixture{env: env, db: env.DB, vault: env.Vault, evm: env.EVM(chains.Base)}
	if withSolana {
		f.sol = env.Solana()
	}
	f.svc = newTestService(t, env, Config{
		Payouts: map[Mode]payout.Provider{ModeTest: paysandbox.New(paysandbox.DefaultRate)},
	})
	return f
}

// merchant registers a merchant through the service (so it has real keys).
func (f *checkoutFixture) merchant(t *testing.T, name string, accepted []TokenRef) *MerchantRegistration {
	t.Helper()
	in := MerchantInput{Name: &name, Email: checkoutPtr("shop@example.com")}
	if accepted != nil {
		in.AcceptedTokens = &accepted
	}
	reg, err := f.svc.RegisterMerchant(context.Background(), in)
	require.NoError(t, err)
	return reg
}

type checkoutSessionOpt func(*ent.CheckoutSessionCreate)

// session inserts a test-mode session directly (the checkout page API only
// reads sessions; creating them is the sessions API's business).
func (f *checkoutFixture) session(t *testing.T, m *ent.Merchant, amount string, opts ...checkoutSessionOpt) *ent.CheckoutSession {
	t.Helper()
	c := f.db.Ent.CheckoutSession.Create().
		SetMerchantID(m.ID).
		SetExternalID("cs_" + strings.ReplaceAll(uuid.NewString(), "-", "")).
		SetLivemode(false).
		SetAmountUsd(decimal.RequireFromString(amount)).
		SetCurrency("USD").
		SetDescription("Order 42").
		SetExpiresAt(time.Now().Add(30 * time.Minute).UTC())
	for _, o := range opts {
		o(c)
	}
	return c.SaveX(context.Background())
}

func checkoutPtr[T any](v T) *T { return &v }

func TestSelectPaymentMethodOnEachFamily(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, true)
	reg := f.merchant(t, "Shop & Co", nil)
	sess := f.session(t, reg.Merchant, "12.5")

	// base: an EIP-681 transfer request for the exact amount.
	d, err := f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "base", "USDC")
	require.NoError(t, err)
	require.Equal(t, chains.Base, d.Chain)
	require.Equal(t, checkoutsession.StatusDetecting, d.Status)
	require.Equal(t, "12.5", d.AmountToken.String())
	require.Equal(t, big.NewInt(12_500_000), d.AmountUnits)
	require.Equal(t, f.evm.ChainID, d.ChainID)
	require.Equal(t, f.evm.USDC.Hex(), d.TokenAddress)
	require.Equal(t, fmt.Sprintf("ethereum:%s@%d/transfer?address=%s&uint256=12500000", f.evm.USDC.Hex(), f.evm.ChainID, d.Address), d.PaymentURI)
	baseAddr := d.Address
	requireDerives(t, f, sess.ID, chains.Base, baseAddr)

	got := f.db.Ent.CheckoutSession.GetX(ctx, sess.ID)
	require.Equal(t, checkoutsession.StatusDetecting, got.Status)
	require.Equal(t, "base", got.Chain)
	require.Equal(t, "USDC", got.Token)

	// Selecting the same chain again (a page reload) answers the same address.
	again, err := f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "base", "USDC")
	require.NoError(t, err)
	require.Equal(t, baseAddr, again.Address)

	// Another chain issues that chain's own address: Solana Pay this time.
	d, err = f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "solana", "USDC")
	require.NoError(t, err)
	require.Equal(t, chains.Solana, d.Chain)
	require.Zero(t, d.ChainID)
	require.NotEqual(t, baseAddr, d.Address)
	require.Equal(t, "solana:"+d.Address+"?amount=12.5&spl-token="+f.sol.Mint.String()+"&label=Shop%20%26%20Co&message=Order%2042", d.PaymentURI)
	requireDerives(t, f, sess.ID, chains.Solana, d.Address)
	got = f.db.Ent.CheckoutSession.GetX(ctx, sess.ID)
	require.Equal(t, "solana", got.Chain)
	require.Equal(t, checkoutsession.StatusDetecting, got.Status)

	// Back to base: the session's base address again, not a new index.
	d, err = f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "base", "USDC")
	require.NoError(t, err)
	require.Equal(t, baseAddr, d.Address)
	require.Equal(t, 2, f.db.Ent.DepositAddress.Query().Where(depositaddress.SessionID(sess.ID)).CountX(ctx))

	// The page shows the selection.
	page, err := f.svc.CheckoutPage(ctx, sess.ExternalID, "")
	require.NoError(t, err)
	require.NotNil(t, page.Deposit)
	require.Equal(t, baseAddr, page.Deposit.Address)
	require.Equal(t, d.PaymentURI, page.Deposit.PaymentURI)
}

// requireDerives checks the stored deposit address re-derives, from its
// stored family and index, to a key whose address is the one answered.
func requireDerives(t *testing.T, f *checkoutFixture, sessionID uuid.UUID, chain chains.Name, address string) {
	t.Helper()
	da := f.db.Ent.DepositAddress.Query().
		Where(depositaddress.SessionID(sessionID), depositaddress.Chain(string(chain))).
		OnlyX(context.Background())
	require.Equal(t, address, da.Address)
	require.Equal(t, string(chain.Family()), da.ChainFamily)
	key, err := f.svc.DepositAddressKey(da)
	require.NoError(t, err)
	fromKey, err := f.svc.wallets(chain).AddressOf(key)
	require.NoError(t, err)
	require.Equal(t, address, fromKey, "the stored index re-derives the key of the address")
}

func TestSelectPaymentMethodRefusals(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, false)
	shop := f.merchant(t, "Shop", nil)
	baseOnly := f.merchant(t, "Base Only", []TokenRef{{Chain: "base", Token: "USDC"}})
	other := f.merchant(t, "Other", nil)
	gone := f.merchant(t, "Gone", nil)
	_, err := f.svc.DeactivateMerchant(ctx, gone.Merchant.ID)
	require.NoError(t, err)

	withStatus := func(st checkoutsession.Status) checkoutSessionOpt {
		return func(c *ent.CheckoutSessionCreate) { c.SetStatus(st) }
	}
	expired := func(c *ent.CheckoutSessionCreate) { c.SetExpiresAt(time.Now().Add(-time.Second).UTC()) }
	paid := f.session(t, shop.Merchant, "10", withStatus(checkoutsession.StatusDetecting))
	f.db.Ent.Payment.Create().SetSessionID(paid.ID).SetExternalID("pay_" + uuid.NewString()).SetChain("base").
		SetTxHash("0xabc").SetLogIndex(0).SetFromAddress("0x1").SetToAddress("0x2").SetAmountToken(5_000_000).
		SetAmountUsd(decimal.RequireFromString("5")).SetBlockNumber(1).SaveX(ctx)

	tests := []struct {
		name       string
		session    *ent.CheckoutSession
		externalID string
		publicKey  string
		chain      string
		token      string
		want       error // sentinel, or nil for a validation error
		field      string
		detail     string
	}{
		{name: "chain missing", session: f.session(t, shop.Merchant, "10"), token: "USDC", field: "chain", detail: "is required"},
		{name: "unknown chain", session: f.session(t, shop.Merchant, "10"), chain: "bitcoin", token: "USDC", field: "chain", detail: `"bitcoin" is not supported`},
		{name: "chain in capitals", session: f.session(t, shop.Merchant, "10"), chain: "Base", token: "USDC", field: "chain", detail: "is not supported"},
		{name: "token missing", session: f.session(t, shop.Merchant, "10"), chain: "base", field: "token", detail: "is required"},
		{name: "other token", session: f.session(t, shop.Merchant, "10"), chain: "base", token: "USDT", field: "token", detail: `"USDT" is not supported`},
		{name: "not accepted by the merchant", session: f.session(t, baseOnly.Merchant, "10"), chain: "polygon", token: "USDC", field: "chain", detail: "polygon USDC is not accepted by this merchant"},
		{name: "not configured in test mode", session: f.session(t, shop.Merchant, "10"), chain: "arbitrum", token: "USDC", field: "chain", detail: "arbitrum is not available in test mode"},
		{name: "expired by the clock", session: f.session(t, shop.Merchant, "10", expired), chain: "base", token: "USDC", want: ErrConflict, detail: "expired at"},
		{name: "expired", session: f.session(t, shop.Merchant, "10", withStatus(checkoutsession.StatusExpired)), chain: "base", token: "USDC", want: ErrConflict, detail: "is expired"},
		{name: "cancelled", session: f.session(t, shop.Merchant, "10", withStatus(checkoutsession.StatusCancelled)), chain: "base", token: "USDC", want: ErrConflict, detail: "is cancelled"},
		{name: "confirming", session: f.session(t, shop.Merchant, "10", withStatus(checkoutsession.StatusConfirming)), chain: "base", token: "USDC", want: ErrConflict, detail: "already has a payment"},
		{name: "confirmed", session: f.session(t, shop.Merchant, "10", withStatus(checkoutsession.StatusConfirmed)), chain: "base", token: "USDC", want: ErrConflict, detail: "already has a payment"},
		{name: "payment seen while detecting", session: paid, chain: "base", token: "USDC", want: ErrConflict, detail: "already has a payment"},
		{name: "unknown session", externalID: "cs_nope", chain: "base", token: "USDC", want: ErrNotFound, detail: `"cs_nope"`},
		{name: "deactivated merchant", session: f.session(t, gone.Merchant, "10"), chain: "base", token: "USDC", want: ErrForbidden, detail: "deactivated"},
		{name: "another merchant's public key", session: f.session(t, shop.Merchant, "10"), publicKey: other.Keys.TestPublicKey, chain: "base", token: "USDC", want: ErrUnauthorized, detail: "does not belong"},
		{name: "live key on a test session", session: f.session(t, shop.Merchant, "10"), publicKey: shop.Keys.LivePublicKey, chain: "base", token: "USDC", want: ErrUnauthorized, detail: "does not belong"},
		{name: "malformed public key", session: f.session(t, shop.Merchant, "10"), publicKey: "pk_test_nope", chain: "base", token: "USDC", want: ErrUnauthorized},
		{name: "secret key sent as public key", session: f.session(t, shop.Merchant, "10"), publicKey: shop.Keys.TestSecretKey, chain: "base", token: "USDC", want: ErrUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ext := tt.externalID
			if tt.session != nil {
				ext = tt.session.ExternalID
			}
			before := f.db.Ent.DepositAddress.Query().CountX(ctx)
			_, err := f.svc.SelectPaymentMethod(ctx, ext, tt.publicKey, tt.chain, tt.token)
			require.Error(t, err)
			if tt.want == nil {
				var verr *ValidationError
				require.ErrorAs(t, err, &verr)
				require.Equal(t, tt.field, verr.Field)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
			require.Contains(t, err.Error(), tt.detail)
			require.Equal(t, before, f.db.Ent.DepositAddress.Query().CountX(ctx), "a refusal issues no address")
			if tt.session != nil {
				got := f.db.Ent.CheckoutSession.GetX(ctx, tt.session.ID)
				require.Equal(t, tt.session.Status, got.Status, "a refusal changes no status")
				require.Empty(t, got.Chain)
			}
		})
	}

	t.Run("the merchant's own test public key is accepted", func(t *testing.T) {
		sess := f.session(t, shop.Merchant, "10")
		_, err := f.svc.SelectPaymentMethod(ctx, sess.ExternalID, shop.Keys.TestPublicKey, "base", "USDC")
		require.NoError(t, err)
	})
}

// TestConcurrentSelectsNeverShareAnIndex races selects on many sessions (and
// repeated selects on the same sessions): every session gets one address
// per chain, and no derivation index or address is ever issued twice.
func TestConcurrentSelectsNeverShareAnIndex(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, true)
	reg := f.merchant(t, "Shop", nil)
	const n = 24
	sessions := make([]*ent.CheckoutSession, n)
	for i := range sessions {
		sessions[i] = f.session(t, reg.Merchant, "1.23")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for i, sess := range sessions {
		for _, chain := range []string{"base", "solana"} {
			for range 2 { // each twice: a double click
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", chain, "USDC")
					if err != nil {
						err = fmt.Errorf("session %d %s: %w", i, chain, err)
					}
					errs <- err
				}()
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	all := f.db.Ent.DepositAddress.Query().AllX(ctx)
	require.Len(t, all, 2*n, "one address per session and chain")
	indexes := map[string]bool{}
	addresses := map[string]bool{}
	perSession := map[string]int{}
	for _, da := range all {
		k := fmt.Sprintf("%s/%d", da.ChainFamily, da.DerivationIndex)
		require.False(t, indexes[k], "index %s issued twice", k)
		indexes[k] = true
		require.False(t, addresses[da.Address], "address %s issued twice", da.Address)
		addresses[da.Address] = true
		perSession[da.SessionID.String()+da.Chain]++
		_, addr, err := f.svc.deriveDepositKey(chains.Family(da.ChainFamily), da.DerivationIndex)
		require.NoError(t, err)
		require.Equal(t, da.Address, addr)
	}
	for k, c := range perSession {
		require.Equal(t, 1, c, k)
	}
	// Indexes are dense per family: 0..n-1.
	for _, fam := range []chains.Family{chains.FamilyEVM, chains.FamilySolana} {
		for i := range n {
			require.True(t, indexes[fmt.Sprintf("%s/%d", fam, i)], "%s index %d", fam, i)
		}
	}
}

// TestPaymentToEIP681RequestIsScanned pays exactly what the EIP-681 URI asks,
// to the address it names, from a devnet account: the deposit scan finds it.
func TestPaymentToEIP681RequestIsScanned(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, false)
	reg := f.merchant(t, "Shop", nil)
	sess := f.session(t, reg.Merchant, "7.25")

	_, err := f.svc.ScanDeposits(ctx, ModeTest, chains.Base) // the watcher starts at the head
	require.NoError(t, err)
	d, err := f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "base", "USDC")
	require.NoError(t, err)

	// Read the request back from the URI, as a wallet would.
	rest, ok := strings.CutPrefix(d.PaymentURI, "ethereum:")
	require.True(t, ok)
	target, query, ok := strings.Cut(rest, "/transfer?")
	require.True(t, ok)
	token, chainID, ok := strings.Cut(target, "@")
	require.True(t, ok)
	require.Equal(t, f.evm.USDC.Hex(), token)
	require.Equal(t, fmt.Sprint(f.evm.ChainID), chainID)
	q, err := url.ParseQuery(query)
	require.NoError(t, err)
	amount, ok := new(big.Int).SetString(q.Get("uint256"), 10)
	require.True(t, ok)

	txHash, err := f.evm.Send(ctx, common.HexToAddress(q.Get("address")), amount)
	require.NoError(t, err)
	res, err := f.svc.ScanDeposits(ctx, ModeTest, chains.Base)
	require.NoError(t, err)
	require.Len(t, res.Events, 1)
	ev := res.Events[0]
	require.Equal(t, chains.DepositSeen, ev.Kind)
	require.Equal(t, txHash.Hex(), ev.Deposit.TxHash)
	require.Equal(t, big.NewInt(7_250_000), ev.Deposit.Amount)
	base := f.svc.wallets(chains.Base)
	require.Equal(t, base.NormalizeAddress(d.Address), base.NormalizeAddress(ev.Deposit.To))
}

// TestPaymentToSolanaPayRequestIsScanned pays what the Solana Pay URI asks
// (amount in user units, the mint, the recipient wallet) from the devnet
// payer: the deposit scan finds it.
func TestPaymentToSolanaPayRequestIsScanned(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, true)
	reg := f.merchant(t, "Shop", nil)
	sess := f.session(t, reg.Merchant, "3.000001")

	_, err := f.svc.ScanDeposits(ctx, ModeTest, chains.Solana)
	require.NoError(t, err)
	d, err := f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "solana", "USDC")
	require.NoError(t, err)

	u, err := url.Parse(d.PaymentURI)
	require.NoError(t, err)
	require.Equal(t, "solana", u.Scheme)
	require.Equal(t, f.sol.Mint.String(), u.Query().Get("spl-token"))
	amount, err := decimal.NewFromString(u.Query().Get("amount"))
	require.NoError(t, err)
	units, err := ToBaseUnits("amount", amount, 6)
	require.NoError(t, err)
	require.Equal(t, int64(3_000_001), units.Int64())

	sig, err := f.sol.Send(ctx, solanago.MustPublicKeyFromBase58(u.Opaque), units.Uint64())
	require.NoError(t, err)
	var seen *chains.DepositEvent
	require.Eventually(t, func() bool {
		res, err := f.svc.ScanDeposits(ctx, ModeTest, chains.Solana)
		require.NoError(t, err)
		for _, ev := range res.Events {
			if ev.Kind == chains.DepositSeen {
				seen = &ev
			}
		}
		return seen != nil
	}, 15*time.Second, 100*time.Millisecond)
	require.Equal(t, sig.String(), seen.Deposit.TxHash)
	require.Equal(t, d.Address, seen.Deposit.To)
	require.Equal(t, units, seen.Deposit.Amount)
}

func TestCheckoutStatus(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, false)
	reg := f.merchant(t, "Shop", nil)
	sess := f.session(t, reg.Merchant, "10")

	st, err := f.svc.CheckoutStatus(ctx, sess.ExternalID, "")
	require.NoError(t, err)
	require.Equal(t, CheckoutStatus{Status: checkoutsession.StatusPending, AmountPaid: st.AmountPaid, Amount: st.Amount,
		Progress: PaymentProgress{State: "pending", Waiting: true}}, *st)
	require.True(t, st.AmountPaid.IsZero())
	require.Equal(t, "10", st.Amount.String(), "the session's amount, read with its status")

	_, err = f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "base", "USDC")
	require.NoError(t, err)
	addPayment := func(units int64, confs int, status payment.Status) {
		f.db.Ent.Payment.Create().SetSessionID(sess.ID).SetExternalID("pay_" + uuid.NewString()).SetChain("base").
			SetTxHash("0x" + uuid.NewString()).SetLogIndex(0).SetFromAddress("0x1").SetToAddress("0x2").
			SetAmountToken(units).SetAmountUsd(decimal.New(units, -6)).SetBlockNumber(1).
			SetConfirmations(confs).SetStatus(status).SaveX(ctx)
	}
	addPayment(4_000_001, 5, payment.StatusConfirmed)
	addPayment(2_500_000, 1, payment.StatusConfirming)
	addPayment(9_000_000, 0, payment.StatusFailed) // dropped by a reorg: not paid

	st, err = f.svc.CheckoutStatus(ctx, sess.ExternalID, reg.Keys.TestPublicKey)
	require.NoError(t, err)
	require.Equal(t, checkoutsession.StatusDetecting, st.Status)
	require.Equal(t, "6.500001", st.AmountPaid.String())
	require.Equal(t, "base", st.Chain)
	require.Equal(t, "USDC", st.Token)
	require.Equal(t, uint64(1), st.Confirmations, "the least confirmed payment")
	require.Equal(t, PageStateUnderpaid, st.Progress.State)
	require.Equal(t, "3.499999", st.Progress.Due.String(), "10 less the 6.500001 paid")

	_, err = f.svc.CheckoutStatus(ctx, "cs_nope", "")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = f.svc.CheckoutStatus(ctx, sess.ExternalID, reg.Keys.LivePublicKey)
	require.ErrorIs(t, err, ErrUnauthorized)
}

func TestCheckoutPage(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, false)
	name, color := "Shop", "#112233"
	reg, err := f.svc.RegisterMerchant(ctx, MerchantInput{
		Name: &name, Email: checkoutPtr("shop@example.com"), BrandColor: &color,
		SuccessURL: checkoutPtr("https://shop.example/thanks"), CancelURL: checkoutPtr("https://shop.example/cart"),
		AcceptedTokens: &[]TokenRef{{Chain: "polygon", Token: "USDC"}, {Chain: "base", Token: "USDC"}},
	})
	require.NoError(t, err)

	plain := f.session(t, reg.Merchant, "10")
	page, err := f.svc.CheckoutPage(ctx, plain.ExternalID, "")
	require.NoError(t, err)
	require.Equal(t, "Shop", page.Merchant.Name)
	require.Equal(t, "#112233", page.Merchant.BrandColor)
	require.Equal(t, ModeTest, page.Mode)
	require.Equal(t, "https://shop.example/thanks", page.SuccessURL)
	require.Equal(t, "https://shop.example/cart", page.CancelURL)
	require.Nil(t, page.Deposit)
	// polygon is accepted but not configured in test mode: not offered.
	require.Equal(t, []PaymentOption{{Chain: chains.Base, Token: "USDC", TokenAddress: f.evm.USDC.Hex(), Decimals: 6}}, page.Options)

	override := f.session(t, reg.Merchant, "10", func(c *ent.CheckoutSessionCreate) {
		c.SetSuccessURL("https://shop.example/order/1/ok").SetCancelURL("https://shop.example/order/1")
	})
	page, err = f.svc.CheckoutPage(ctx, override.ExternalID, reg.Keys.TestPublicKey)
	require.NoError(t, err)
	require.Equal(t, "https://shop.example/order/1/ok", page.SuccessURL)
	require.Equal(t, "https://shop.example/order/1", page.CancelURL)

	_, err = f.svc.CheckoutPage(ctx, "cs_nope", "")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = f.svc.CheckoutPage(ctx, plain.ExternalID, reg.Keys.LivePublicKey)
	require.ErrorIs(t, err, ErrUnauthorized)
}

// TestPaymentText: wallet text is cut on a character boundary to at most
// the limit, an ellipsis marking the cut.
func TestPaymentText(t *testing.T) {
	tests := []struct {
		name, in string
		limit    int
		want     string
	}{
		{"short", "Acme Coffee", 16, "Acme Coffee"},
		{"exactly the limit", "0123456789abcdef", 16, "0123456789abcdef"},
		{"cut", "0123456789abcdefg", 16, "0123456789abc…"},
		{"no split character", "ééééééééé", 16, "éééééé…"},
		{"emoji", "😀😀😀😀😀", 16, "😀😀😀…"},
		{"space before the cut", "Acme Coffee Roasters", 15, "Acme Coffee…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := paymentText(tt.in, tt.limit)
			require.Equal(t, tt.want, got)
			require.LessOrEqual(t, len(got), tt.limit)
			require.True(t, utf8.ValidString(got))
		})
	}
}
