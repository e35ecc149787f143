package agentpay

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	solanago "github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/payment"
	"agentpay/ent/relay"
	"agentpay/ent/wallet"
	"agentpay/internal/testenv"
	"agentpay/x402"
)

// exactSolanaPayload is the PAYMENT-SIGNATURE payload @x402/svm's client
// makes for req, built in Go: compute unit limit and price, the
// TransferChecked from payer's token account to payTo's, the memo; the
// fee payer's signature left empty.
func exactSolanaPayload(t *testing.T, env *testenv.Env, payer solanago.PrivateKey, req x402.Requirements) *x402.PaymentPayload {
	t.Helper()
	mint := solanago.MustPublicKeyFromBase58(req.Asset)
	src, _, err := solanago.FindAssociatedTokenAddress(payer.PublicKey(), mint)
	require.NoError(t, err)
	dst, _, err := solanago.FindAssociatedTokenAddress(solanago.MustPublicKeyFromBase58(req.PayTo), mint)
	require.NoError(t, err)
	transfer := make([]byte, 10)
	transfer[0] = 12
	var units uint64
	for _, c := range req.Amount {
		units = units*10 + uint64(c-'0')
	}
	binary.LittleEndian.PutUint64(transfer[1:9], units)
	transfer[9] = 6
	ixs := []solanago.Instruction{
		solanago.NewInstruction(solanago.ComputeBudget, nil, []byte{2, 0x20, 0x4e, 0, 0}),
		solanago.NewInstruction(solanago.ComputeBudget, nil, []byte{3, 1, 0, 0, 0, 0, 0, 0, 0}),
		solanago.NewInstruction(solanago.TokenProgramID, solanago.AccountMetaSlice{
			solanago.Meta(src).WRITE(), solanago.Meta(mint), solanago.Meta(dst).WRITE(), solanago.Meta(payer.PublicKey()).SIGNER(),
		}, transfer),
		solanago.NewInstruction(solanago.MustPublicKeyFromBase58("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr"), nil, []byte(req.Extra.Memo)),
	}
	bh, err := env.Solana().Client().GetLatestBlockhash(context.Background(), rpc.CommitmentConfirmed)
	require.NoError(t, err)
	tx, err := solanago.NewTransaction(ixs, bh.Value.Blockhash, solanago.TransactionPayer(solanago.MustPublicKeyFromBase58(req.Extra.FeePayer)))
	require.NoError(t, err)
	msg, err := tx.Message.MarshalBinary()
	require.NoError(t, err)
	sig, err := payer.Sign(msg)
	require.NoError(t, err)
	tx.Signatures = []solanago.Signature{{}, sig}
	raw, err := tx.MarshalBinary()
	require.NoError(t, err)
	p := &x402.PaymentPayload{X402Version: x402.Version2, Accepted: req}
	p.Payload.Transaction = base64.StdEncoding.EncodeToString(raw)
	return p
}

