package agentpay

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"fmt"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/adapters"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/gasspend"
	"agentpay/ent/payment"
	"agentpay/ent/relay"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// signTransferAuthorization signs an EIP-3009 TransferWithAuthorization as
// a payer's wallet does (eth_signTypedData_v4), from the EIP-712
// definitions rather than the adapter's code.
func signTransferAuthorization(t testing.TB, key *ecdsa.PrivateKey, d chains.TokenDomain, to string, value int64, validAfter, validBefore int64) TransferAuthorization {
	t.Helper()
	var nonce [32]byte
	_, err := rand.Read(nonce[:])
	require.NoError(t, err)
	from := crypto.PubkeyToAddress(key.PublicKey)
	domain := crypto.Keccak256(
		crypto.Keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")),
		crypto.Keccak256([]byte(d.Name)), crypto.Keccak256([]byte(d.Version)),
		math.U256Bytes(new(big.Int).SetUint64(d.ChainID)),
		common.LeftPadBytes(common.HexToAddress(d.VerifyingContract).Bytes(), 32),
	)
	toAddr := common.HexToAddress(to)
	structHash := crypto.Keccak256(
		crypto.Keccak256([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")),
		common.LeftPadBytes(from.Bytes(), 32), common.LeftPadBytes(toAddr.Bytes(), 32),
		math.U256Bytes(big.NewInt(value)), math.U256Bytes(big.NewInt(validAfter)), math.U256Bytes(big.NewInt(validBefore)),
		nonce[:],
	)
	digest := crypto.Keccak256([]byte("\x19\x01"), domain, structHash)
	sig, err := crypto.Sign(digest, key)
	require.NoError(t, err)
	sig[64] += 27
	return TransferAuthorization{
		From: from.Hex(), To: toAddr.Hex(), Value: fmt.Sprint(value),
		ValidAfter: fmt.Sprint(validAfter), ValidBefore: fmt.Sprint(validBefore),
		Nonce: "0x" + common.Bytes2Hex(nonce[:]), Signature: "0x" + common.Bytes2Hex(sig),
	}
}

// relayPayer is a devnet wallet holding USDC and no gas.
type relayPayer struct {
	key  *ecdsa.PrivateKey
	addr string
}

func (e *agentCheckoutEnv) relayPayer(t *testing.T, units int64) relayPayer {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	addr := crypto.PubkeyToAddress(key.PublicKey).Hex()
	e.env.Fund(t, chains.Base, addr, units)
	return relayPayer{key: key, addr: addr}
}

func (e *agentCheckoutEnv) tokenDomain(t *testing.T) chains.TokenDomain {
	t.Helper()
	d, err := e.env.Ledger(chains.Base).(chains.AuthorizationRelayer).TokenDomain(context.Background())
	require.NoError(t, err)
	return d
}

// depositAddress is the session's base deposit address as the page gives it.
func (e *agentCheckoutEnv) depositAddress(t *testing.T, sess *ent.CheckoutSession) string {
	t.Helper()
	d, err := e.svc.SelectPaymentMethod(context.Background(), sess.ExternalID, "", "base", TokenUSDC)
	require.NoError(t, err)
	return d.Address
}

// TestPayWithAuthorization: a payer with USDC and no gas signs the exact
// amount to the session's deposit address; the treasury relays it, the
// payment is recorded from the known transaction before any scan
// (payment.detected, confirming), and the scan then confirms that same
// payment. Submitting the same authorization again answers the same
// payment and moves nothing.
//
// Authorizations here stay valid an hour: the devnet seals a block every
// 50 ms, each at least a second after its parent, so its clock (which the
// token judges validity by) runs ahead of the wall clock.
func TestPayWithAuthorization(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	payer := e.relayPayer(t, 20_000_000)
	sess := e.session(t, "12.34", false)
	payTo := e.depositAddress(t, sess)
	now := time.Now().Unix()
	auth := signTransferAuthorization(t, payer.key, e.tokenDomain(t), payTo, 12_340_000, now-600, now+3600)

	res, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: auth})
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, "detected", res.Status)
	require.NotNil(t, res.Payment, "recorded from the transaction, before any scan")
	require.Equal(t, res.TxHash, res.Payment.TxHash)
	require.Equal(t, int64(12_340_000), res.Payment.AmountToken)
	require.Equal(t, payer.addr, res.Payer)
	require.Equal(t, payTo, res.PayTo)
	require.Equal(t, uint64(2), res.Required)
	require.Equal(t, checkoutsession.StatusConfirming, res.Session.Status)
	require.Equal(t, []string{EventPaymentDetected}, e.eventTypes(t, sess))
	requireDecimal(t, "12.34", e.onChain(t, chains.Base, payTo))
	requireDecimal(t, "7.66", e.onChain(t, chains.Base, payer.addr), "the payer paid the amount and no gas")

	again, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: auth})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.Payment.ID, again.Payment.ID)
	require.Equal(t, res.TxHash, again.TxHash)
	requireDecimal(t, "12.34", e.onChain(t, chains.Base, payTo), "moved once")
	// The treasury paid the relay's gas: it is in the gas ledger, once.
	relayed := e.db.Ent.GasSpend.Query().Where(gasspend.TxHash(res.TxHash)).OnlyX(ctx)
	require.Equal(t, GasPurposeRelay, relayed.Purpose)
	require.Positive(t, relayed.Fee)

	e.scanUntil(t, func() bool { return e.reloadSession(t, sess).Status == checkoutsession.StatusConfirmed })
	ps := e.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).AllX(ctx)
	require.Len(t, ps, 1, "the scan found the same payment")
	require.Equal(t, res.Payment.ID, ps[0].ID)
	evs := e.eventTypes(t, sess)
	require.Equal(t, 1, count(evs, EventPaymentDetected))
	require.Equal(t, 1, count(evs, EventPaymentConfirmed))
	require.Equal(t, 1, testdb.CountRows(t, e.db, "river_job WHERE kind = 'settle_payment'"))

	// A second, different authorization for the paid session: 409, nothing moves.
	auth2 := signTransferAuthorization(t, payer.key, e.tokenDomain(t), payTo, 12_340_000, now-600, now+3600)
	_, err = e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: auth2})
	require.ErrorIs(t, err, ErrConflict)
	requireDecimal(t, "7.66", e.onChain(t, chains.Base, payer.addr))
}

