package agentpay

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent/idempotencykey"
	"agentpay/ent/payment"
	"agentpay/x402"
)

// TestX402Reason: refusals of a payment are named as x402 names them;
// anything else is no refusal (an internal error stays an error).
func TestX402Reason(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{Invalid("signature", "bad"), "invalid_exact_evm_payload_signature"},
		{Invalid("authorization.value", "short"), "invalid_exact_evm_payload_authorization_value"},
		{Invalid("paymentPayload.payload.authorization.value", "x"), "invalid_exact_evm_payload_authorization_value"},
		{Invalid("authorization.to", "x"), "invalid_exact_evm_payload_recipient_mismatch"},
		{authorizationError(chains.RefusedAuthorization(chains.AuthorizationExpired, "validBefore 1 is past")), "invalid_exact_evm_payload_authorization_valid_before"},
		{authorizationError(chains.RefusedAuthorization(chains.AuthorizationNotYetValid, "validAfter 9 has not passed")), "invalid_exact_evm_payload_authorization_valid_after"},
		{authorizationError(chains.RefusedAuthorization(chains.AuthorizationInsufficient, "short")), "insufficient_funds"},
		{authorizationError(chains.RefusedAuthorization(chains.AuthorizationUsed, "used")), "invalid_payment"},
		{Invalid("network", "x"), "invalid_network"},
		{Invalid("chain", "x"), "invalid_network"},
		{Invalid("scheme", "x"), "unsupported_scheme"},
		{Invalid("x402Version", "x"), "invalid_x402_version"},
		{Invalid("authorization.nonce", "x"), "invalid_payload"},
		{fmt.Errorf("%w: session paid", ErrConflict), "invalid_payment"},
	} {
		got, ok := X402Reason(tc.err)
		require.True(t, ok, "%v", tc.err)
		require.Equal(t, tc.reason, got, "%v", tc.err)
	}
	_, ok := X402Reason(fmt.Errorf("database down"))
	require.False(t, ok)
}

// TestDecodeX402Payment: X-PAYMENT is base64 (standard or URL-safe) of
// the payload's JSON, bounded; anything else is a ValidationError.
func TestDecodeX402Payment(t *testing.T) {
	payload := `{"x402Version":1,"scheme":"exact","network":"base-sepolia","payload":{"signature":"0xab","authorization":{"from":"0x1","to":"0x2","value":"5","validAfter":"0","validBefore":"9","nonce":"0x3"}}}`
	for _, enc := range []string{base64.StdEncoding.EncodeToString([]byte(payload)), base64.RawURLEncoding.EncodeToString([]byte(payload))} {
		p, err := DecodeX402Payment(enc)
		require.NoError(t, err)
		require.Equal(t, "base-sepolia", p.Network)
		require.Equal(t, "5", p.Payload.Authorization.Value)
		req, err := x402RequestV1(p, "cs_test_x", ModeTest)
		require.NoError(t, err)
		require.Equal(t, "base", req.Chain)
		require.Equal(t, "0xab", req.Authorization.Signature)
		_, err = x402RequestV1(p, "cs_live_x", ModeLive)
		require.True(t, IsValidation(err), "base-sepolia is no live network")
	}
	for _, bad := range []string{"!!", base64.StdEncoding.EncodeToString([]byte("[1]")), strings.Repeat("A", x402.MaxHeaderBytes+1)} {
		_, err := DecodeX402Payment(bad)
		require.True(t, IsValidation(err), "%q: %v", bad[:2], err)
	}
}

// x402V2Payload is a v2 payment payload paying the session's base
// deposit address with auth under the payment-identifier id.
func x402V2Payload(auth TransferAuthorization, id string) *x402.PaymentPayload {
	p := &x402.PaymentPayload{X402Version: 2, Accepted: x402.Requirements{
		Scheme: "exact", Network: "eip155:84532", Amount: auth.Value, PayTo: auth.To, MaxTimeoutSeconds: 120,
	}}
	p.Payload.Signature = auth.Signature
	p.Payload.Authorization = x402.Authorization{From: auth.From, To: auth.To, Value: auth.Value,
		ValidAfter: auth.ValidAfter, ValidBefore: auth.ValidBefore, Nonce: auth.Nonce}
	p.Extensions = &x402.Extensions{PaymentIdentifier: &x402.PaymentIdentifier{}}
	p.Extensions.PaymentIdentifier.Info.ID = id
	return p
}