// TestX402SolanaAgentWalletUnderPolicy: a Solana x402 payment signed by an
// agent's own wallet pays under its human's spending policy, as a relayed
// EVM authorization does: at a merchant not on the allow-list it is
// refused (verify and settle), nothing sent; at a listed one it is paid.
func TestX402SolanaAgentWalletUnderPolicy(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Solana}, Confirmations: map[chains.Name]uint64{chains.Solana: 2}, Jobs: true})
	svc := newTestService(t, env, Config{AgentMode: ModeTest})
	e := &agentCheckoutEnv{sendEnv: &sendEnv{env: env, svc: svc, db: env.DB}}
	shopName, otherName := "Shop", "Elsewhere"
	shop, err := svc.RegisterMerchant(ctx, MerchantInput{Name: &shopName, Email: checkoutPtr("shop@example.com")})
	require.NoError(t, err)
	other, err := svc.RegisterMerchant(ctx, MerchantInput{Name: &otherName, Email: checkoutPtr("else@example.com")})
	require.NoError(t, err)

	a := e.register(t, "buyer")
	name := randomName(t, "hum")
	u, err := svc.CreateUser(ctx, NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	p, err := svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = svc.DecidePairing(ctx, u, p.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	_, err = svc.SetSpendingPolicy(ctx, &Viewer{User: u}, a.Username, SpendingPolicyInput{AllowedRecipients: []string{other.Merchant.ID.String()}, DenyByDefault: true})
	require.NoError(t, err)

	payer, err := solanago.NewRandomPrivateKey()
	require.NoError(t, err)
	env.Fund(t, chains.Solana, payer.PublicKey().String(), 5_000_000)
	_, err = env.DB.Ent.Wallet.Create().SetAgentID(a.ID).SetChain("solana").SetAddress(payer.PublicKey().String()).
		SetKind(wallet.KindExternal).SetVerified(true).Save(ctx)
	require.NoError(t, err)

	e.merchant = shop.Merchant
	unlisted := e.session(t, "1", false)
	offer, err := svc.X402Offers(ctx, unlisted.ExternalID, "https://example.test/r")
	require.NoError(t, err)
	payload := exactSolanaPayload(t, env, payer, offer.V2.Accepts[0])
	_, _, err = svc.PayX402V2(ctx, unlisted.ExternalID, "", payload)
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "not on the allow-list")
	reason, ok := X402Reason(err)
	require.True(t, ok)
	require.Equal(t, "invalid_payment", reason)
	require.Equal(t, int64(5_000_000), env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "nothing sent")

	e.merchant = other.Merchant
	listed := e.session(t, "1", false)
	offer, err = svc.X402Offers(ctx, listed.ExternalID, "https://example.test/r")
	require.NoError(t, err)
	res, settle, err := svc.PayX402V2(ctx, listed.ExternalID, "", exactSolanaPayload(t, env, payer, offer.V2.Accepts[0]))
	require.NoError(t, err)
	require.True(t, settle.Success)
	require.Equal(t, "detected", res.Status)
	require.Equal(t, int64(4_000_000), env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64())
}

// TestX402SolanaNetworkIsTheNodesCluster: Solana is offered as the cluster
// its node is on, by the genesis hash the node answers, never as the one
// the mode assumes: a test-mode node on testnet is offered as testnet and
// a payload naming devnet is refused; a node on a cluster x402 has no
// name for (a local validator) is not offered at all, and a payload for
// it, under any network, is refused. Nothing moves.
func TestX402SolanaNetworkIsTheNodesCluster(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		genesis string
		offered string // "" for none
	}{
		{"testnet", "4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY", x402.SolanaTestnet},
		{"a local cluster", solanago.NewWallet().PublicKey().String(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Solana}, SolanaGenesisHash: tc.genesis})
			svc := newTestService(t, env, Config{AgentMode: ModeTest})
			name := "Shop"
			shop, err := svc.RegisterMerchant(ctx, MerchantInput{Name: &name, Email: checkoutPtr("shop@example.com")})
			require.NoError(t, err)
			e := &agentCheckoutEnv{sendEnv: &sendEnv{env: env, svc: svc, db: env.DB}, merchant: shop.Merchant}
			sess := e.session(t, "1", false)
			payer, err := solanago.NewRandomPrivateKey()
			require.NoError(t, err)
			env.Fund(t, chains.Solana, payer.PublicKey().String(), 5_000_000)

			offer, err := svc.X402Offers(ctx, sess.ExternalID, "https://example.test/r")
			var req x402.Requirements
			if tc.offered == "" {
				require.True(t, IsValidation(err), "no network offered: %v", err)
				require.Empty(t, svc.X402SupportedFor(ModeTest).Signers["solana:*"])
				// The payload a client would have built had the mode's
				// cluster been assumed.
				da, err := svc.sessionDepositAddress(ctx, sess, chains.Solana)
				require.NoError(t, err)
				settler := env.Ledger(chains.Solana).(chains.ExactSettler)
				req = x402.Requirements{Scheme: "exact", Network: x402.SolanaDevnet, Amount: "1000000", Asset: env.Ledger(chains.Solana).Token(),
					PayTo: da.Address, MaxTimeoutSeconds: 120, Extra: x402.Extra{FeePayer: settler.FeePayer(), Memo: sess.ExternalID}}
			} else {
				require.NoError(t, err)
				require.Len(t, offer.V2.Accepts, 1)
				req = offer.V2.Accepts[0]
				require.Equal(t, tc.offered, req.Network, "offered as the node's cluster")
				require.Equal(t, tc.offered, svc.X402SupportedFor(ModeTest).Kinds[0].Network)
				req.Network = x402.SolanaDevnet
			}
			_, _, err = svc.PayX402V2(ctx, sess.ExternalID, "", exactSolanaPayload(t, env, payer, req))
			reason, ok := X402Reason(err)
			require.True(t, ok, "%v", err)
			require.Equal(t, "invalid_network", reason)
			require.Equal(t, int64(5_000_000), env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "nothing sent")
		})
	}
}

