package rest

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	solanago "github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/payment"
	"agentpay/ent/webhookevent"
	"agentpay/internal/testenv"
	"agentpay/x402"
)

// x402SolanaDevnet is Solana devnet's CAIP-2 network, what test mode
// offers (x402 clients know Solana's clusters by it).
const x402SolanaDevnet = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"

// x402SolanaAPI is an API whose test mode has the Solana devnet only.
func x402SolanaAPI(t *testing.T) *testAPI {
	t.Helper()
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Solana}, Confirmations: map[chains.Name]uint64{chains.Solana: 4}, Jobs: true,
	})
	return newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest}})
}

// solanaPayer is a devnet wallet funded with units of USDC and no SOL.
func solanaPayer(t testing.TB, api *testAPI, units int64) solanago.PrivateKey {
	t.Helper()
	key, err := solanago.NewRandomPrivateKey()
	require.NoError(t, err)
	api.Env.Fund(t, chains.Solana, key.PublicKey().String(), units)
	require.Zero(t, solanaLamports(t, api, key.PublicKey()), "the payer holds no SOL")
	return key
}

func solanaLamports(t testing.TB, api *testAPI, pk solanago.PublicKey) uint64 {
	t.Helper()
	b, err := api.Env.Solana().Client().GetBalance(context.Background(), pk, rpc.CommitmentConfirmed)
	require.NoError(t, err)
	return b.Value
}

// runX402SVMClient runs pay.mjs paying as the Solana wallet key with
// @x402/svm against the devnet's RPC.
func runX402SVMClient(t testing.TB, api *testAPI, key solanago.PrivateKey, env ...string) map[string]any {
	t.Helper()
	node, dir := x402V2Client(t)
	if _, err := os.Stat(dir + "/node_modules/@x402/svm"); err != nil {
		t.Fatalf("%s has no @x402/svm: run make deps (npm ci there)", dir)
	}
	cmd := exec.Command(node, "pay.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append(env,
		"SOLANA_PAYER_KEY="+hex.EncodeToString(key), "SOLANA_RPC_URL="+api.Env.Solana().RPCURL)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node pay.mjs: %s", stderr.String())
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	return got
}

