package agentpay

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/sha3"

	"agentpay/chains"
	"agentpay/ent"
)

// MPP (docs/agent-commerce.md, MPP): a checkout session answered in the
// Machine Payments Protocol, the "Payment" HTTP authentication scheme
// (IETF draft-httpauth-payment-00), with the charge intent of the `evm`
// method (draft-evm-charge-00) whose credential is an EIP-3009
// authorization (type "authorization"); and on Solana the `solana`
// method's charge (mpp_solana.go), settled as x402's exact payment.
//
// The challenge: one `WWW-Authenticate: Payment` per EVM chain the
// merchant accepts in the session's mode whose ledger relays
// authorizations, its request the session's exact amount in base units,
// the chain's USDC contract, the session's deposit address there (as a
// selection allocates it), the chain id the node reports, and
// credentialTypes ["authorization"] (USDC implements EIP-3009). The `evm`
// method names the chain by its id, so unlike x402 v1 every EVM chain is
// offered, devnets under their testnet's id.
//
// Binding: the challenge id is the draft's recommended stateless
// HMAC-SHA256 over its seven slots (realm, method, intent, request,
// expires, digest, opaque), under a key derived from the master key
// (vault.ChallengeKey), so any instance verifies what any instance issued
// and no row is written for a challenge (an unpaid request changes
// nothing, as the draft asks). expires is ChallengeTTL after issue; the
// payer's authorization must be valid until the token's time reaches it
// (mppx signs validBefore = expires).
//
// Settling: the credential's echoed challenge must carry the id its
// parameters hash to, for this realm (the Host asked), for this session
// (request.externalId), unexpired; the payload's to, value and nonce
// must be the request's recipient, amount and the challenge hash
// keccak256(id || realm), which binds the signature to this challenge and
// makes the token itself refuse a second use. Then it is an authorization
// like the hosted page's or x402's: PayWithAuthorization
// (checkout_authorized_payments.go) checks the session and deposit address now, the
// signature, window, nonce and balance, the relay rules (checkout_relays.go: the
// payer's relays in flight count against its balance; per-IP and
// per-merchant rates; reverts), relays it and records the payment.
//
// Replays: the same credential again answers the payment it made (the
// nonce is spent on chain; replayAuthorization finds the transfer), with
// the same receipt, even after the challenge expired: a client retrying
// after a timeout learns the outcome and pays once. Nothing else of a
// stale challenge is taken.
//
// Retries with a new credential: a client that timed out asks again, gets
// a fresh challenge and signs a new authorization (a new nonce, which the
// token would move as a second payment). The core draft's answer is the
// Idempotency-Key header; under it the credential is the payment the key
// names (x402_id.go: the key is the session's, shared with x402's
// payment-identifier), so the retry is answered the first payment:
// pending while its relay is in flight, its receipt once included; never
// a second relay. Past expiry a key answers only a payment it made.

// MPPMethod and MPPIntent are the one method and intent offered.
const (
	MPPMethod = "evm"
	MPPIntent = "charge"
	// MPPCredentialType is the one credential type taken: an EIP-3009
	// authorization the treasury relays (the payer needs no gas).
	MPPCredentialType = "authorization"
)

// MPPCredentialMaxBytes bounds an Authorization: Payment header: the
// draft asks servers to take at least 4 KB; an evm authorization
// credential with its echoed challenge is about 1.5 KB.
const MPPCredentialMaxBytes = 8192

// MPPChallengeTTL is how long a challenge is good for: the wait for
// inclusion with room, as x402's maxTimeoutSeconds.
const MPPChallengeTTL = 5 * time.Minute

// MPPProblemBase is the draft's base URI of problem types.
const MPPProblemBase = "https://paymentauth.org/problems/"

// MPP problem codes (draft-httpauth-payment-00, Error Codes).
const (
	MPPPaymentRequired     = "payment-required"
	MPPPaymentExpired      = "payment-expired"
	MPPVerificationFailed  = "verification-failed"
	MPPMalformedCredential = "malformed-credential"
	MPPInvalidChallenge    = "invalid-challenge"
)

// MPPChallenge is one Payment challenge, as WWW-Authenticate carries it
// and a credential echoes it.
type MPPChallenge struct {
	ID          string `json:"id"`
	Realm       string `json:"realm"`
	Method      string `json:"method"`
	Intent      string `json:"intent"`
	Request     string `json:"request"`
	Description string `json:"description,omitempty"`
	Digest      string `json:"digest,omitempty"`
	Expires     string `json:"expires,omitempty"`
	Opaque      string `json:"opaque,omitempty"`
}

