package agentpay

import (
	"context"
	"crypto/ecdsa"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/relay"
	"agentpay/ent/transfer"
	"agentpay/internal/testenv"
)

// gasNonce is how many transactions the treasury's gas wallet on base has
// sent or pooled: each relay (and each leg of a send) is one, paid for
// whether it moves the value or reverts.
func (e *agentCheckoutEnv) gasNonce(t *testing.T) uint64 {
	t.Helper()
	gas := e.env.Ledger(chains.Base).(interface{ GasAddress() string }).GasAddress()
	require.NotEmpty(t, gas)
	n, err := e.env.EVM(chains.Base).Client().PendingNonceAt(context.Background(), common.HexToAddress(gas))
	require.NoError(t, err)
	return n
}

// relaysOf are the payer's relay rows on base in test mode.
func (e *agentCheckoutEnv) relaysOf(t *testing.T, payer string) []*ent.Relay {
	t.Helper()
	return e.db.Ent.Relay.Query().Where(relay.Payer(strings.ToLower(payer)), relay.Chain("base"), relay.Livemode(false)).
		Order(ent.Asc(relay.FieldCreatedAt)).AllX(context.Background())
}

// TestConcurrentRelaysOfOnePayer: a payer whose balance covers one session
// signs an authorization for each of five sessions and submits them all at
// once. Each alone passes the token's own checks (the balance covers it);
// together only one is relayed: the others are refused before any gas is
// spent, their sessions untouched. Without the in-flight count each was
// broadcast and all but one reverted at the treasury's cost.
func TestConcurrentRelaysOfOnePayer(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	payer := e.relayPayer(t, 2_500_000)
	d := e.tokenDomain(t)
	const n = 5
	sessions := make([]*ent.CheckoutSession, n)
	auths := make([]TransferAuthorization, n)
	now := time.Now().Unix()
	for i := range sessions {
		sessions[i] = e.session(t, "2.50", false)
		auths[i] = signTransferAuthorization(t, payer.key, d, e.depositAddress(t, sessions[i]), 2_500_000, now-600, now+3600)
		sessions[i] = e.reloadSession(t, sessions[i]) // detecting on base, as the page's selection left it
		// Each one alone is a payment the token would make.
		require.NoError(t, e.svc.VerifyAuthorizedPayment(ctx, AuthorizedPaymentRequest{ExternalID: sessions[i].ExternalID, Chain: "base", Authorization: auths[i]}))
	}
	nonceBefore := e.gasNonce(t)

	results := make([]*AuthorizedPayment, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{
				ExternalID: sessions[i].ExternalID, Chain: "base", Authorization: auths[i], ClientIP: "203.0.113.9"})
		}()
	}
	close(start)
	wg.Wait()

	require.Equal(t, nonceBefore+1, e.gasNonce(t), "the treasury paid gas for one relay only")
	paid := -1
	for i := range sessions {
		if errs[i] == nil {
			require.Equal(t, -1, paid, "a second authorization was relayed: %v", results[i])
			paid = i
			require.Equal(t, "detected", results[i].Status)
			continue
		}
		// Refused for the balance: by the count of relays in flight
		// ("2.50 USDC needed, available: 0.00 USDC of 0x… on base (its
		// authorizations being relayed count as spent)"), or by the
		// token's own check when the paid one was already included.
		require.ErrorIs(t, errs[i], ErrInsufficientFunds)
	}
	require.NotEqual(t, -1, paid, "one authorization is relayed: refusing all is not safety")
	for i, sess := range sessions {
		if i != paid {
			require.Equal(t, sess.UpdatedAt, e.reloadSession(t, sess).UpdatedAt, "a refused relay leaves its session as it was")
		}
	}
	rows := e.relaysOf(t, payer.addr)
	require.Len(t, rows, 1)
	require.Equal(t, relay.StatusSucceeded, rows[0].Status)
	require.Equal(t, results[paid].TxHash, rows[0].TxHash)
	requireDecimal(t, "0", e.onChain(t, chains.Base, payer.addr))

	// Funded again, the payer's next authorization goes: the relay that
	// succeeded no longer counts, its debit is in the balance.
	e.env.Fund(t, chains.Base, payer.addr, 2_500_000)
	next := (paid + 1) % n
	res, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: sessions[next].ExternalID, Chain: "base", Authorization: auths[next]})
	require.NoError(t, err)
	require.Equal(t, "detected", res.Status)
	require.Equal(t, nonceBefore+2, e.gasNonce(t))
	// The relays' per-session locks went with their relays: a process
	// relaying for many sessions keeps none of theirs.
	require.Zero(t, e.svc.sessionRelays.Len(), "relay locks of sessions no longer being relayed")
}