// TestX402PaymentIdentifierCrashAfterBroadcast: instance A claims a
// payment-identifier, keeps its authorization, broadcasts it and dies
// before answering. The client retries on instance B, signing again (a new
// nonce) under the same id: while A's claim holds, B answers pending or
// A's payment and relays nothing; once A's lease has run out, B takes the
// claim over and answers A's transaction, replayed. One transfer on chain,
// one payment, one payment.detected; B's authorizations stay unused.
func TestX402PaymentIdentifierCrashAfterBroadcast(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	b := newTestService(t, e.env, Config{AgentMode: ModeTest}) // instance B
	payer := e.relayPayer(t, 5_000_000)
	sess := e.session(t, "2.50", false)
	payTo := e.depositAddress(t, sess)
	d := e.tokenDomain(t)
	now := time.Now().Unix()
	const id = "pay_crash_0123456789abcdef"
	first := signTransferAuthorization(t, payer.key, d, payTo, 2_500_000, now-600, now+3600)

	// Instance A: the claim, the kept authorization, the broadcast; then
	// nothing (it died).
	claim, prior, err := e.svc.idem.Claim(ctx, x402IDRequest(sess, id, "eip155:84532", first))
	require.NoError(t, err)
	require.Nil(t, prior)
	require.NoError(t, claim.Hold(ctx, &x402PaymentAnswer{Chain: "base", Authorization: first}))
	parsed, err := first.parse()
	require.NoError(t, err)
	sub, err := e.env.Ledger(chains.Base).(chains.AuthorizationRelayer).RelayAuthorization(ctx, parsed)
	require.NoError(t, err)

	// B, while A's lease holds: A's payment or pending, nothing relayed.
	retry := signTransferAuthorization(t, payer.key, d, payTo, 2_500_000, now-600, now+3600)
	res, _, err := b.PayX402V2(ctx, sess.ExternalID, "", x402V2Payload(retry, id))
	require.NoError(t, err)
	require.True(t, res.Replayed)
	if res.Status == "pending" {
		require.Contains(t, []string{"", sub.TxHash}, res.TxHash)
	} else {
		require.Equal(t, sub.TxHash, res.TxHash)
	}

	// A's lease runs out; B's next retry takes the claim over.
	_, err = e.env.Ledger(chains.Base).Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	e.db.Ent.IdempotencyKey.UpdateOneID(claim.ID()).SetLockedUntil(time.Now().Add(-time.Second).UTC()).ExecX(ctx)
	again := signTransferAuthorization(t, payer.key, d, payTo, 2_500_000, now-600, now+3600)
	res, settled, err := b.PayX402V2(ctx, sess.ExternalID, "", x402V2Payload(again, id))
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, sub.TxHash, res.TxHash)
	require.NotNil(t, res.Payment)
	require.Equal(t, &x402.SettleResponse{Success: true, Transaction: sub.TxHash, Network: "eip155:84532", Payer: payer.addr}, settled)

	require.Equal(t, int64(2_500_000), e.env.Balance(t, chains.Base, payer.addr).Int64(), "one transfer")
	require.Equal(t, 1, e.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).CountX(ctx))
	require.Equal(t, 1, count(e.eventTypes(t, sess), EventPaymentDetected))
	for _, a := range []TransferAuthorization{retry, again} {
		p, err := a.parse()
		require.NoError(t, err)
		require.NoError(t, e.env.Ledger(chains.Base).(chains.AuthorizationRelayer).VerifyAuthorization(ctx, p), "the retry's own authorization was never used")
	}
	row := e.db.Ent.IdempotencyKey.GetX(ctx, claim.ID())
	require.Equal(t, idempotencykey.StateDone, row.State)

	// The same id for another amount of the session is another payment.
	other := signTransferAuthorization(t, payer.key, d, payTo, 2_400_000, now-600, now+3600)
	_, _, err = b.PayX402V2(ctx, sess.ExternalID, "", x402V2Payload(other, id))
	require.ErrorIs(t, err, ErrConflict)
}