// Header is the challenge as a WWW-Authenticate value.
func (c MPPChallenge) Header() string {
	var b strings.Builder
	b.WriteString("Payment ")
	param := func(name, v string) {
		if v == "" && name != "id" {
			return
		}
		if name != "id" {
			b.WriteString(", ")
		}
		b.WriteString(name + `="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`)
	}
	param("id", c.ID)
	param("realm", c.Realm)
	param("method", c.Method)
	param("intent", c.Intent)
	param("request", c.Request)
	param("description", c.Description)
	param("digest", c.Digest)
	param("expires", c.Expires)
	param("opaque", c.Opaque)
	return b.String()
}

// MPPChargeRequest is the evm charge request a challenge's request
// parameter encodes (JCS, base64url).
type MPPChargeRequest struct {
	Amount        string           `json:"amount"`
	Currency      string           `json:"currency"`
	Description   string           `json:"description,omitempty"`
	ExternalID    string           `json:"externalId,omitempty"`
	MethodDetails MPPMethodDetails `json:"methodDetails"`
	Recipient     string           `json:"recipient"`
}

// MPPMethodDetails are the evm method's details.
type MPPMethodDetails struct {
	ChainID         uint64   `json:"chainId"`
	CredentialTypes []string `json:"credentialTypes,omitempty"`
	Decimals        int      `json:"decimals,omitempty"`
}

// MPPCredential is the JSON an Authorization: Payment header carries.
type MPPCredential struct {
	Challenge MPPChallenge     `json:"challenge"`
	Payload   MPPAuthorization `json:"payload"`
	Source    string           `json:"source,omitempty"`
}

// MPPAuthorization is the evm method's authorization payload.
type MPPAuthorization struct {
	Type        string `json:"type"`
	From        string `json:"from"`
	To          string `json:"to"`
	Value       string `json:"value"`
	ValidAfter  string `json:"validAfter"`
	ValidBefore string `json:"validBefore"`
	Nonce       string `json:"nonce"`
	Signature   string `json:"signature"`
	// Transaction is the solana method's payload (mpp_solana.go): the
	// payer-signed transaction, base64.
	Transaction string `json:"transaction,omitempty"`
}

// MPPReceipt is what Payment-Receipt carries (base64url JSON).
type MPPReceipt struct {
	Method      string `json:"method"`
	ChallengeID string `json:"challengeId"`
	Reference   string `json:"reference"`
	Status      string `json:"status"`
	Timestamp   string `json:"timestamp"`
	ChainID     uint64 `json:"chainId,omitempty"` // the evm method's
	ExternalID  string `json:"externalId,omitempty"`
}

// MPPError is a refusal the draft answers with 402, a fresh challenge and
// a problem detail of Code.
type MPPError struct {
	Code        string
	Detail      string
	ChallengeID string
	// Err is the refusal underneath, when there is one.
	Err error
}

func (e *MPPError) Error() string { return e.Code + ": " + e.Detail }
func (e *MPPError) Unwrap() error { return e.Err }

func mppRefusal(code, challengeID, format string, args ...any) *MPPError {
	return &MPPError{Code: code, ChallengeID: challengeID, Detail: fmt.Sprintf(format, args...)}
}

