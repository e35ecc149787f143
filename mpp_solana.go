package agentpay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"agentpay/ent"
	"agentpay/x402"
)

// MPP's `solana` method, charge intent (draft-solana-charge-00;
// docs/agent-commerce.md, MPP on Solana), beside the `evm` method of
// mpp.go, paid by the npm client @solana/mpp with mppx.
//
// It is x402's exact payment on Solana in MPP's envelope, and settles
// through the same code (x402_svm.go: solanaSessionTarget, paySolanaExact):
// the challenge's request is the session's amount in base units, the USDC
// mint as currency, the session's Solana deposit address as recipient (the
// owner of the token account paid), the session as externalId (the
// client's memo), and methodDetails {network, decimals, tokenProgram,
// feePayer: true, feePayerKey: the treasury}. The payer signs a
// TransferChecked with the treasury as fee payer ("pull mode",
// payload.type "transaction"); the treasury checks it as it checks an x402
// exact payload (only the two compute budget instructions may come in
// either order: the draft fixes none and @solana/mpp puts the price
// first), co-signs, submits it, waits for it and records the payment.
// Push mode (payload.type "signature", the client broadcasting and paying
// its own fee) is refused, as the draft requires when feePayer is true.
//
// Offered only where the draft names the cluster: the node's cluster (by
// its genesis hash, as x402's) must be mainnet-beta (live) or devnet
// (test); a node on testnet is offered over x402 only. The binding,
// expiry, Idempotency-Key and replay rules are the evm method's (mpp.go):
// the same transaction again is the same payment (its id is the
// treasury's deterministic signature); under an Idempotency-Key a
// re-signed retry is answered the first payment, the key shared with
// x402's payment-identifier (the fingerprint's network is the CAIP-2
// name); past expiry only a payment already made is answered.

// MPPMethodSolana is the solana method's name.
const MPPMethodSolana = "solana"

// MPPSolanaTransaction is the one solana credential type taken: the
// payer-signed transaction the treasury co-signs as fee payer.
const MPPSolanaTransaction = "transaction"

// mppSolanaTokenProgram is the classic SPL token program, the one the
// exact layout takes (chains/solana/exact.go) and USDC's.
const mppSolanaTokenProgram = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"

// mppSolanaClusters names the clusters x402 names by CAIP-2 as the draft
// does; the draft has no name for testnet.
var mppSolanaClusters = map[string]string{
	x402.SolanaMainnet: "mainnet-beta",
	x402.SolanaDevnet:  "devnet",
}

// MPPSolanaChargeRequest is the solana charge request a challenge's
// request parameter encodes (JCS: fields in key order).
type MPPSolanaChargeRequest struct {
	Amount        string                 `json:"amount"`
	Currency      string                 `json:"currency"`
	Description   string                 `json:"description,omitempty"`
	ExternalID    string                 `json:"externalId,omitempty"`
	MethodDetails MPPSolanaMethodDetails `json:"methodDetails"`
	Recipient     string                 `json:"recipient"`
}

// MPPSolanaMethodDetails are the solana method's details (key order).
type MPPSolanaMethodDetails struct {
	Decimals     int    `json:"decimals"`
	FeePayer     bool   `json:"feePayer"`
	FeePayerKey  string `json:"feePayerKey"`
	Network      string `json:"network"`
	TokenProgram string `json:"tokenProgram"`
}

// mppSolanaRequest is the session's solana charge request, when Solana is
// offered for it (nil otherwise).
func (s *Service) mppSolanaRequest(ctx context.Context, sess *ent.CheckoutSession) (*MPPSolanaChargeRequest, error) {
	offer, err := s.x402SolanaOffer(ctx, sess)
	if err != nil || offer == nil {
		return nil, err
	}
	cluster, ok := mppSolanaClusters[offer.Network]
	if !ok {
		return nil, nil
	}
	_, ledger, _, _ := s.x402SolanaSettler(sessionMode(sess))
	return &MPPSolanaChargeRequest{
		Amount: offer.Amount, Currency: offer.Asset, ExternalID: sess.ExternalID, Recipient: offer.PayTo,
		MethodDetails: MPPSolanaMethodDetails{
			Decimals: int(ledger.Decimals()), FeePayer: true, FeePayerKey: offer.Extra.FeePayer,
			Network: cluster, TokenProgram: mppSolanaTokenProgram,
		},
	}, nil
}

// mppSolanaChallenge is the session's solana challenge in realm, when
// Solana is offered for it.
func (s *Service) mppSolanaChallenge(ctx context.Context, sess *ent.CheckoutSession, realm, expires string) (*MPPChallenge, error) {
	req, err := s.mppSolanaRequest(ctx, sess)
	if err != nil || req == nil {
		return nil, err
	}
	raw, err := canonicalJSON(req)
	if err != nil {
		return nil, fmt.Errorf("mpp: encoding request: %w", err)
	}
	c := MPPChallenge{
		Realm: realm, Method: MPPMethodSolana, Intent: MPPIntent,
		Request: base64.RawURLEncoding.EncodeToString(raw), Expires: expires,
	}
	c.ID = mppChallengeID(s.cfg.Vault.ChallengeKey(), c)
	return &c, nil
}