// TestX402V2Envelope: a v2 payload is taken only as version 2 of the
// exact scheme on the mode's CAIP-2 network, keeping to the requirement
// it accepted, with a well-formed payment-identifier when it has one.
func TestX402V2Envelope(t *testing.T) {
	auth := TransferAuthorization{From: "0x" + strings.Repeat("ab", 20), To: "0x" + strings.Repeat("cd", 20), Value: "5",
		ValidAfter: "0", ValidBefore: "9", Nonce: "0x" + strings.Repeat("11", 32), Signature: "0x" + strings.Repeat("22", 65)}
	for _, tc := range []struct {
		name  string
		mode  Mode
		edit  func(*x402.PaymentPayload)
		chain string // "" refused, naming field
		field string
	}{
		{"base sepolia", ModeTest, func(*x402.PaymentPayload) {}, "base", ""},
		{"base live", ModeLive, func(p *x402.PaymentPayload) { p.Accepted.Network = "eip155:8453" }, "base", ""},
		{"arbitrum sepolia", ModeTest, func(p *x402.PaymentPayload) { p.Accepted.Network = "eip155:421614" }, "arbitrum", ""},
		{"polygon amoy", ModeTest, func(p *x402.PaymentPayload) { p.Accepted.Network = "eip155:80002" }, "polygon", ""},
		{"live network in test", ModeTest, func(p *x402.PaymentPayload) { p.Accepted.Network = "eip155:8453" }, "", "accepted.network"},
		{"v1 name", ModeTest, func(p *x402.PaymentPayload) { p.Accepted.Network = "base-sepolia" }, "", "accepted.network"},
		{"leading zero", ModeTest, func(p *x402.PaymentPayload) { p.Accepted.Network = "eip155:084532" }, "", "accepted.network"},
		{"solana", ModeTest, func(p *x402.PaymentPayload) { p.Accepted.Network = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1" }, "", "accepted.network"},
		{"version 1", ModeTest, func(p *x402.PaymentPayload) { p.X402Version = 1 }, "", "x402Version"},
		{"upto", ModeTest, func(p *x402.PaymentPayload) { p.Accepted.Scheme = "upto" }, "", "accepted.scheme"},
		{"permit2", ModeTest, func(p *x402.PaymentPayload) { p.Accepted.Extra.AssetTransferMethod = "permit2" }, "", "accepted.extra.assetTransferMethod"},
		{"amount", ModeTest, func(p *x402.PaymentPayload) { p.Accepted.Amount = "6" }, "", "authorization.value"},
		{"payTo", ModeTest, func(p *x402.PaymentPayload) { p.Accepted.PayTo = "0x" + strings.Repeat("ef", 20) }, "", "authorization.to"},
		{"id too short", ModeTest, func(p *x402.PaymentPayload) { p.Extensions.PaymentIdentifier.Info.ID = "pay_short" }, "", "extensions.payment-identifier.info.id"},
		{"id with a dot", ModeTest, func(p *x402.PaymentPayload) { p.Extensions.PaymentIdentifier.Info.ID = "pay.0123456789abcdef" }, "", "extensions.payment-identifier.info.id"},
		{"no id", ModeTest, func(p *x402.PaymentPayload) { p.Extensions = nil }, "base", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := x402V2Payload(auth, "pay_0123456789abcdef")
			tc.edit(p)
			req, err := x402RequestV2(p, "cs_x", tc.mode)
			if tc.chain == "" {
				var verr *ValidationError
				require.ErrorAs(t, err, &verr)
				require.Equal(t, tc.field, verr.Field)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.chain, req.Chain)
			require.Equal(t, auth.Signature, req.Authorization.Signature)
		})
	}
}