// canonicalJSON encodes v as JCS (RFC 8785) does for the values the
// service puts in a request: object keys sorted (Go sorts map keys; the
// structs above declare theirs in order), no insignificant space, no HTML
// escaping; strings are ASCII and numbers integers, where Go's and JCS's
// forms agree. A client re-serializes the request it echoes with JCS, so
// the bytes (and the id bound to them) come back identical.
func canonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// mppChallengeID is the draft's HMAC-SHA256 binding of c's parameters.
func mppChallengeID(key []byte, c MPPChallenge) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.Join([]string{c.Realm, c.Method, c.Intent, c.Request, c.Expires, c.Digest, c.Opaque}, "|")))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// MPPChallengeHash is the evm method's challenge hash, the nonce the
// payer's authorization must carry: keccak256(id || realm).
func MPPChallengeHash(id, realm string) [32]byte {
	h := sha3.NewLegacyKeccak256()
	h.Write([]byte(id + realm))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// MPPChallenges are the session's Payment challenges in realm (the host
// asked), one per EVM chain that qualifies (above). ErrNotFound for an
// unknown session, ErrConflict for one no longer open, ErrForbidden for a
// deactivated merchant, a ValidationError when no chain qualifies.
func (s *Service) MPPChallenges(ctx context.Context, externalID, realm string) ([]MPPChallenge, error) {
	sess, err := s.sessionFor402(ctx, externalID)
	if err != nil {
		return nil, err
	}
	mode := sessionMode(sess)
	expires := s.now().Add(MPPChallengeTTL).UTC().Truncate(time.Second).Format(time.RFC3339)
	key := s.cfg.Vault.ChallengeKey()
	var out []MPPChallenge
	for _, chain := range chains.EVMChains {
		chainID, ok := s.mppChainID(mode, chain)
		if !ok || !merchantAccepts(sess.Edges.Merchant, chain, TokenUSDC) {
			continue
		}
		ledger, _ := s.ledger(mode, chain)
		units, err := ToBaseUnits("amount_usd", sess.AmountUsd, ledger.Decimals())
		if err != nil {
			return nil, err
		}
		da, err := s.sessionDepositAddress(ctx, sess, chain)
		if err != nil {
			return nil, err
		}
		raw, err := canonicalJSON(MPPChargeRequest{
			Amount: units.String(), Currency: ledger.Token(), ExternalID: sess.ExternalID, Recipient: da.Address,
			MethodDetails: MPPMethodDetails{ChainID: chainID, CredentialTypes: []string{MPPCredentialType}, Decimals: int(ledger.Decimals())},
		})
		if err != nil {
			return nil, fmt.Errorf("mpp: encoding request: %w", err)
		}
		c := MPPChallenge{
			Realm: realm, Method: MPPMethod, Intent: MPPIntent,
			Request: base64.RawURLEncoding.EncodeToString(raw), Expires: expires,
		}
		c.ID = mppChallengeID(key, c)
		out = append(out, c)
	}
	sc, err := s.mppSolanaChallenge(ctx, sess, realm, expires)
	if err != nil {
		return nil, err
	}
	if sc != nil {
		out = append(out, *sc)
	}
	if len(out) == 0 {
		return nil, Invalid("chain", "the merchant accepts USDC on no chain MPP is offered on in %s mode (an EVM chain that relays authorizations, Solana on mainnet-beta or devnet)", mode)
	}
	return out, nil
}

// mppChainID is chain's id in mode, when its ledger is configured and
// relays authorizations.
func (s *Service) mppChainID(mode Mode, chain chains.Name) (uint64, bool) {
	ledger, err := s.ledger(mode, chain)
	if err != nil {
		return 0, false
	}
	if _, ok := ledger.(chains.AuthorizationRelayer); !ok {
		return 0, false
	}
	id, ok := ledger.(interface{ ChainID() uint64 })
	if !ok {
		return 0, false
	}
	return id.ChainID(), true
}

// DecodeMPPCredential reads an Authorization header's Payment credential:
// "Payment " then base64url (no padding; padding tolerated) of the JSON.
// Every refusal is an *MPPError of code malformed-credential.
func DecodeMPPCredential(header string) (*MPPCredential, error) {
	if len(header) > MPPCredentialMaxBytes {
		return nil, mppRefusal(MPPMalformedCredential, "", "the credential must be at most %d bytes", MPPCredentialMaxBytes)
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Payment") {
		return nil, mppRefusal(MPPMalformedCredential, "", `the Authorization header must be "Payment <base64url credential>"`)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(token), "="))
	if err != nil {
		return nil, mppRefusal(MPPMalformedCredential, "", "the credential is not base64url")
	}
	var c MPPCredential
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, mppRefusal(MPPMalformedCredential, "", "the credential is not the JSON of a Payment credential: %v", err)
	}
	ch := c.Challenge
	for _, f := range []struct{ name, v string }{
		{"challenge.id", ch.ID}, {"challenge.realm", ch.Realm}, {"challenge.method", ch.Method},
		{"challenge.intent", ch.Intent}, {"challenge.request", ch.Request}, {"payload.type", c.Payload.Type},
	} {
		if f.v == "" {
			return nil, mppRefusal(MPPMalformedCredential, ch.ID, "%s is required", f.name)
		}
	}
	return &c, nil
}

// mppPayment is a credential checked against its challenge: the chain
// it pays on and the authorization to relay.
type mppPayment struct {
	request MPPChargeRequest
	chain   chains.Name
	auth    TransferAuthorization
	expired bool
}

