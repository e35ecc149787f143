package rest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	solanago "github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/x402"
)

// runMPPSolanaClient runs pay.mjs paying url as the Solana wallet key with
// mppx 0.11.0 and @solana/mpp 0.6.0's charge client against the devnet's
// RPC.
func runMPPSolanaClient(t testing.TB, api *testAPI, url string, key solanago.PrivateKey, env ...string) map[string]any {
	t.Helper()
	node, dir := mppNodeDir(t)
	if _, err := os.Stat(dir + "/node_modules/@solana/mpp"); err != nil {
		t.Fatalf("%s has no @solana/mpp: run make deps (npm ci there)", dir)
	}
	cmd := exec.Command(node, "pay.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append(env, "SESSION_URL="+url,
		"SOLANA_PAYER_KEY="+hex.EncodeToString(key), "SOLANA_RPC_URL="+api.Env.Solana().RPCURL)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node pay.mjs: %s", stderr.String())
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	return got
}

// mppSolanaChallenge is the solana challenge of a 402's WWW-Authenticate,
// its request decoded.
func mppSolanaChallenge(t *testing.T, h http.Header) map[string]any {
	t.Helper()
	for _, v := range h.Values("WWW-Authenticate") {
		if !strings.Contains(v, `method="solana"`) {
			continue
		}
		_, after, ok := strings.Cut(v, `request="`)
		require.True(t, ok, v)
		raw, err := base64.RawURLEncoding.DecodeString(after[:strings.IndexByte(after, '"')])
		require.NoError(t, err)
		var req map[string]any
		require.NoError(t, json.Unmarshal(raw, &req))
		return req
	}
	t.Fatalf("no solana challenge in %v", h.Values("WWW-Authenticate"))
	return nil
}

// TestMPPSolanaNodeClient: mppx 0.11.0 with @solana/mpp 0.6.0's solana
// charge client (npm, testdata/mppclient) under node pays a session on
// the Solana devnet (LiteSVM) by its MPP challenge of method solana, from
// a wallet holding USDC and no SOL: the client signs a TransferChecked
// with the treasury as fee payer, agentpay co-signs and submits it; the
// answer is 200 with a Payment-Receipt naming the transaction, the payer
// paid no fee, one payment is recorded. The same credential again is the
// same payment; under an Idempotency-Key a re-signed credential is
// answered the first payment, and without one it is refused (409).
func TestMPPSolanaNodeClient(t *testing.T) {
	mppNodeDir(t)
	api := x402SolanaAPI(t)
	m := api.registerMerchant(nil)
	treasury := solanagoKey(t, api.Env.Ledger(chains.Solana).(chains.ExactSettler).FeePayer())

	t.Run("session", func(t *testing.T) {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 1.25, "currency": "USD"})
		id := sess.Session.ExternalID
		path := "/checkout/pay/" + id + "/mpp"
		challenge := api.mppDo(path, nil)
		require.Equal(t, http.StatusPaymentRequired, challenge.Status, string(challenge.Body))
		req := mppSolanaChallenge(t, challenge.Header)
		payTo := req["recipient"].(string)
		require.Equal(t, map[string]any{
			"amount": "1250000", "currency": api.Env.Solana().Mint.String(), "externalId": id, "recipient": payTo,
			"methodDetails": map[string]any{"decimals": float64(6), "feePayer": true, "feePayerKey": treasury.String(),
				"network": "devnet", "tokenProgram": solanago.TokenProgramID.String()},
		}, req)

		payer := solanaPayer(t, api, 10_000_000)
		treasuryBefore := solanaLamports(t, api, treasury)
		got := runMPPSolanaClient(t, api, api.Server.URL+path, payer)
		require.Equal(t, float64(200), got["status"], "%v", got)
		require.Equal(t, float64(1), got["credentials"], "one credential sent")
		body := got["body"].(map[string]any)
		require.Equal(t, "detected", body["status"], "%v", body)
		require.Equal(t, 1.25, body["amount_usd"])
		require.Equal(t, payer.PublicKey().String(), body["payer"])
		rc := got["receipt"].(map[string]any)
		require.Equal(t, "solana", rc["method"])
		require.Equal(t, "success", rc["status"])
		require.Equal(t, body["tx_hash"], rc["reference"])
		replay := got["replay"].(map[string]any)
		require.Equal(t, float64(200), replay["status"], "the same credential again: %v", replay)
		require.Equal(t, true, replay["body"].(map[string]any)["replayed"])
		require.Equal(t, body["tx_hash"], replay["receipt"].(map[string]any)["reference"])

		require.Equal(t, int64(8_750_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "paid once")
		require.Equal(t, int64(1_250_000), api.Env.Balance(t, chains.Solana, payTo).Int64())
		require.Zero(t, solanaLamports(t, api, payer.PublicKey()), "the payer paid no fee")
		require.Less(t, solanaLamports(t, api, treasury), treasuryBefore, "the treasury paid the fee")
		tx, err := api.Env.Solana().Client().GetTransaction(context.Background(),
			solanago.MustSignatureFromBase58(rc["reference"].(string)), &rpc.GetTransactionOpts{Commitment: rpc.CommitmentConfirmed, MaxSupportedTransactionVersion: new(uint64)})
		require.NoError(t, err)
		parsed, err := tx.Transaction.GetTransaction()
		require.NoError(t, err)
		require.Equal(t, treasury, parsed.Message.AccountKeys[0], "the treasury is the fee payer")
		require.Equal(t, 1, sessionPayments(t, api, id))
	})

	t.Run("Idempotency-Key", func(t *testing.T) {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 2, "currency": "USD"})
		path := "/checkout/pay/" + sess.Session.ExternalID + "/mpp"
		payer := solanaPayer(t, api, 10_000_000)
		const idemKey = "mppx-svm-retry-5c1d0e9b7a2f"
		// Signed first and kept: the retry of a client that timed out.
		retry := runMPPSolanaClient(t, api, api.Server.URL+path, payer, "CREDENTIAL_ONLY=1")["credential"].(string)
		got := runMPPSolanaClient(t, api, api.Server.URL+path, payer, "IDEMPOTENCY_KEY="+idemKey, "REPLAY=0")
		require.Equal(t, float64(200), got["status"], "%v", got)
		body := got["body"].(map[string]any)

		resp := api.mppDo(path, http.Header{"Authorization": {retry}, "Idempotency-Key": {idemKey}})
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		again := resp.Map(t)
		require.Equal(t, true, again["replayed"])
		require.Equal(t, body["payment_id"], again["payment_id"])
		require.Equal(t, body["tx_hash"], mppReceiptOf(t, resp.Header).Reference)

		resp = api.mppDo(path, http.Header{"Authorization": {retry}})
		require.Equal(t, http.StatusConflict, resp.Status, "without the key, a second payment of a paid session: %s", resp.Body)
		require.Equal(t, 1, sessionPayments(t, api, sess.Session.ExternalID))
		require.Equal(t, int64(8_000_000), api.Env.Balance(t, chains.Solana, payer.PublicKey().String()).Int64(), "paid once")
	})
}