// TestX402SolanaTwoInstancesOneTransaction: two instances (two services on
// one database, each with its own in-process locks) settle two different
// transactions of one payer for one session at the same instant, neither
// carrying a payment-identifier: a client that signed again after a
// timeout and sent the retry to another instance. Exactly one lands on
// chain; the other is refused (409) before anything is sent. Run on
// SQLite and, with TEST_DATABASE_URL, PostgreSQL.
func TestX402SolanaTwoInstancesOneTransaction(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Solana}, Confirmations: map[chains.Name]uint64{chains.Solana: 2}})
	cfg := Config{AgentMode: ModeTest, RelayIPRateLimit: 1000, RelayMerchantRateLimit: 1000}
	a, b := newTestService(t, env, cfg), newTestService(t, env, cfg)
	name := "Shop"
	shop, err := a.RegisterMerchant(ctx, MerchantInput{Name: &name, Email: checkoutPtr("shop@example.com")})
	require.NoError(t, err)
	e := &agentCheckoutEnv{sendEnv: &sendEnv{env: env, svc: a, db: env.DB}, merchant: shop.Merchant}

	for round := range 3 {
		sess := e.session(t, "1", false)
		payer, err := solanago.NewRandomPrivateKey()
		require.NoError(t, err)
		env.Fund(t, chains.Solana, payer.PublicKey().String(), 5_000_000)
		offer, err := a.X402Offers(ctx, sess.ExternalID, "https://example.test/r")
		require.NoError(t, err)
		// The deposit's token account opened beforehand, so both settle
		// alike from the start (without the session's lock, two instances
		// opening it at once also collide).
		env.Fund(t, chains.Solana, offer.V2.Accepts[0].PayTo, 1)
		first := exactSolanaPayload(t, env, payer, offer.V2.Accepts[0])
		var second *x402.PaymentPayload
		require.Eventually(t, func() bool { // signed again: a new blockhash
			second = exactSolanaPayload(t, env, payer, offer.V2.Accepts[0])
			return second.Payload.Transaction != first.Payload.Transaction
		}, 10*time.Second, 20*time.Millisecond)

		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, pay := range []struct {
			svc *Service
			p   *x402.PaymentPayload
		}{{a, first}, {b, second}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _, errs[i] = pay.svc.PayX402V2(ctx, sess.ExternalID, "", pay.p)
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
			require.ErrorIs(t, err, ErrConflict, "round %d", round)
		}
		require.Equal(t, 1, paid, "round %d: exactly one settled: %v", round, errs)
		require.Equal(t, int64(4_000_000), env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "round %d: one transfer on chain", round)
		n, err := env.DB.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).Count(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n, "round %d: one payment", round)
	}
}