// TestRelayInFlightCountsAgainstTheBalance: a relay recorded and not yet
// included holds the payer's balance (verify says so too) until its
// outcome is known or it expires (RelayInFlightFor).
func TestRelayInFlightCountsAgainstTheBalance(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnvWith(t, testenv.Options{Clock: time.Now()})
	payer := e.relayPayer(t, 3_000_000)
	first, second := e.session(t, "2.50", false), e.session(t, "2.50", false)
	d := e.tokenDomain(t)
	now := time.Now().Unix()
	auth := signTransferAuthorization(t, payer.key, d, e.depositAddress(t, second), 2_500_000, now-600, now+3600)
	second = e.reloadSession(t, second)
	// A relay of the payer in flight, as a crash between its record and
	// its broadcast leaves it.
	e.db.Ent.Relay.Create().SetLivemode(false).SetChain("base").SetPayer(strings.ToLower(payer.addr)).SetNonce("0x01").SetValue(2_500_000).
		SetMerchantID(e.merchant.ID).SetSessionID(first.ID).SetInFlightUntil(e.env.Clock.Now().Add(RelayInFlightFor).UTC()).
		ExecX(ctx)
	nonceBefore := e.gasNonce(t)
	req := AuthorizedPaymentRequest{ExternalID: second.ExternalID, Chain: "base", Authorization: auth}
	err := e.svc.VerifyAuthorizedPayment(ctx, req)
	require.ErrorIs(t, err, ErrInsufficientFunds)
	require.ErrorContains(t, err, "2.50 USDC needed, available: 0.50 USDC of "+strings.ToLower(payer.addr)+" on base (its authorizations being relayed count as spent)")
	_, err = e.svc.PayWithAuthorization(ctx, req)
	require.ErrorIs(t, err, ErrInsufficientFunds)
	require.Equal(t, nonceBefore, e.gasNonce(t))
	require.Equal(t, second.UpdatedAt, e.reloadSession(t, second).UpdatedAt, "the session is left as it was")

	e.env.Clock.Advance(RelayInFlightFor)
	require.NoError(t, e.svc.VerifyAuthorizedPayment(ctx, req), "a relay whose outcome was never learnt stops holding the balance")
	res, err := e.svc.PayWithAuthorization(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "detected", res.Status)
}

// TestConcurrentAgentPaysOfOneAgent: agent pay is a send from the agent's
// custodial wallet, under the wallet lock that counts its sends in flight
// (transfer_available.go): five payments at once of an agent whose balance covers
// one make one transfer and spend gas on one.
func TestConcurrentAgentPaysOfOneAgent(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "2.50")
	const n = 5
	sessions := make([]*ent.CheckoutSession, n)
	for i := range sessions {
		sessions[i] = e.session(t, "2.50", false)
	}
	nonceBefore := e.gasNonce(t)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, _, errs[i] = e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sessions[i].ExternalID, Chain: "base"})
		}()
	}
	close(start)
	wg.Wait()
	paid := 0
	for _, err := range errs {
		if err == nil {
			paid++
			continue
		}
		require.ErrorIs(t, err, ErrInsufficientFunds)
		require.ErrorContains(t, err, "sends in flight count as spent")
	}
	require.Equal(t, 1, paid)
	require.Equal(t, 1, e.db.Ent.Transfer.Query().Where(transfer.CheckoutSessionIDNotNil()).CountX(ctx))
	require.Equal(t, nonceBefore+1, e.gasNonce(t), "one transaction: an agent's payment has no fee leg")
}

