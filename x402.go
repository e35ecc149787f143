package agentpay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"agentpay/chains"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
)

// x402 (docs/agent-commerce.md, x402): a checkout session published as an
// HTTP 402 resource, and a facilitator for merchants' own resources.
//
// Both speak x402 version 1's `exact` scheme on EVM chains: the payer signs
// an EIP-3009 TransferWithAuthorization of maxAmountRequired of the asset
// to payTo, and the service relays it through PayWithAuthorization
// (authorizedpayments.go), so the payment is a session's payment like any
// other (webhooks, confirmations, settlement).
//
// Networks are named as x402 v1 clients name them, and only those whose
// chain id is the one such a client signs for (it derives the EIP-712
// chainId from the name, not from the server): base (8453) and
// base-sepolia (84532), polygon (137) and polygon-amoy (80002). Arbitrum,
// Ethereum and Solana have no v1 name the clients accept and are not
// offered; a chain whose node reports another id (a devnet started with
// an override) is left out.
//
// Facilitator payTo: a merchant's own resource is paid to a deposit
// address of one of its open sessions, in the mode of its key. The merchant
// creates a session for the sale (POST /checkout/sessions) and reads the
// session's requirements (GET /checkout/pay/{id}/x402, the accepts of its
// 402) to answer its own 402; verify and settle find the session by payTo.
// So every x402 payment the service settles lands on an address it
// derived, is recorded as that session's payment and settles to the
// merchant as any payment does, and a test key only reaches test sessions,
// hence test networks.

// X402Version is the protocol version spoken.
const X402Version = 1

// X402Scheme is the one payment scheme offered.
const X402Scheme = "exact"

// X402PaymentMaxBytes bounds an X-PAYMENT header (base64 of a payload of
// a few hundred bytes).
const X402PaymentMaxBytes = 4096

// x402Networks names each chain and mode as x402 v1 does, with the chain
// id its clients sign for.
var x402Networks = map[chains.Name]map[Mode]struct {
	name    string
	chainID uint64
}{
	chains.Base:    {ModeLive: {"base", 8453}, ModeTest: {"base-sepolia", 84532}},
	chains.Polygon: {ModeLive: {"polygon", 137}, ModeTest: {"polygon-amoy", 80002}},
}