// TestSessionPaidOnOneChainAtATime: while a payment of a session is in
// flight on one chain (broadcast, its outcome not yet recorded: the
// instance that sent it is held right after the broadcast), a payment on
// another chain, on another instance, is refused (409) before anything is
// sent, both ways: an EVM authorization while a Solana transaction is in
// flight, and a Solana transaction while an EVM authorization is. Once the
// first is decided the session has its one payment. Run on SQLite and,
// with TEST_DATABASE_URL, PostgreSQL.
func TestSessionPaidOnOneChainAtATime(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base, chains.Solana}, BlockTime: 50 * time.Millisecond,
		Confirmations: map[chains.Name]uint64{chains.Base: 2, chains.Solana: 2},
	})
	cfg := Config{AgentMode: ModeTest, RelayIPRateLimit: 1000, RelayMerchantRateLimit: 1000}
	broadcast, release := make(chan string, 1), make(chan struct{})
	held := cfg
	held.AfterBroadcast = func(what string) {
		broadcast <- what
		<-release
	}
	a, b := newTestService(t, env, held), newTestService(t, env, cfg)
	name := "Shop"
	shop, err := b.RegisterMerchant(ctx, MerchantInput{Name: &name, Email: checkoutPtr("shop@example.com")})
	require.NoError(t, err)
	e := &agentCheckoutEnv{sendEnv: &sendEnv{env: env, svc: b, db: env.DB}, merchant: shop.Merchant}
	domain := e.tokenDomain(t)

	for _, first := range []chains.Name{chains.Solana, chains.Base} {
		t.Run("in flight on "+string(first), func(t *testing.T) {
			release = make(chan struct{})
			sess := e.session(t, "1", false)
			offer, err := b.X402Offers(ctx, sess.ExternalID, "https://example.test/r")
			require.NoError(t, err)
			var solReq, baseReq x402.Requirements
			for _, r := range offer.V2.Accepts {
				if x402.IsSolanaNetwork(r.Network) {
					solReq = r
				} else {
					baseReq = r
				}
			}
			require.NotEmpty(t, solReq.PayTo, "solana offered")
			require.NotEmpty(t, baseReq.PayTo, "base offered")
			solPayer, err := solanago.NewRandomPrivateKey()
			require.NoError(t, err)
			env.Fund(t, chains.Solana, solPayer.PublicKey().String(), 5_000_000)
			evmPayer := e.relayPayer(t, 5_000_000)
			now := time.Now().Unix()
			auth := signTransferAuthorization(t, evmPayer.key, domain, baseReq.PayTo, 1_000_000, now-600, now+3600)
			payEVM := func(svc *Service) (*AuthorizedPayment, error) {
				return svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: auth, Wait: 30 * time.Second})
			}
			solPayload := exactSolanaPayload(t, env, solPayer, solReq)
			paySolana := func(svc *Service) (*AuthorizedPayment, error) {
				res, _, err := svc.PayX402V2(ctx, sess.ExternalID, "", solPayload)
				return res, err
			}
			payFirst, paySecond := paySolana, payEVM
			if first == chains.Base {
				payFirst, paySecond = payEVM, paySolana
			}

			type answer struct {
				res *AuthorizedPayment
				err error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := payFirst(a)
				done <- answer{res, err}
			}()
			select {
			case <-broadcast:
			case early := <-done:
				t.Fatalf("the first payment answered before its broadcast was held: %+v %v", early.res, early.err)
			}

			_, err = paySecond(b)
			require.ErrorIs(t, err, ErrConflict)
			require.ErrorContains(t, err, "already being paid on "+string(first)+" by a payment in flight")
			if first == chains.Solana {
				require.Empty(t, e.relaysOf(t, evmPayer.addr), "no relay recorded")
				require.Equal(t, int64(5_000_000), env.Balance(t, chains.Base, evmPayer.addr).Int64(), "nothing relayed on base")
			} else {
				require.Equal(t, int64(5_000_000), env.Balance(t, chains.Solana, solPayer.PublicKey().String()).Int64(), "nothing sent on solana")
			}

			close(release)
			got := <-done
			require.NoError(t, got.err)
			require.Equal(t, first, got.res.Chain)
			require.Equal(t, "detected", got.res.Status)
			n, err := env.DB.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).Count(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n, "one payment")
		})
	}
}