// checkMPP checks c's binding and payload for the session in realm: what
// needs no database or chain.
func (s *Service) checkMPP(externalID, realm string, mode Mode, c *MPPCredential) (*mppPayment, error) {
	ch := c.Challenge
	if err := s.mppIssued(realm, ch); err != nil {
		return nil, err
	}
	if ch.Method != MPPMethod || ch.Intent != MPPIntent {
		return nil, mppRefusal(MPPInvalidChallenge, ch.ID, "only methods %q and %q, intent %q, are offered", MPPMethod, MPPMethodSolana, MPPIntent)
	}
	rawReq, err := base64.RawURLEncoding.DecodeString(ch.Request)
	var req MPPChargeRequest
	if err == nil {
		err = json.Unmarshal(rawReq, &req)
	}
	if err != nil || req.ExternalID != externalID {
		return nil, mppRefusal(MPPInvalidChallenge, ch.ID, "the challenge is not for checkout session %s", externalID)
	}
	expires, err := time.Parse(time.RFC3339, ch.Expires)
	if err != nil {
		return nil, mppRefusal(MPPInvalidChallenge, ch.ID, "the challenge has no valid expires")
	}
	out := &mppPayment{request: req, expired: !s.now().Before(expires)}
	for _, chain := range chains.EVMChains {
		if id, ok := s.mppChainID(mode, chain); ok && id == req.MethodDetails.ChainID {
			out.chain = chain
		}
	}
	if out.chain == "" {
		return nil, mppRefusal(MPPInvalidChallenge, ch.ID, "chain id %d is not offered in %s mode", req.MethodDetails.ChainID, mode)
	}
	p := c.Payload
	if p.Type != MPPCredentialType {
		return nil, mppRefusal(MPPVerificationFailed, ch.ID, "payload.type must be %q (an EIP-3009 authorization the service relays), not %q", MPPCredentialType, p.Type)
	}
	w := s.wallets(out.chain)
	if w.NormalizeAddress(strings.TrimSpace(p.To)) != w.NormalizeAddress(req.Recipient) {
		return nil, mppRefusal(MPPVerificationFailed, ch.ID, "payload.to must be the challenge's recipient %s", req.Recipient)
	}
	if strings.TrimSpace(p.Value) != req.Amount {
		return nil, mppRefusal(MPPVerificationFailed, ch.ID, "payload.value must be the challenge's amount %s", req.Amount)
	}
	want := MPPChallengeHash(ch.ID, ch.Realm)
	if !strings.EqualFold(strings.TrimPrefix(strings.TrimSpace(p.Nonce), "0x"), hex.EncodeToString(want[:])) {
		return nil, mppRefusal(MPPVerificationFailed, ch.ID, "payload.nonce must be the challenge hash keccak256(id || realm), 0x%x", want)
	}
	if c.Source != "" {
		did := "did:pkh:eip155:" + strconv.FormatUint(req.MethodDetails.ChainID, 10) + ":"
		addr, ok := strings.CutPrefix(c.Source, did)
		if !ok || w.NormalizeAddress(addr) != w.NormalizeAddress(strings.TrimSpace(p.From)) {
			return nil, mppRefusal(MPPVerificationFailed, ch.ID, "source must be %s<payload.from>", did)
		}
	}
	out.auth = TransferAuthorization{From: p.From, To: p.To, Value: p.Value, ValidAfter: p.ValidAfter,
		ValidBefore: p.ValidBefore, Nonce: p.Nonce, Signature: p.Signature}
	return out, nil
}

// mppIssued checks that ch's id binds its parameters for realm: this
// server issued it, for the host asked.
func (s *Service) mppIssued(realm string, ch MPPChallenge) error {
	if ch.Realm != realm || !hmac.Equal([]byte(ch.ID), []byte(mppChallengeID(s.cfg.Vault.ChallengeKey(), ch))) {
		return mppRefusal(MPPInvalidChallenge, ch.ID, "the challenge was not issued by this server for %s (its id does not bind its parameters)", realm)
	}
	return nil
}