// TestPayWithAuthorizationScannedFirst: a relay whose answer was lost
// (the scan recorded the payment first) is answered from the chain when
// the payer submits it again.
func TestPayWithAuthorizationCrashAfterBroadcast(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	payer := e.relayPayer(t, 5_000_000)
	sess := e.session(t, "2.50", false)
	payTo := e.depositAddress(t, sess)
	now := time.Now().Unix()
	auth := signTransferAuthorization(t, payer.key, e.tokenDomain(t), payTo, 2_500_000, now-600, now+3600)
	parsed, err := auth.parse()
	require.NoError(t, err)
	// The relay went out, and the process died before recording anything.
	relayer := e.env.Ledger(chains.Base).(chains.AuthorizationRelayer)
	sub, err := relayer.RelayAuthorization(ctx, parsed)
	require.NoError(t, err)
	// Recorded by the scan: confirming, or confirmed at once when the first
	// scan to see it (the test's or the worker's) finds it final already
	// (two 50 ms blocks: a loaded machine's scans are further apart).
	e.scanUntil(t, func() bool {
		st := e.reloadSession(t, sess).Status
		return st == checkoutsession.StatusConfirming || st == checkoutsession.StatusConfirmed
	})

	res, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: auth})
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, sub.TxHash, res.TxHash)
	require.NotNil(t, res.Payment)
	require.Equal(t, 1, e.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).CountX(ctx))
	require.Equal(t, 1, count(e.eventTypes(t, sess), EventPaymentDetected))
}