// TestRelayRateLimits: relays count per client IP before any work (even
// one refused later counts) and per merchant and mode once verified;
// beyond either, a *RateLimitError before anything is recorded or
// broadcast, until the minute ends.
func TestRelayRateLimits(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnvWith(t, testenv.Options{Clock: time.Now().Truncate(time.Minute).Add(time.Second)},
		Config{RelayIPRateLimit: 3, RelayMerchantRateLimit: 2})
	payer := e.relayPayer(t, 20_000_000)
	d := e.tokenDomain(t)
	now := time.Now().Unix()
	pay := func(ip string) (*ent.CheckoutSession, error) {
		sess := e.sessionAt(t, "1.00")
		auth := signTransferAuthorization(t, payer.key, d, e.depositAddress(t, sess), 1_000_000, now-600, now+3600)
		sess = e.reloadSession(t, sess)
		_, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: auth, ClientIP: ip})
		return sess, err
	}

	t.Run("per client IP", func(t *testing.T) {
		// A refused authorization counts too: the limit comes first.
		_, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: "cs_test_nope", Chain: "base",
			Authorization: signTransferAuthorization(t, payer.key, d, payer.addr, 1, now-600, now+3600), ClientIP: "198.51.100.7"})
		require.ErrorIs(t, err, ErrNotFound)
		for range 2 {
			_, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: "cs_test_nope", Chain: "base",
				Authorization: signTransferAuthorization(t, payer.key, d, payer.addr, 1, now-600, now+3600), ClientIP: "198.51.100.7"})
			require.ErrorIs(t, err, ErrNotFound)
		}
		before := e.gasNonce(t)
		sess, err := pay("198.51.100.7")
		var rl *RateLimitError
		require.ErrorAs(t, err, &rl)
		require.ErrorIs(t, err, ErrRateLimited)
		require.ErrorContains(t, err, "3 relayed authorizations per minute from this address")
		require.Equal(t, before, e.gasNonce(t))
		require.Equal(t, sess.UpdatedAt, e.reloadSession(t, sess).UpdatedAt)
		require.Empty(t, e.db.Ent.Relay.Query().Where(relay.SessionID(sess.ID)).AllX(ctx))
	})

	t.Run("per merchant and mode", func(t *testing.T) {
		for i := range 2 {
			_, err := pay("192.0.2." + string(rune('1'+i)))
			require.NoError(t, err)
		}
		before := e.gasNonce(t)
		sess, err := pay("192.0.2.9")
		require.ErrorIs(t, err, ErrRateLimited)
		require.ErrorContains(t, err, "2 relayed authorizations per minute of one merchant's test sessions")
		require.Equal(t, before, e.gasNonce(t), "refused before any gas")
		require.Empty(t, e.db.Ent.Relay.Query().Where(relay.SessionID(sess.ID)).AllX(ctx))

		// The facilitator's settle (no client IP: the merchant calls)
		// counts against the merchant too.
		fsess := e.sessionAt(t, "1.00")
		auth := signTransferAuthorization(t, payer.key, d, e.depositAddress(t, fsess), 1_000_000, now-600, now+3600)
		_, err = e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: fsess.ExternalID, Chain: "base", Authorization: auth})
		require.ErrorIs(t, err, ErrRateLimited)

		e.env.Clock.Advance(time.Minute)
		_, err = pay("192.0.2.9")
		require.NoError(t, err, "a new minute")
		_, err = pay("198.51.100.7")
		require.NoError(t, err, "a new minute for the client too")
	})
}