// TestSolanaFailuresCountAgainstTheRevertLimit: a Solana transaction that
// failed on chain cost the treasury its fee, as a reverted EVM relay costs
// its gas, so a payer with RelayRevertLimit of them within the window is
// refused (429, saying until when) before anything is sent, by settle
// (x402 and MPP's solana method) and by the facilitator's verify. Each
// failure is a real one on the devnet: the service records the
// transaction as it does before sending it (recordSolanaExact), then the
// transaction lands failed (co-signed with the treasury's key and sent
// without preflight while payTo has no token account: on a cluster, one
// that passed preflight fails when the state moves before its block; the
// devnet's preflight runs in the same instant as the block), and the
// service learns the outcome from the chain as a retry of the payment
// does. Another payer is not concerned. Run on SQLite and, with
// TEST_DATABASE_URL, PostgreSQL.
func TestSolanaFailuresCountAgainstTheRevertLimit(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Solana}, Confirmations: map[chains.Name]uint64{chains.Solana: 2}})
	svc := newTestService(t, env, Config{AgentMode: ModeTest, RelayIPRateLimit: 1000, RelayMerchantRateLimit: 1000})
	name := "Shop"
	shop, err := svc.RegisterMerchant(ctx, MerchantInput{Name: &name, Email: checkoutPtr("shop@example.com")})
	require.NoError(t, err)
	e := &agentCheckoutEnv{sendEnv: &sendEnv{env: env, svc: svc, db: env.DB}, merchant: shop.Merchant}
	payer, err := solanago.NewRandomPrivateKey()
	require.NoError(t, err)
	env.Fund(t, chains.Solana, payer.PublicKey().String(), 5_000_000)
	payload := func() (*ent.CheckoutSession, *x402.PaymentPayload) {
		sess := e.session(t, "1", false)
		offer, err := svc.X402Offers(ctx, sess.ExternalID, "https://example.test/r")
		require.NoError(t, err)
		return sess, exactSolanaPayload(t, env, payer, offer.V2.Accepts[0])
	}
	treasury := solanago.PrivateKey(env.Treasury.Key(chains.Solana))

	var first time.Time
	for round := 1; round <= RelayRevertLimit; round++ {
		sess, p := payload()
		sess, err := svc.sessionByExternalID(ctx, sess.ExternalID)
		require.NoError(t, err)
		st, err := svc.solanaExactTargetOf(ctx, sess, p)
		require.NoError(t, err)
		checked, err := st.settler.VerifyExact(ctx, p.Payload.Transaction, st.req)
		require.NoError(t, err)
		row, err := svc.recordSolanaExact(ctx, st, checked)
		require.NoError(t, err, "round %d", round)

		raw, err := base64.StdEncoding.DecodeString(p.Payload.Transaction)
		require.NoError(t, err)
		tx, err := solanago.TransactionFromBytes(raw)
		require.NoError(t, err)
		msg, err := tx.Message.MarshalBinary()
		require.NoError(t, err)
		tx.Signatures[0], err = treasury.Sign(msg)
		require.NoError(t, err)
		sig, err := env.Solana().Client().SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{SkipPreflight: true})
		require.NoError(t, err)
		require.Equal(t, checked.TxHash, sig.String(), "the service's own transaction")
		rc, err := env.Ledger(chains.Solana).Wait(ctx, sig.String())
		require.NoError(t, err)
		require.Equal(t, chains.TxFailed, rc.State, "round %d: it failed on chain", round)

		res, _, err := svc.PayX402V2(ctx, sess.ExternalID, "", p)
		require.NoError(t, err)
		require.Equal(t, "failed", res.Status)
		row = env.DB.Ent.Relay.GetX(ctx, row.ID)
		require.Equal(t, relay.StatusReverted, row.Status, "round %d", round)
		if round == 1 {
			first = *row.FinishedAt
		}
	}

	sess, p := payload()
	_, _, err = svc.PayX402V2(ctx, sess.ExternalID, "", p)
	var rl *RateLimitError
	require.ErrorAs(t, err, &rl)
	require.ErrorContains(t, err, "3 payments of "+payer.PublicKey().String()+" relayed within 1h0m0s reverted on chain")
	until := first.Add(RelayRevertWindow)
	require.ErrorContains(t, err, "not relayed until "+until.Format(time.RFC3339))
	require.Equal(t, int64(5_000_000), env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "nothing sent")
	n, err := env.DB.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	auth := &MerchantAuth{Merchant: shop.Merchant, Mode: ModeTest}
	_, err = svc.X402VerifyV2(ctx, auth, &x402.FacilitatorRequest{X402Version: x402.Version2, PaymentPayload: *p, PaymentRequirements: p.Accepted})
	require.ErrorAs(t, err, &rl, "verify says so too")

	// Another payer is not concerned.
	other, err := solanago.NewRandomPrivateKey()
	require.NoError(t, err)
	env.Fund(t, chains.Solana, other.PublicKey().String(), 5_000_000)
	sess = e.session(t, "1", false)
	offer, err := svc.X402Offers(ctx, sess.ExternalID, "https://example.test/r")
	require.NoError(t, err)
	res, _, err := svc.PayX402V2(ctx, sess.ExternalID, "", exactSolanaPayload(t, env, other, offer.V2.Accepts[0]))
	require.NoError(t, err)
	require.Equal(t, "detected", res.Status)
}