// TestPayWithAuthorizationRefusals: every refusal comes before gas is
// spent and changes nothing.
func TestPayWithAuthorizationRefusals(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	payer := e.relayPayer(t, 5_000_000)
	poor := e.relayPayer(t, 1_000_000)
	sess := e.session(t, "2.50", false)
	payTo := e.depositAddress(t, sess)
	d := e.tokenDomain(t)
	now := time.Now().Unix()
	good := signTransferAuthorization(t, payer.key, d, payTo, 2_500_000, now-600, now+3600)
	otherKey, err := crypto.GenerateKey()
	require.NoError(t, err)
	wrongChain := d
	wrongChain.ChainID = 8453
	live := e.session(t, "2.50", true)
	expired := e.session(t, "2.50", false)
	e.db.Ent.CheckoutSession.UpdateOne(expired).SetStatus(checkoutsession.StatusExpired).ExecX(ctx)

	tamper := func(f func(*TransferAuthorization)) TransferAuthorization {
		a := good
		f(&a)
		return a
	}
	cases := []struct {
		name  string
		id    string
		chain string
		auth  TransferAuthorization
		is    error // nil: a ValidationError
		field string
	}{
		{"unknown session", "cs_test_nope", "base", good, ErrNotFound, ""},
		{"solana", sess.ExternalID, "solana", good, nil, "chain"},
		{"unknown chain", sess.ExternalID, "dogecoin", good, nil, "chain"},
		{"chain not configured", sess.ExternalID, "polygon", good, nil, "chain"},
		{"live session on a test network", live.ExternalID, "base", good, nil, "chain"},
		{"expired session", expired.ExternalID, "base", good, ErrConflict, ""},
		{"to another address", sess.ExternalID, "base",
			signTransferAuthorization(t, payer.key, d, payer.addr, 2_500_000, now-600, now+3600), nil, "authorization.to"},
		{"less than due", sess.ExternalID, "base",
			signTransferAuthorization(t, payer.key, d, payTo, 2_499_999, now-600, now+3600), nil, "authorization.value"},
		{"more than due", sess.ExternalID, "base",
			signTransferAuthorization(t, payer.key, d, payTo, 2_500_001, now-600, now+3600), nil, "authorization.value"},
		{"expired authorization", sess.ExternalID, "base",
			signTransferAuthorization(t, payer.key, d, payTo, 2_500_000, now-600, now-10), nil, "authorization"},
		{"not yet valid", sess.ExternalID, "base",
			signTransferAuthorization(t, payer.key, d, payTo, 2_500_000, now+600, now+900), nil, "authorization"},
		{"signed for another chain", sess.ExternalID, "base",
			signTransferAuthorization(t, payer.key, wrongChain, payTo, 2_500_000, now-600, now+3600), nil, "signature"},
		{"signed by another key", sess.ExternalID, "base", tamper(func(a *TransferAuthorization) {
			a.Signature = signTransferAuthorization(t, otherKey, d, payTo, 2_500_000, now-600, now+3600).Signature
		}), nil, "signature"},
		{"balance short", sess.ExternalID, "base",
			signTransferAuthorization(t, poor.key, d, payTo, 2_500_000, now-600, now+3600), ErrInsufficientFunds, ""},
		{"malformed nonce", sess.ExternalID, "base", tamper(func(a *TransferAuthorization) { a.Nonce = "0x12" }), nil, "authorization.nonce"},
		{"malformed signature", sess.ExternalID, "base", tamper(func(a *TransferAuthorization) { a.Signature = "0xzz" }), nil, "signature"},
		{"malformed value", sess.ExternalID, "base", tamper(func(a *TransferAuthorization) { a.Value = "2.5" }), nil, "authorization.value"},
		{"malformed from", sess.ExternalID, "base", tamper(func(a *TransferAuthorization) { a.From = "0x1234" }), nil, "authorization.from"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: tc.id, Chain: tc.chain, Authorization: tc.auth})
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
				return
			}
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tc.field, verr.Field, "%v", err)
		})
	}
	requireDecimal(t, "5", e.onChain(t, chains.Base, payer.addr), "nothing moved")
	requireDecimal(t, "0", e.onChain(t, chains.Base, payTo))
	require.Zero(t, e.db.Ent.Payment.Query().CountX(ctx))
	require.NoError(t, e.svc.VerifyAuthorizedPayment(ctx, AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: good}))
}

// racingLedger is the devnet's ledger with one authorization relayed and
// included right after the service's first look for it: the race of a
// retry with its own first relay (another request's, or another
// instance's) between replayAuthorization's two reads.
type racingLedger struct {
	relayLedger
	t     *testing.T
	auth  chains.Authorization
	raced atomic.Bool
	hash  string
}

type relayLedger interface {
	chains.Ledger
	chains.AuthorizationRelayer
	chains.DepositReader
}