// TestRelayRevertCooldown: a payer that spends its balance elsewhere in the
// block its relay lands in makes the relay revert, at the treasury's cost
// of gas. After RelayRevertLimit such reverts within an hour the payer's
// authorizations are refused, before any gas, with the time they are taken
// again; an hour after the first of them they are.
func TestRelayRevertCooldown(t *testing.T) {
	ctx := context.Background()
	// Blocks only when the test commits one: the relay and the payer's
	// other spend land in one block.
	start := time.Now().UTC().Truncate(time.Second)
	e := startAgentCheckoutEnvWith(t, testenv.Options{BlockTime: -1, Clock: start})
	relayer := e.env.Ledger(chains.Base).(chains.AuthorizationRelayer)
	key := mustKey(t)
	payer := relayPayer{key: key, addr: crypto.PubkeyToAddress(key.PublicKey).Hex()}
	d := e.tokenDomain(t)
	elsewhere := crypto.PubkeyToAddress(mustKey(t).PublicKey).Hex()
	now := time.Now().Unix()

	for round := 1; round <= RelayRevertLimit; round++ {
		e.env.Fund(t, chains.Base, payer.addr, 1_000_000)
		sess := e.sessionAt(t, "1.00")
		auth := signTransferAuthorization(t, payer.key, d, e.depositAddress(t, sess), 1_000_000, now-600, now+3600)
		// The payer's other authorization, spending the same balance,
		// relayed by someone else: pooled, not yet included.
		spend, err := signTransferAuthorization(t, payer.key, d, elsewhere, 1_000_000, now-600, now+3600).parse()
		require.NoError(t, err)
		_, err = relayer.RelayAuthorization(ctx, spend)
		require.NoError(t, err)
		pooled := e.gasNonce(t)

		type answer struct {
			res *AuthorizedPayment
			err error
		}
		done := make(chan answer, 1)
		go func() {
			res, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: auth, Wait: 30 * time.Second})
			done <- answer{res, err}
		}()
		require.Eventually(t, func() bool {
			select {
			case a := <-done: // answered before relaying: put back for the check below
				done <- a
				return true
			default:
				return e.gasNonce(t) == pooled+1
			}
		}, 20*time.Second, 5*time.Millisecond, "the service relays it")
		e.env.EVM(chains.Base).Commit()
		var a answer
		select {
		case a = <-done:
		case <-time.After(time.Minute):
			t.Fatal("the relay's answer did not come")
		}
		require.NoError(t, a.err)
		require.Equal(t, "failed", a.res.Status, "round %d: the relay reverted", round)
		e.env.Clock.Advance(10 * time.Minute)
	}
	rows := e.relaysOf(t, payer.addr)
	require.Len(t, rows, RelayRevertLimit)
	for _, r := range rows {
		require.Equal(t, relay.StatusReverted, r.Status)
	}

	// The next one is refused before any gas, saying until when.
	e.env.Fund(t, chains.Base, payer.addr, 1_000_000)
	sess := e.sessionAt(t, "1.00")
	auth := signTransferAuthorization(t, payer.key, d, e.depositAddress(t, sess), 1_000_000, now-600, now+3600)
	sess = e.reloadSession(t, sess)
	req := AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: auth, Wait: time.Millisecond}
	before := e.gasNonce(t)
	until := rows[0].FinishedAt.Add(RelayRevertWindow)
	_, err := e.svc.PayWithAuthorization(ctx, req)
	var rl *RateLimitError
	require.ErrorAs(t, err, &rl)
	require.ErrorContains(t, err, "3 payments of "+strings.ToLower(payer.addr)+" relayed within 1h0m0s reverted on chain")
	require.ErrorContains(t, err, "not relayed until "+until.Format(time.RFC3339))
	require.Equal(t, until.Sub(e.env.Clock.Now()), rl.Decision.RetryAfter)
	require.ErrorIs(t, e.svc.VerifyAuthorizedPayment(ctx, req), ErrRateLimited, "verify says so too")
	require.Equal(t, before, e.gasNonce(t))
	require.Equal(t, sess.UpdatedAt, e.reloadSession(t, sess).UpdatedAt)

	// Another payer is not concerned.
	other := e.relayPayer(t, 1_000_000)
	osess := e.sessionAt(t, "1.00")
	oauth := signTransferAuthorization(t, other.key, d, e.depositAddress(t, osess), 1_000_000, now-600, now+3600)
	res, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: osess.ExternalID, Chain: "base", Authorization: oauth, Wait: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, "pending", res.Status)

	// An hour after the first revert, two remain within the window.
	e.env.Clock.Set(until)
	sess = e.sessionAt(t, "1.00")
	req.ExternalID = sess.ExternalID
	req.Authorization = signTransferAuthorization(t, payer.key, d, e.depositAddress(t, sess), 1_000_000, now-600, now+3600)
	res, err = e.svc.PayWithAuthorization(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "pending", res.Status, "relayed, not yet included")
	require.Equal(t, before+2, e.gasNonce(t))
	e.env.EVM(chains.Base).Commit()
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	return k
}