// withSource is the credential of an Authorization: Payment header with
// its source set to source ("" removes it).
func withSource(t *testing.T, header, source string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(header, "Payment "))
	require.NoError(t, err)
	var cred map[string]any
	require.NoError(t, json.Unmarshal(raw, &cred))
	delete(cred, "source")
	if source != "" {
		cred["source"] = source
	}
	raw, err = json.Marshal(cred)
	require.NoError(t, err)
	return "Payment " + base64.RawURLEncoding.EncodeToString(raw)
}

// TestMPPSolanaSource: a solana credential's source, when it names one, is
// the payer that signed the transfer, as its base58 public key or its
// did:pkh on the session's cluster (draft-solana-charge-00: "MAY use the
// payer's base58-encoded public key or a DID"). The credential is the one
// mppx 0.11.0 with @solana/mpp 0.6.0 made (it sends no source), given a
// source: another wallet, the payer on another cluster, a did:pkh of
// another chain or a bare string are each 402 verification-failed with
// nothing moved; the payer's own DID pays, and the same transaction with
// its bare key is the same payment.
func TestMPPSolanaSource(t *testing.T) {
	mppNodeDir(t)
	api := x402SolanaAPI(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
	id := sess.Session.ExternalID
	path := "/checkout/pay/" + id + "/mpp"
	payer := solanaPayer(t, api, 5_000_000)
	cred := runMPPSolanaClient(t, api, api.Server.URL+path, payer, "CREDENTIAL_ONLY=1")["credential"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(cred, "Payment "))
	require.NoError(t, err)
	require.NotContains(t, string(raw), `"source"`, "@solana/mpp names no source")
	other, err := solanago.NewRandomPrivateKey()
	require.NoError(t, err)
	addr := payer.PublicKey().String()

	for _, tc := range []struct{ name, source string }{
		{"another wallet", other.PublicKey().String()},
		{"another wallet's DID", "did:pkh:" + x402.SolanaDevnet + ":" + other.PublicKey().String()},
		{"the payer on another cluster", "did:pkh:" + x402.SolanaMainnet + ":" + addr},
		{"another chain's DID", "did:pkh:eip155:84532:" + addr},
		{"not an identifier", "payer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.mppDo(path, http.Header{"Authorization": {withSource(t, cred, tc.source)}})
			require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
			var p mppProblem
			resp.JSON(t, &p)
			require.Equal(t, agentpay.MPPProblemBase+"verification-failed", p.Type, string(resp.Body))
			require.Contains(t, p.Detail, "source must be the payer that signed the transfer, "+addr)
			require.Empty(t, resp.Header.Get("Payment-Receipt"))
		})
	}
	require.Equal(t, int64(5_000_000), api.Env.Balance(t, chains.Solana, addr).Int64(), "nothing moved")
	require.Equal(t, 0, sessionPayments(t, api, id))

	resp := api.mppDo(path, http.Header{"Authorization": {withSource(t, cred, "did:pkh:"+x402.SolanaDevnet+":"+addr)}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	body := resp.Map(t)
	require.Equal(t, addr, body["payer"])
	resp = api.mppDo(path, http.Header{"Authorization": {withSource(t, cred, addr)}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, true, resp.Map(t)["replayed"])
	require.Equal(t, 1, sessionPayments(t, api, id))
	require.Equal(t, int64(4_000_000), api.Env.Balance(t, chains.Solana, addr).Int64(), "paid once")
}