func (l *racingLedger) FindTransfer(ctx context.Context, q chains.TransferQuery) (string, bool, error) {
	hash, found, err := l.relayLedger.FindTransfer(ctx, q)
	if err != nil || found || q.Ref != l.auth.Nonce || !l.raced.CompareAndSwap(false, true) {
		return hash, found, err
	}
	// Not found: now the first relay lands, after the read.
	sub, err := l.relayLedger.RelayAuthorization(ctx, l.auth)
	require.NoError(l.t, err)
	_, err = l.relayLedger.Wait(ctx, sub.TxHash)
	require.NoError(l.t, err)
	l.hash = sub.TxHash
	return hash, found, nil
}

// TestReplayAuthorizationRacesItsRelay: an authorization included between
// replayAuthorization's two reads (seen not transferred, then its nonce
// used) is answered with the payment it made, replayed, on the paths
// without a payment-identifier (x402 v1, the browser wallet's relay),
// never 409; nothing moves twice.
func TestReplayAuthorizationRacesItsRelay(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	payer := e.relayPayer(t, 5_000_000)
	sess := e.session(t, "2.50", false)
	payTo := e.depositAddress(t, sess)
	now := time.Now().Unix()
	signed := signTransferAuthorization(t, payer.key, e.tokenDomain(t), payTo, 2_500_000, now-600, now+3600)
	auth, err := signed.parse()
	require.NoError(t, err)
	n := e.svc.cfg.Test[chains.Base]
	racing := &racingLedger{relayLedger: n.Ledger.(relayLedger), t: t, auth: auth}
	n.Ledger = racing
	e.svc.cfg.Test[chains.Base] = n

	res, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: sess.ExternalID, Chain: "base", Authorization: signed})
	require.NoError(t, err, "the payment it made, not a conflict")
	require.True(t, racing.raced.Load())
	require.True(t, res.Replayed)
	require.Equal(t, racing.hash, res.TxHash)
	require.NotNil(t, res.Payment)
	require.Equal(t, "detected", res.Status)
	requireDecimal(t, "2.5", e.onChain(t, chains.Base, payer.addr), "moved once")
	require.Equal(t, 1, e.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).CountX(ctx))
}

// TestPayWithAuthorizationRelayedTwice: a payer retries an authorization
// whose first relay is still pooled, broadcast by another process (its own
// ledger and nonces, the same treasury key) that died before answering;
// the retry's relay goes out too, lands in the same block after the
// first and reverts. The answer is the first relay's payment, not
// "failed", and the revert does not count against the payer.
func TestPayWithAuthorizationRelayedTwice(t *testing.T) {
	ctx := context.Background()
	// Blocks only when the test commits one: both relays pooled together.
	e := startAgentCheckoutEnvWith(t, testenv.Options{BlockTime: -1})
	payer := e.relayPayer(t, 5_000_000)
	sess := e.session(t, "2.50", false)
	now := time.Now().Unix()
	auth := signTransferAuthorization(t, payer.key, e.tokenDomain(t), e.depositAddress(t, sess), 2_500_000, now-600, now+3600)
	parsed, err := auth.parse()
	require.NoError(t, err)
	// The process that died: its own connection to the chain.
	d := e.env.EVM(chains.Base)
	other, err := adapters.Network(ctx, chains.Base, adapters.Chain{
		RPCURL: d.RPCURL, USDC: d.USDC.Hex(), Confirmations: 2, GasKey: e.env.Treasury.Key(chains.Base),
	})
	require.NoError(t, err)
	if l, ok := other.Ledger.(interface{ Close() }); ok {
		t.Cleanup(l.Close)
	}
	first, err := other.Ledger.(chains.AuthorizationRelayer).RelayAuthorization(ctx, parsed)
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
		case a := <-done:
			done <- a
			return true
		default:
			return e.gasNonce(t) == pooled+1
		}
	}, 20*time.Second, 5*time.Millisecond, "the service relays it again")
	d.Commit()
	var a answer
	select {
	case a = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the retry's answer did not come")
	}
	require.NoError(t, a.err)
	require.NotEqual(t, "failed", a.res.Status, "a payment that landed is not answered failed")
	require.Equal(t, first.TxHash, a.res.TxHash, "the answer is the relay that moved the value")
	require.True(t, a.res.Replayed)
	require.NotNil(t, a.res.Payment)
	require.Equal(t, 1, e.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).CountX(ctx))
	for _, r := range e.relaysOf(t, payer.addr) {
		require.NotEqual(t, relay.StatusReverted, r.Status, "the duplicate's revert is not the payer's")
	}
}