// X402Requirement is one entry of a 402's accepts.
type X402Requirement struct {
	Scheme            string          `json:"scheme"`
	Network           string          `json:"network"`
	MaxAmountRequired string          `json:"maxAmountRequired"`
	Resource          string          `json:"resource"`
	Description       string          `json:"description"`
	MimeType          string          `json:"mimeType"`
	PayTo             string          `json:"payTo"`
	MaxTimeoutSeconds int             `json:"maxTimeoutSeconds"`
	Asset             string          `json:"asset"`
	Extra             X402DomainExtra `json:"extra"`
	// OutputSchema is the resource's, as a merchant's requirements may
	// carry it (facilitator requests); the service sets none.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// X402DomainExtra is the token's EIP-712 domain name and version, which
// the client signs under.
type X402DomainExtra struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// X402PaymentPayload is the JSON in an X-PAYMENT header, and a
// facilitator request's paymentPayload.
type X402PaymentPayload struct {
	X402Version int    `json:"x402Version"`
	Scheme      string `json:"scheme"`
	Network     string `json:"network"`
	Payload     struct {
		Signature     string                `json:"signature"`
		Authorization TransferAuthorization `json:"authorization"`
	} `json:"payload"`
}

// X402SettleResponse is what X-PAYMENT-RESPONSE carries (base64 JSON) and
// settle answers.
type X402SettleResponse struct {
	Success     bool   `json:"success"`
	ErrorReason string `json:"errorReason,omitempty"`
	Transaction string `json:"transaction"`
	Network     string `json:"network"`
	Payer       string `json:"payer"`
}

// x402MaxTimeoutSeconds is how long the payer's authorization should stay
// valid: the wait for inclusion, with room.
const x402MaxTimeoutSeconds = 120

// X402Requirements are the payment requirements of the session: one per
// chain the merchant accepts that x402 names in the session's mode, payTo
// the session's deposit address there (allocated as a selection would).
// resource is the URL the client asked. ErrNotFound for an unknown
// session, ErrConflict for one no longer open, a ValidationError when no
// chain qualifies.
func (s *Service) X402Requirements(ctx context.Context, externalID, resource string) ([]X402Requirement, error) {
	offer, err := s.X402Offers(ctx, externalID, resource)
	if err != nil {
		return nil, err
	}
	if len(offer.V1) == 0 {
		return nil, Invalid("chain", "the merchant accepts USDC on none of the networks x402 v1 names in the session's mode (base, polygon; x402 v2 clients are offered more)")
	}
	return offer.V1, nil
}

// x402Network is chain's x402 name in mode, when its ledger is configured,
// relays authorizations and is on the chain id x402 clients sign for.
func (s *Service) x402Network(mode Mode, chain chains.Name) (string, bool) {
	n, ok := x402Networks[chain][mode]
	if !ok {
		return "", false
	}
	ledger, err := s.ledger(mode, chain)
	if err != nil {
		return "", false
	}
	if _, ok := ledger.(chains.AuthorizationRelayer); !ok {
		return "", false
	}
	id, ok := ledger.(interface{ ChainID() uint64 })
	if !ok || id.ChainID() != n.chainID {
		return "", false
	}
	return n.name, true
}

// x402Chain is the chain x402 calls network in mode.
func x402Chain(mode Mode, network string) (chains.Name, bool) {
	for chain, modes := range x402Networks {
		if modes[mode].name == network {
			return chain, true
		}
	}
	return "", false
}

// DecodeX402Payment reads an X-PAYMENT header: base64 of the JSON payload.
func DecodeX402Payment(header string) (*X402PaymentPayload, error) {
	if len(header) > X402PaymentMaxBytes {
		return nil, Invalid("X-PAYMENT", "must be at most %d bytes", X402PaymentMaxBytes)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(header))
	if err != nil {
		if raw, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(header), "=")); err != nil {
			return nil, Invalid("X-PAYMENT", "must be base64 of the payment payload's JSON")
		}
	}
	var p X402PaymentPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, Invalid("X-PAYMENT", "must be base64 of the payment payload's JSON: %v", err)
	}
	return &p, nil
}

// request checks the payload's envelope and makes it a relay request for
// the session, in the session's mode.
func (p *X402PaymentPayload) request(externalID string, mode Mode) (AuthorizedPaymentRequest, error) {
	if p.X402Version != X402Version {
		return AuthorizedPaymentRequest{}, Invalid("x402Version", "must be %d", X402Version)
	}
	if p.Scheme != X402Scheme {
		return AuthorizedPaymentRequest{}, Invalid("scheme", "must be %q", X402Scheme)
	}
	chain, ok := x402Chain(mode, p.Network)
	if !ok {
		return AuthorizedPaymentRequest{}, Invalid("network", "%q is not a %s-mode network offered: base, polygon (live), base-sepolia, polygon-amoy (test)", p.Network, mode)
	}
	auth := p.Payload.Authorization
	auth.Signature = p.Payload.Signature
	return AuthorizedPaymentRequest{ExternalID: externalID, Chain: string(chain), Authorization: auth}, nil
}