// startAgentCheckoutEnvWith is startAgentCheckoutEnv with opts' clock and
// block time (-1: blocks only from Commit) and cfg's non-zero fields.
func startAgentCheckoutEnvWith(t *testing.T, opts testenv.Options, cfg ...Config) *agentCheckoutEnv {
	t.Helper()
	opts.Chains, opts.Confirmations, opts.Jobs = []chains.Name{chains.Base}, map[chains.Name]uint64{chains.Base: 2}, true
	switch opts.BlockTime {
	case 0:
		opts.BlockTime = 50 * time.Millisecond
	case -1:
		opts.BlockTime = 0
	}
	env := testenv.New(t, opts)
	c := Config{}
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.AgentMode = ModeTest
	svc := newTestService(t, env, c)
	e := &agentCheckoutEnv{sendEnv: &sendEnv{env: env, svc: svc, db: env.DB}}
	name := "Shop"
	reg, err := svc.RegisterMerchant(context.Background(), MerchantInput{Name: &name, Email: checkoutPtr("shop@example.com")})
	require.NoError(t, err)
	e.merchant = env.DB.Ent.Merchant.UpdateOneID(reg.Merchant.ID).
		SetWebhookURL("http://127.0.0.1:9/hook").SetTestWebhookURL("http://127.0.0.1:9/hook").
		SaveX(context.Background())
	return e
}

// sessionAt is a test-mode session of the merchant open for 30 minutes of
// the service's clock.
func (e *agentCheckoutEnv) sessionAt(t *testing.T, amount string) *ent.CheckoutSession {
	t.Helper()
	return e.db.Ent.CheckoutSession.Create().
		SetMerchantID(e.merchant.ID).
		SetExternalID("cs_test_" + uuid.NewString()[:24]).
		SetLivemode(false).
		SetAmountUsd(decimal.RequireFromString(amount)).
		SetCurrency("USD").
		SetExpiresAt(e.svc.now().Add(30 * time.Minute).UTC()).
		SaveX(context.Background())
}

// TestRelayLeftInFlightCanBeSubmittedAgain: a relay left in flight (a node
// error or a crash before its outcome was known) does not count against
// the same authorization submitted again: the token moves its value once.
// The new relay takes its place, so the payer's other authorizations
// count the value once.
func TestRelayLeftInFlightCanBeSubmittedAgain(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	payer := e.relayPayer(t, 2_500_000)
	sess := e.session(t, "2.50", false)
	now := time.Now().Unix()
	auth := signTransferAuthorization(t, payer.key, e.tokenDomain(t), e.depositAddress(t, sess), 2_500_000, now-600, now+3600)
	earlier := e.db.Ent.Relay.Create().SetLivemode(false).SetChain("base").SetPayer(strings.ToLower(payer.addr)).
		SetNonce(strings.ToLower(auth.Nonce)).SetValue(2_500_000).SetMerchantID(e.merchant.ID).SetSessionID(sess.ID).
		SetInFlightUntil(time.Now().Add(RelayInFlightFor).UTC()).SaveX(ctx)

	res, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: auth})
	require.NoError(t, err)
	require.Equal(t, "detected", res.Status)
	rows := e.relaysOf(t, payer.addr)
	require.Len(t, rows, 2)
	require.Equal(t, earlier.ID, rows[0].ID)
	require.Equal(t, relay.StatusDropped, rows[0].Status, "superseded")
	require.Equal(t, relay.StatusSucceeded, rows[1].Status)
}