// payMPPSolana settles a solana credential for sess, whose challenge id
// has been checked to bind its parameters for this realm (PayMPP).
func (s *Service) payMPPSolana(ctx context.Context, sess *ent.CheckoutSession, clientIP, key string, c *MPPCredential) (*AuthorizedPayment, *MPPReceipt, error) {
	ch := c.Challenge
	if ch.Intent != MPPIntent {
		return nil, nil, mppRefusal(MPPInvalidChallenge, ch.ID, "only intent %q is offered", MPPIntent)
	}
	var req MPPSolanaChargeRequest
	raw, err := base64.RawURLEncoding.DecodeString(ch.Request)
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err != nil || req.ExternalID != sess.ExternalID {
		return nil, nil, mppRefusal(MPPInvalidChallenge, ch.ID, "the challenge is not for checkout session %s", sess.ExternalID)
	}
	expires, err := time.Parse(time.RFC3339, ch.Expires)
	if err != nil {
		return nil, nil, mppRefusal(MPPInvalidChallenge, ch.ID, "the challenge has no valid expires")
	}
	// What the session asks now: a challenge issued for anything else
	// (another cluster, the address before a reallocation) is not taken.
	st, err := s.solanaSessionTarget(ctx, sess)
	if IsValidation(err) {
		return nil, nil, mppRefusal(MPPInvalidChallenge, ch.ID, "method %q is not offered for this session: %v", MPPMethodSolana, err)
	}
	if err != nil {
		return nil, nil, err
	}
	cluster := mppSolanaClusters[st.network]
	if req.MethodDetails.Network != cluster || req.Recipient != st.req.PayTo || req.Amount != st.req.Amount.String() ||
		req.Currency != st.t.ledger.Token() || !req.MethodDetails.FeePayer || req.MethodDetails.FeePayerKey != st.settler.FeePayer() {
		return nil, nil, mppRefusal(MPPInvalidChallenge, ch.ID, "the challenge is not what the session asks now (network, recipient, amount, currency or fee payer); ask again")
	}
	st.req.AnyComputeOrder = true
	p := c.Payload
	if p.Type != MPPSolanaTransaction {
		return nil, nil, mppRefusal(MPPVerificationFailed, ch.ID,
			"payload.type must be %q (the payer-signed transaction the service co-signs as fee payer), not %q: the challenge's feePayer is true", MPPSolanaTransaction, p.Type)
	}
	if p.Transaction == "" {
		return nil, nil, mppRefusal(MPPVerificationFailed, ch.ID, "payload.transaction is required: the payer-signed transaction, base64")
	}
	var expired error
	if !s.now().Before(expires) {
		expired = mppRefusal(MPPPaymentExpired, ch.ID, "the challenge expired at %s", ch.Expires)
	}
	var name *sessionPaymentKey
	if key != "" {
		k := idempotencyKeyName(key)
		name = &k
	}
	res, err := s.paySolanaExact(ctx, st, clientIP, p.Transaction, name, key, expired, func(payer string) error {
		return mppSolanaSource(c.Source, st.network, payer, ch.ID)
	})
	if err != nil {
		return nil, nil, mppPaymentError(ch.ID, err)
	}
	if res.Status == "failed" {
		return res, nil, mppRefusal(MPPVerificationFailed, ch.ID,
			"transaction %s failed on chain: nothing was paid; sign a new payment", res.TxHash)
	}
	if res.Payment == nil {
		return res, nil, nil // pending: no receipt before inclusion
	}
	return res, &MPPReceipt{
		Method: MPPMethodSolana, ChallengeID: ch.ID, Reference: res.TxHash, Status: "success",
		Timestamp: res.Payment.CreatedAt.UTC().Format(time.RFC3339), ExternalID: sess.ExternalID,
	}, nil
}

// mppSolanaSource checks a credential's source, when it names one, against
// the payer, the transaction's transfer authority: the draft lets a Solana
// credential name its payer by its base58 public key or a DID (the core
// draft's did:pkh, whose CAIP-10 account on Solana is the cluster's CAIP-2
// name and the address: did:pkh:solana:<genesis hash prefix>:<address>). A
// source naming anyone else, or another cluster, is verification-failed,
// as the evm method refuses a source other than its authorization's from:
// a credential that says one payer and carries another's signed transfer
// is not taken (what the service records as the payer, and refunds to,
// is the transfer's authority either way).
func mppSolanaSource(source, network, payer, challengeID string) error {
	if source == "" {
		return nil
	}
	did := "did:pkh:" + network + ":"
	if source == payer || source == did+payer {
		return nil
	}
	return mppRefusal(MPPVerificationFailed, challengeID,
		"source must be the payer that signed the transfer, %s or %s%s, not %q", payer, did, payer, source)
}