// TestX402SolanaNodeClient: @x402/fetch with @x402/svm 2.27.0 under node
// pays a session on the Solana devnet from a wallet holding USDC and no
// SOL. The 402 offers Solana devnet's network with the treasury as
// extra.feePayer and the session as memo; the payer signs, agentpay
// co-signs as fee payer and submits: the session is paid once, the payer
// paid no fee, the treasury did. A payment-identifier makes a re-signed
// retry the first payment, and the facilitator's supported, verify and
// settle take the Solana payload.
func TestX402SolanaNodeClient(t *testing.T) {
	x402V2Client(t)
	api := x402SolanaAPI(t)
	m := api.registerMerchant(nil)
	treasury := solanagoKey(t, api.Env.Ledger(chains.Solana).(chains.ExactSettler).FeePayer())

	t.Run("session", func(t *testing.T) {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 1.25, "currency": "USD"})
		id := sess.Session.ExternalID
		payer := solanaPayer(t, api, 10_000_000)
		treasuryBefore := solanaLamports(t, api, treasury)
		got := runX402SVMClient(t, api, payer, "X402_MODE=session",
			"SESSION_URL="+api.Server.URL+"/checkout/pay/"+id+"/x402")
		require.Equal(t, float64(402), got["challengeStatus"])
		challenge := got["challenge"].(map[string]any)
		accepts := challenge["accepts"].([]any)
		require.Len(t, accepts, 1)
		offer := accepts[0].(map[string]any)
		require.Equal(t, x402SolanaDevnet, offer["network"])
		require.Equal(t, "1250000", offer["amount"])
		require.Equal(t, api.Env.Solana().Mint.String(), offer["asset"])
		require.Equal(t, map[string]any{"feePayer": treasury.String(), "memo": id}, offer["extra"])

		require.Equal(t, float64(200), got["status"], "%v", got)
		body := got["body"].(map[string]any)
		require.Equal(t, "detected", body["status"], "%v", body)
		require.Equal(t, 1.25, body["amount_usd"])
		require.Equal(t, payer.PublicKey().String(), body["payer"])
		pr := got["paymentResponse"].(map[string]any)
		require.Equal(t, true, pr["success"])
		require.Equal(t, x402SolanaDevnet, pr["network"])
		require.Equal(t, body["tx_hash"], pr["transaction"])
		require.Equal(t, payer.PublicKey().String(), pr["payer"])

		require.Equal(t, int64(8_750_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64())
		require.Equal(t, int64(1_250_000), api.Env.Balance(t, chains.Solana, offer["payTo"].(string)).Int64())
		require.Zero(t, solanaLamports(t, api, payer.PublicKey()), "the payer paid no fee")
		require.Less(t, solanaLamports(t, api, treasury), treasuryBefore, "the treasury paid the fee")
		tx, err := api.Env.Solana().Client().GetTransaction(context.Background(),
			solanago.MustSignatureFromBase58(pr["transaction"].(string)), &rpc.GetTransactionOpts{Commitment: rpc.CommitmentConfirmed, MaxSupportedTransactionVersion: new(uint64)})
		require.NoError(t, err)
		parsed, err := tx.Transaction.GetTransaction()
		require.NoError(t, err)
		require.Equal(t, treasury, parsed.Message.AccountKeys[0], "the treasury is the fee payer")
		require.Positive(t, tx.Meta.Fee)

		n, err := api.Env.DB.Ent.Payment.Query().Where(payment.TxHash(pr["transaction"].(string))).Count(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n, "one payment recorded")
		cs, err := api.Env.DB.Ent.CheckoutSession.Query().Where(checkoutsession.ExternalID(id)).Only(context.Background())
		require.NoError(t, err)
		detected, err := api.Env.DB.Ent.WebhookEvent.Query().Where(webhookevent.SessionID(cs.ID), webhookevent.EventType("payment.detected")).Count(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, detected, "one payment.detected webhook")
		st := api.do(http.MethodGet, "/checkout/sessions/"+id, nil, m.test())
		require.Contains(t, string(st.Body), `"status":"confirming"`)

		// Paying the paid session again is refused, nothing moved.
		again := runX402SVMClient(t, api, payer, "X402_MODE=session",
			"SESSION_URL="+api.Server.URL+"/checkout/pay/"+id+"/x402")
		require.NotEqual(t, float64(200), again["status"], "%v", again)
		require.Equal(t, int64(8_750_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64())

		// Refunded through the one refunds API, to the wallet that signed
		// the transfer by default (not the treasury that paid the fee).
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := api.Svc.ScanDeposits(context.Background(), agentpay.ModeTest, chains.Solana)
			require.NoError(t, err)
			var got sessionEnvelope
			api.do(http.MethodGet, "/checkout/sessions/"+id, nil, m.test()).JSON(t, &got)
			if got.Session.Status == string(checkoutsession.StatusConfirmed) {
				break
			}
			require.True(t, time.Now().Before(deadline), "session %s still %s", id, got.Session.Status)
			time.Sleep(100 * time.Millisecond)
		}
		resp := api.do(http.MethodPost, "/checkout/sessions/"+id+"/refunds", map[string]any{"amount_usd": 0.5},
			http.Header{"X-Checkout-Secret-Key": {m.TestSecret}, "Idempotency-Key": {"x402-svm-refund-" + id}})
		require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
		var refund refundBody
		resp.JSON(t, &refund)
		require.Equal(t, payer.PublicKey().String(), refund.ToAddress, "an x402 payment is refunded to the payer's address")
		require.Equal(t, body["payment_id"], refund.PaymentID)
		api.Env.Fund(t, chains.Solana, api.Env.Treasury.Address(chains.Solana), 10_000_000)
		pending, err := api.Svc.PendingRefunds(context.Background(), 0, 10)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		var last error
		require.Eventually(t, func() bool {
			res, err := api.Svc.SendRefund(context.Background(), pending[0])
			last = err
			return err == nil && res.Done
		}, 30*time.Second, 250*time.Millisecond, "the refund is sent: %v", &last)
		require.Equal(t, int64(9_250_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "half a dollar back to the payer")
	})

	t.Run("payment-identifier", func(t *testing.T) {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 2, "currency": "USD"})
		payer := solanaPayer(t, api, 10_000_000)
		got := runX402SVMClient(t, api, payer, "X402_MODE=retry", "PAYMENT_ID=pay_svm_retry_0123456789",
			"SESSION_URL="+api.Server.URL+"/checkout/pay/"+sess.Session.ExternalID+"/x402")
		require.Equal(t, []any{"pay_svm_retry_0123456789", "pay_svm_retry_0123456789"}, got["ids"])
		first, retry, again := got["first"].(map[string]any), got["retry"].(map[string]any), got["again"].(map[string]any)
		require.Equal(t, float64(200), first["status"], "%v", got)
		tx := first["body"].(map[string]any)["tx_hash"]
		require.Equal(t, float64(200), retry["status"], "%v", got)
		rb := retry["body"].(map[string]any)
		t.Logf("the retry sent while the first was settled answered %v %v", rb["status"], rb["tx_hash"])
		require.Equal(t, tx, rb["tx_hash"], "%v", got)
		require.Equal(t, float64(200), again["status"], "%v", got)
		require.Equal(t, tx, again["body"].(map[string]any)["tx_hash"])
		require.Equal(t, true, again["body"].(map[string]any)["replayed"])
		require.Equal(t, int64(8_000_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "one transfer")
	})

	t.Run("facilitator", func(t *testing.T) {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 2, "currency": "USD"})
		payer := solanaPayer(t, api, 10_000_000)
		got := runX402SVMClient(t, api, payer, "X402_MODE=facilitator",
			"SESSION_URL="+api.Server.URL+"/checkout/pay/"+sess.Session.ExternalID+"/x402",
			"FACILITATOR_URL="+api.Server.URL+"/x402", "SECRET_KEY="+m.TestSecret)
		supported := got["supported"].(map[string]any)
		require.Contains(t, supported["kinds"], map[string]any{"x402Version": float64(2), "scheme": "exact", "network": x402SolanaDevnet,
			"extra": map[string]any{"feePayer": treasury.String()}})
		require.Equal(t, map[string]any{"solana:*": []any{treasury.String()}}, supported["signers"])
		require.Equal(t, true, got["verify"].(map[string]any)["isValid"], "%v", got)
		require.Equal(t, payer.PublicKey().String(), got["verify"].(map[string]any)["payer"])
		settle := got["settle"].(map[string]any)
		require.Equal(t, true, settle["success"], "%v", got)
		require.Equal(t, x402SolanaDevnet, settle["network"])
		require.Equal(t, settle["transaction"], got["settleAgain"].(map[string]any)["transaction"])
		require.Equal(t, int64(8_000_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64())
	})
}