// PayX402 settles an X-PAYMENT for the session: the relay of its
// authorization (PayWithAuthorization), answered as X-PAYMENT-RESPONSE.
// clientIP is the payer's client, whose relays are limited (relays.go).
func (s *Service) PayX402(ctx context.Context, externalID, clientIP string, p *X402PaymentPayload) (*AuthorizedPayment, *X402SettleResponse, error) {
	sess, err := s.sessionByExternalID(ctx, externalID)
	if err != nil {
		return nil, nil, err
	}
	req, err := p.request(externalID, sessionMode(sess))
	if err != nil {
		return nil, nil, err
	}
	req.ClientIP = clientIP
	res, err := s.PayWithAuthorization(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	return res, settleResponse(p.Network, res), nil
}

func settleResponse(network string, res *AuthorizedPayment) *X402SettleResponse {
	out := &X402SettleResponse{Success: res.Status != "failed", Transaction: res.TxHash, Network: network, Payer: res.Payer}
	if !out.Success {
		out.ErrorReason = "invalid_transaction_state"
	}
	return out
}

// X402FacilitatorRequest is what /x402/verify and /x402/settle take.
type X402FacilitatorRequest struct {
	X402Version         int                `json:"x402Version"`
	PaymentPayload      X402PaymentPayload `json:"paymentPayload"`
	PaymentRequirements X402Requirement    `json:"paymentRequirements"`
}

// X402VerifyResponse is verify's answer.
type X402VerifyResponse struct {
	IsValid       bool   `json:"isValid"`
	InvalidReason string `json:"invalidReason,omitempty"`
	Payer         string `json:"payer"`
}

// facilitatorRequest checks a facilitator request against itself (the
// payload pays what the requirements ask) and finds the merchant's open
// session whose deposit address is payTo, in the key's mode.
func (s *Service) facilitatorRequest(ctx context.Context, m *MerchantAuth, req *X402FacilitatorRequest) (AuthorizedPaymentRequest, error) {
	pr, pp := req.PaymentRequirements, req.PaymentPayload
	if req.X402Version != X402Version {
		return AuthorizedPaymentRequest{}, Invalid("x402Version", "must be %d", X402Version)
	}
	if pr.Scheme != X402Scheme {
		return AuthorizedPaymentRequest{}, Invalid("paymentRequirements.scheme", "must be %q", X402Scheme)
	}
	if pr.Network != pp.Network || pr.Scheme != pp.Scheme {
		return AuthorizedPaymentRequest{}, Invalid("paymentPayload.network", "must be the requirements' scheme and network")
	}
	chain, ok := x402Chain(m.Mode, pr.Network)
	if !ok {
		return AuthorizedPaymentRequest{}, Invalid("paymentRequirements.network", "%q is not a %s-mode network offered: base, polygon (live), base-sepolia, polygon-amoy (test)", pr.Network, m.Mode)
	}
	w := s.wallets(chain)
	if w.NormalizeAddress(pp.Payload.Authorization.To) != w.NormalizeAddress(pr.PayTo) {
		return AuthorizedPaymentRequest{}, Invalid("paymentPayload.payload.authorization.to", "must be the requirements' payTo")
	}
	if strings.TrimSpace(pp.Payload.Authorization.Value) != pr.MaxAmountRequired {
		return AuthorizedPaymentRequest{}, Invalid("paymentPayload.payload.authorization.value", "must be the requirements' maxAmountRequired")
	}
	if ledger, err := s.ledger(m.Mode, chain); err != nil || w.NormalizeAddress(ledger.Token()) != w.NormalizeAddress(pr.Asset) {
		return AuthorizedPaymentRequest{}, Invalid("paymentRequirements.asset", "must be the USDC contract of %s", pr.Network)
	}
	if len(pr.PayTo) > 64 {
		return AuthorizedPaymentRequest{}, Invalid("paymentRequirements.payTo", "is not a deposit address of an open session of yours")
	}
	addrs, err := s.cfg.DB.Ent.DepositAddress.Query().Where(
		depositaddress.Chain(string(chain)),
		depositaddress.AddressEqualFold(pr.PayTo),
		depositaddress.HasSessionWith(checkoutsession.MerchantID(m.Merchant.ID), checkoutsession.Livemode(m.Livemode())),
	).WithSession().All(ctx)
	if err != nil {
		return AuthorizedPaymentRequest{}, fmt.Errorf("x402: reading deposit addresses: %w", err)
	}
	if len(addrs) == 0 {
		return AuthorizedPaymentRequest{}, fmt.Errorf("%w: payTo %s is not a deposit address of a %s-mode session of yours", ErrNotFound, pr.PayTo, m.Mode)
	}
	out, err := pp.request(addrs[0].Edges.Session.ExternalID, m.Mode)
	if err != nil {
		return AuthorizedPaymentRequest{}, err
	}
	return out, nil
}

// X402Verify is the facilitator's verify: every check a settle runs, no
// gas spent. A refusal of the payment is an answer (isValid false, with
// x402's reason), not an error; errors are the request's own faults.
func (s *Service) X402Verify(ctx context.Context, m *MerchantAuth, req *X402FacilitatorRequest) (*X402VerifyResponse, error) {
	ar, err := s.facilitatorRequest(ctx, m, req)
	return s.x402VerifyAnswer(ctx, req.PaymentPayload.Payload.Authorization.From, ar, err)
}

// x402VerifyAnswer is a verify's answer in either version: the checks a
// settle runs on ar (err: the request's own reading of it), a refusal of
// the payment told as x402's reason.
func (s *Service) x402VerifyAnswer(ctx context.Context, payer string, ar AuthorizedPaymentRequest, err error) (*X402VerifyResponse, error) {
	out := &X402VerifyResponse{Payer: payer}
	if err == nil {
		err = s.VerifyAuthorizedPayment(ctx, ar)
	}
	return x402Verdict(out, err)
}

// x402Verdict completes a verify's answer from its checks' error, on every
// network: valid when nil, a refusal of the payment told as x402's reason,
// and any other error (the service's own failure) returned as such.
func x402Verdict(out *X402VerifyResponse, err error) (*X402VerifyResponse, error) {
	if err != nil {
		reason, ok := X402Reason(err)
		if !ok {
			return nil, err
		}
		out.InvalidReason = reason
		return out, nil
	}
	out.IsValid = true
	return out, nil
}

// X402Settle is the facilitator's settle: the relay, the payment recorded
// as the session's. The caller is the merchant (its key), so the relay
// counts against the merchant's relay rate only, not a client IP's.
func (s *Service) X402Settle(ctx context.Context, m *MerchantAuth, req *X402FacilitatorRequest) (*X402SettleResponse, error) {
	ar, err := s.facilitatorRequest(ctx, m, req)
	if err == nil {
		var res *AuthorizedPayment
		if res, err = s.PayWithAuthorization(ctx, ar); err == nil {
			return settleResponse(req.PaymentPayload.Network, res), nil
		}
	}
	reason, ok := X402Reason(err)
	if !ok {
		return nil, err
	}
	return &X402SettleResponse{ErrorReason: reason, Network: req.PaymentPayload.Network,
		Payer: req.PaymentPayload.Payload.Authorization.From}, nil
}

// X402Reason names a refusal of a payment as x402's error reasons do;
// false for errors that are no refusal of the payment (internal ones).
func X402Reason(err error) (string, bool) {
	var verr *ValidationError
	var svm *x402SVMRefusal
	switch {
	case errors.As(err, &svm):
		return svm.reason, true
	case errors.As(err, &verr):
		switch {
		case verr.Field == "signature":
			return "invalid_exact_evm_payload_signature", true
		case verr.Field == "authorization.value", strings.HasSuffix(verr.Field, "authorization.value"):
			return "invalid_exact_evm_payload_authorization_value", true
		case verr.Field == "authorization.to", strings.HasSuffix(verr.Field, "authorization.to"), strings.HasSuffix(verr.Field, "payTo"):
			return "invalid_exact_evm_payload_recipient_mismatch", true
		case verr.Field == "authorization" && strings.Contains(verr.Message, "validBefore"):
			return "invalid_exact_evm_payload_authorization_valid_before", true
		case verr.Field == "authorization" && strings.Contains(verr.Message, "validAfter"):
			return "invalid_exact_evm_payload_authorization_valid_after", true
		case strings.HasSuffix(verr.Field, "network"), verr.Field == "chain":
			return "invalid_network", true
		case strings.HasSuffix(verr.Field, "scheme"):
			return "unsupported_scheme", true
		case strings.HasSuffix(verr.Field, "x402Version"):
			return "invalid_x402_version", true
		}
		return "invalid_payload", true
	case errors.Is(err, ErrInsufficientFunds):
		return "insufficient_funds", true
	case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound), errors.As(err, new(relayedPolicyRefusal)):
		return "invalid_payment", true
	}
	return "", false
}