// PayMPP settles a Payment credential for the session: the checks above,
// then the relay of its authorization (PayWithAuthorization), answered
// with the receipt once the transfer is included. realm is the host the
// request named; clientIP the payer's client, whose relays are limited;
// idempotencyKey the request's Idempotency-Key (nil for none), which names
// one payment of the session as x402's payment-identifier does (x402_id.go):
// a retry under it with a new credential is answered the first payment,
// never relayed. Refusals of the credential are *MPPError (402 with a
// fresh challenge); the session's own state keeps its errors (ErrNotFound,
// ErrConflict, ErrForbidden), as do the relay's rate limits, and a key
// naming another payment is ErrIdempotencyKeyReused.
func (s *Service) PayMPP(ctx context.Context, externalID, realm, clientIP string, idempotencyKey *string, c *MPPCredential) (*AuthorizedPayment, *MPPReceipt, error) {
	key, err := parsedKey(idempotencyKey)
	if err != nil {
		return nil, nil, err
	}
	sess, err := s.sessionByExternalID(ctx, externalID)
	if err != nil {
		return nil, nil, err
	}
	if c.Challenge.Method == MPPMethodSolana {
		if err := s.mppIssued(realm, c.Challenge); err != nil {
			return nil, nil, err
		}
		return s.payMPPSolana(ctx, sess, clientIP, key, c)
	}
	mp, err := s.checkMPP(externalID, realm, sessionMode(sess), c)
	if err != nil {
		return nil, nil, err
	}
	req := AuthorizedPaymentRequest{ExternalID: externalID, Chain: string(mp.chain), Authorization: mp.auth, ClientIP: clientIP}
	pay := func() (*AuthorizedPayment, error) { return s.PayWithAuthorization(ctx, req) }
	var res *AuthorizedPayment
	if mp.expired {
		// Only the outcome of a payment already made is answered past
		// expiry: a retry learns what its payment did.
		expired := mppRefusal(MPPPaymentExpired, c.Challenge.ID, "the challenge expired at %s", c.Challenge.Expires)
		res, err = s.mppReplay(ctx, externalID, mp)
		if err == nil && res == nil {
			if key == "" {
				return nil, nil, expired
			}
			pay = func() (*AuthorizedPayment, error) { return nil, expired }
		}
	}
	if res == nil && err == nil {
		if key == "" {
			res, err = pay()
		} else {
			res, err = s.payMPPKeyed(ctx, sess, key, mp, req, pay)
		}
	}
	if err != nil {
		return nil, nil, mppPaymentError(c.Challenge.ID, err)
	}
	if res.Status == "failed" {
		return res, nil, mppRefusal(MPPVerificationFailed, c.Challenge.ID,
			"the relayed transaction %s failed on chain; the authorization was not used", res.TxHash)
	}
	if res.Payment == nil {
		return res, nil, nil // pending: no receipt before inclusion
	}
	return res, &MPPReceipt{
		Method: MPPMethod, ChallengeID: c.Challenge.ID, Reference: res.TxHash, Status: "success",
		Timestamp: res.Payment.CreatedAt.UTC().Format(time.RFC3339), ChainID: mp.request.MethodDetails.ChainID,
		ExternalID: externalID,
	}, nil
}

// payMPPKeyed makes the payment key names (x402_id.go): pay, this
// request's own, when the key is new; otherwise the payment the key
// keeps, whichever dialect made it.
func (s *Service) payMPPKeyed(ctx context.Context, sess *ent.CheckoutSession, key string, mp *mppPayment, req AuthorizedPaymentRequest, pay func() (*AuthorizedPayment, error)) (*AuthorizedPayment, error) {
	network := "eip155:" + strconv.FormatUint(mp.request.MethodDetails.ChainID, 10)
	first := &x402PaymentAnswer{Chain: req.Chain, Authorization: req.Authorization}
	return s.payIdentifiedBy(ctx, idempotencyKeyName(key), x402IDRequest(sess, key, network, req.Authorization), first, pay,
		func(kept *x402PaymentAnswer, mayRelay bool) (*AuthorizedPayment, error) {
			return s.replayIdentified(ctx, req, kept, mayRelay)
		})
}

// mppReplay answers the payment an authorization already made for the
// session; nil when it made none.
func (s *Service) mppReplay(ctx context.Context, externalID string, mp *mppPayment) (*AuthorizedPayment, error) {
	auth, err := mp.auth.parse()
	if err != nil {
		return nil, err
	}
	t, err := s.authorizedTargetOf(ctx, externalID, string(mp.chain))
	if err != nil {
		return nil, err
	}
	res, done, err := s.replayAuthorization(ctx, t, auth)
	if !done {
		return nil, err
	}
	return res, err
}

// mppPaymentError names a refusal of the payment as the draft's problems
// do; the session's state, the merchant, the relay's limits and internal
// errors stay what they are.
func mppPaymentError(challengeID string, err error) error {
	var verr *ValidationError
	switch {
	case errors.As(err, new(*MPPError)):
		return err
	case errors.As(err, &verr), errors.Is(err, ErrInsufficientFunds):
		return &MPPError{Code: MPPVerificationFailed, ChallengeID: challengeID, Detail: err.Error(), Err: err}
	}
	return err
}