func solanagoKey(t *testing.T, s string) solanago.PublicKey {
	t.Helper()
	pk, err := solanago.PublicKeyFromBase58(s)
	require.NoError(t, err)
	return pk
}

// TestX402SolanaRefusals: a Solana payload that strays from what the 402
// asked is answered 402 with x402's reason in PAYMENT-RESPONSE, nothing
// signed by the treasury, nothing moved.
func TestX402SolanaRefusals(t *testing.T) {
	api := x402SolanaAPI(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 3, "currency": "USD"})
	path := "/checkout/pay/" + sess.Session.ExternalID + "/x402"
	resp := api.x402Do(http.MethodGet, path, nil, nil)
	pr := paymentRequired(t, resp.Header)
	require.Len(t, pr.Accepts, 1)
	req := pr.Accepts[0]
	require.Equal(t, x402SolanaDevnet, req.Network)
	payer := solanaPayer(t, api, 5_000_000)

	send := func(transaction string, accepted x402.Requirements) apiResponse {
		payload := map[string]any{"x402Version": 2, "accepted": accepted, "payload": map[string]any{"transaction": transaction}}
		raw, _ := json.Marshal(payload)
		return api.x402Do(http.MethodGet, path, nil, http.Header{"Payment-Signature": {base64.StdEncoding.EncodeToString(raw)}})
	}
	resp = send("AAAA", req)
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	require.Equal(t, "invalid_exact_svm_payload_transaction_could_not_be_decoded", paymentResponse(t, resp.Header).ErrorReason)

	// A refusal of a transaction that decodes names its payer (the
	// transfer's authority), as an EVM refusal names the authorization's.
	resp = send(exactSolanaTx(t, api, payer, req, 2_999_999), req)
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	refused := paymentResponse(t, resp.Header)
	require.Equal(t, "invalid_exact_svm_payload_amount_mismatch", refused.ErrorReason)
	require.Equal(t, payer.PublicKey().String(), refused.Payer)
	require.Equal(t, x402SolanaDevnet, refused.Network)

	other := req
	other.Network = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"
	resp = send("AAAA", other)
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	require.Equal(t, "invalid_network", paymentResponse(t, resp.Header).ErrorReason)
	require.Equal(t, int64(5_000_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64())

	// A canceled session that was never offered on Solana: refused for
	// its state, and no deposit address is made for it.
	canceled, _ := api.createSession(m.test(), map[string]any{"amount": 3, "currency": "USD"})
	resp = api.do(http.MethodPost, "/checkout/sessions/"+canceled.Session.ExternalID+"/cancel", nil, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	raw, _ := json.Marshal(map[string]any{"x402Version": 2, "accepted": req, "payload": map[string]any{"transaction": exactSolanaTx(t, api, payer, req, 3_000_000)}})
	resp = api.x402Do(http.MethodGet, "/checkout/pay/"+canceled.Session.ExternalID+"/x402", nil,
		http.Header{"Payment-Signature": {base64.StdEncoding.EncodeToString(raw)}})
	require.Equal(t, http.StatusConflict, resp.Status, string(resp.Body))
	cs, err := api.Env.DB.Ent.CheckoutSession.Query().Where(checkoutsession.ExternalID(canceled.Session.ExternalID)).Only(context.Background())
	require.NoError(t, err)
	n, err := api.Env.DB.Ent.DepositAddress.Query().Where(depositaddress.SessionID(cs.ID)).Count(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
}

// exactSolanaTx is the transaction @x402/svm's client builds, made in Go:
// compute unit limit and price, TransferChecked of amount from payer's
// token account to payTo's, the memo; the fee payer's signature left
// empty. base64.
func exactSolanaTx(t *testing.T, api *testAPI, payer solanago.PrivateKey, req x402.Requirements, amount uint64) string {
	t.Helper()
	ctx := context.Background()
	mint, feePayer, payTo := solanagoKey(t, req.Asset), solanagoKey(t, req.Extra.FeePayer), solanagoKey(t, req.PayTo)
	src, _, err := solanago.FindAssociatedTokenAddress(payer.PublicKey(), mint)
	require.NoError(t, err)
	dst, _, err := solanago.FindAssociatedTokenAddress(payTo, mint)
	require.NoError(t, err)
	limit := []byte{2, 0x20, 0x4e, 0, 0} // 20,000 units
	price := []byte{3, 1, 0, 0, 0, 0, 0, 0, 0}
	transfer := make([]byte, 10)
	transfer[0] = 12
	binary.LittleEndian.PutUint64(transfer[1:9], amount)
	transfer[9] = 6
	ixs := []solanago.Instruction{
		solanago.NewInstruction(solanago.ComputeBudget, nil, limit),
		solanago.NewInstruction(solanago.ComputeBudget, nil, price),
		solanago.NewInstruction(solanago.TokenProgramID, solanago.AccountMetaSlice{
			solanago.Meta(src).WRITE(), solanago.Meta(mint), solanago.Meta(dst).WRITE(), solanago.Meta(payer.PublicKey()).SIGNER(),
		}, transfer),
		solanago.NewInstruction(solanago.MustPublicKeyFromBase58("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr"), nil, []byte(req.Extra.Memo)),
	}
	bh, err := api.Env.Solana().Client().GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
	require.NoError(t, err)
	tx, err := solanago.NewTransaction(ixs, bh.Value.Blockhash, solanago.TransactionPayer(feePayer))
	require.NoError(t, err)
	msg, err := tx.Message.MarshalBinary()
	require.NoError(t, err)
	sig, err := payer.Sign(msg)
	require.NoError(t, err)
	tx.Signatures = []solanago.Signature{{}, sig}
	raw, err := tx.MarshalBinary()
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(raw)
}

// TestX402SolanaFacilitator: the facilitator's verify refuses a Solana
// payload that strays from the requirements with x402's reasons, nothing
// signed by the treasury; verify then settle a right one pays the
// session once (settled again, the same transaction).
func TestX402SolanaFacilitator(t *testing.T) {
	api := x402SolanaAPI(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 3, "currency": "USD"})
	req := paymentRequired(t, api.x402Do(http.MethodGet, "/checkout/pay/"+sess.Session.ExternalID+"/x402", nil, nil).Header).Accepts[0]
	payer := solanaPayer(t, api, 5_000_000)
	poor := solanaPayer(t, api, 1_000_000)
	body := func(transaction string, accepted x402.Requirements) map[string]any {
		return map[string]any{"x402Version": 2, "paymentRequirements": accepted,
			"paymentPayload": map[string]any{"x402Version": 2, "accepted": accepted, "payload": map[string]any{"transaction": transaction}}}
	}
	memo := req
	memo.Extra.Memo = "cs_test_another"
	otherAmount := req
	otherAmount.Amount = "2000000"
	for _, tc := range []struct {
		name   string
		body   map[string]any
		reason string
		payer  string
	}{
		{"wrong amount", body(exactSolanaTx(t, api, payer, req, 2_999_999), req), "invalid_exact_svm_payload_amount_mismatch", payer.PublicKey().String()},
		{"another memo", body(exactSolanaTx(t, api, payer, memo, 3_000_000), req), "invalid_exact_svm_payload_memo_mismatch", payer.PublicKey().String()},
		{"short of the amount", body(exactSolanaTx(t, api, poor, req, 3_000_000), req), "insufficient_funds", poor.PublicKey().String()},
		{"requirements short of the session", body(exactSolanaTx(t, api, payer, otherAmount, 2_000_000), otherAmount), "invalid_payload", payer.PublicKey().String()},
		{"undecodable", body("AAAA", req), "invalid_exact_svm_payload_transaction_could_not_be_decoded", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, "/x402/verify", tc.body, m.test())
			require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
			require.Equal(t, map[string]any{"isValid": false, "invalidReason": tc.reason, "payer": tc.payer}, resp.Map(t))
			resp = api.do(http.MethodPost, "/x402/settle", tc.body, m.test())
			require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
			require.Equal(t, map[string]any{"success": false, "errorReason": tc.reason, "transaction": "", "network": x402SolanaDevnet, "payer": tc.payer}, resp.Map(t),
				"a refusal tells the payer the signed transaction names")
		})
	}
	require.Equal(t, int64(5_000_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "nothing moved")

	good := body(exactSolanaTx(t, api, payer, req, 3_000_000), req)
	resp := api.do(http.MethodPost, "/x402/verify", good, m.test())
	require.Equal(t, map[string]any{"isValid": true, "payer": payer.PublicKey().String()}, resp.Map(t))
	resp = api.do(http.MethodPost, "/x402/settle", good, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	settled := resp.Map(t)
	require.Equal(t, true, settled["success"], "%v", settled)
	require.Equal(t, x402SolanaDevnet, settled["network"])
	require.Equal(t, payer.PublicKey().String(), settled["payer"])
	again := api.do(http.MethodPost, "/x402/settle", good, m.test())
	require.Equal(t, settled, again.Map(t))
	require.Equal(t, int64(2_000_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "paid once")
	resp = api.do(http.MethodPost, "/x402/verify", good, m.live())
	require.Equal(t, "invalid_network", resp.Map(t)["invalidReason"])
}

// TestX402SolanaRevertedOnChain: a payer-signed transaction the treasury
// co-signed that then failed on chain (here it lands before payTo's token
// account exists, so the transfer errors; the fee is spent) is reported as
// failed wherever it is asked about, never as paid: the session's
// PAYMENT-SIGNATURE answers 402 with PAYMENT-RESPONSE success false and
// the payer, the facilitator's verify answers isValid false and settle
// success false, and the session stays open with no payment.
func TestX402SolanaRevertedOnChain(t *testing.T) {
	ctx := context.Background()
	api := x402SolanaAPI(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 3, "currency": "USD"})
	path := "/checkout/pay/" + sess.Session.ExternalID + "/x402"
	req := paymentRequired(t, api.x402Do(http.MethodGet, path, nil, nil).Header).Accepts[0]
	payer := solanaPayer(t, api, 5_000_000)
	transaction := exactSolanaTx(t, api, payer, req, 3_000_000)

	// The treasury's co-signed transaction, as SettleExact would send it,
	// sent without preflight while payTo has no token account: it lands
	// failed.
	raw, err := base64.StdEncoding.DecodeString(transaction)
	require.NoError(t, err)
	tx, err := solanago.TransactionFromBytes(raw)
	require.NoError(t, err)
	msg, err := tx.Message.MarshalBinary()
	require.NoError(t, err)
	treasury := solanago.PrivateKey(api.Env.Treasury.Key(chains.Solana))
	require.Equal(t, req.Extra.FeePayer, treasury.PublicKey().String())
	tx.Signatures[0], err = treasury.Sign(msg)
	require.NoError(t, err)
	sig, err := api.Env.Solana().Client().SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{SkipPreflight: true})
	require.NoError(t, err)
	rc, err := api.Env.Ledger(chains.Solana).Wait(ctx, sig.String())
	require.NoError(t, err)
	require.Equal(t, chains.TxFailed, rc.State, "the transfer reverted on chain")

	payload, err := json.Marshal(map[string]any{"x402Version": 2, "accepted": req, "payload": map[string]any{"transaction": transaction}})
	require.NoError(t, err)
	resp := api.x402Do(http.MethodGet, path, nil, http.Header{"Payment-Signature": {base64.StdEncoding.EncodeToString(payload)}})
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	settled := paymentResponse(t, resp.Header)
	require.False(t, settled.Success, "%+v", settled)
	require.Equal(t, sig.String(), settled.Transaction)
	require.Equal(t, payer.PublicKey().String(), settled.Payer)
	require.Equal(t, "invalid_transaction_state", settled.ErrorReason)

	facilitator := map[string]any{"x402Version": 2, "paymentRequirements": req,
		"paymentPayload": map[string]any{"x402Version": 2, "accepted": req, "payload": map[string]any{"transaction": transaction}}}
	resp = api.do(http.MethodPost, "/x402/verify", facilitator, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	verified := resp.Map(t)
	require.Equal(t, false, verified["isValid"], "a transaction that failed on chain is no valid payment: %v", verified)
	require.Equal(t, "invalid_transaction_state", verified["invalidReason"])
	require.Equal(t, payer.PublicKey().String(), verified["payer"])
	resp = api.do(http.MethodPost, "/x402/settle", facilitator, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, map[string]any{"success": false, "errorReason": "invalid_transaction_state", "transaction": sig.String(),
		"network": x402SolanaDevnet, "payer": payer.PublicKey().String()}, resp.Map(t))

	cs, err := api.Env.DB.Ent.CheckoutSession.Query().Where(checkoutsession.ExternalID(sess.Session.ExternalID)).Only(ctx)
	require.NoError(t, err)
	require.Equal(t, checkoutsession.StatusPending, cs.Status)
	n, err := api.Env.DB.Ent.Payment.Query().Where(payment.SessionID(cs.ID)).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "no payment recorded")
	require.Equal(t, int64(5_000_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "nothing moved")
}
