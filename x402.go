package agentpay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"agentpay/chains"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/x402"
)

// x402 (docs/agent-commerce.md, x402): a checkout session published as an
// HTTP 402 resource, and a facilitator for merchants' own resources.
//
// Both speak x402 version 1's `exact` scheme on EVM chains: the payer signs
// an EIP-3009 TransferWithAuthorization of maxAmountRequired of the asset
// to payTo, and the service relays it through PayWithAuthorization
// (checkout_authorized_payments.go), so the payment is a session's payment like any
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

// x402Networks names each chain and mode as x402 v1 does (the chain id
// its clients sign for is x402.NetworkV1ChainID's).
var x402Networks = map[chains.Name]map[Mode]string{
	chains.Base:    {ModeLive: "base", ModeTest: "base-sepolia"},
	chains.Polygon: {ModeLive: "polygon", ModeTest: "polygon-amoy"},
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
func (s *Service) X402Requirements(ctx context.Context, externalID, resource string) ([]x402.RequirementsV1, error) {
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
	name, ok := x402Networks[chain][mode]
	if !ok {
		return "", false
	}
	chainID, _ := x402.NetworkV1ChainID(name)
	ledger, err := s.ledger(mode, chain)
	if err != nil {
		return "", false
	}
	if _, ok := ledger.(chains.AuthorizationRelayer); !ok {
		return "", false
	}
	id, ok := ledger.(interface{ ChainID() uint64 })
	if !ok || id.ChainID() != chainID {
		return "", false
	}
	return name, true
}

// x402Chain is the chain x402 calls network in mode.
func x402Chain(mode Mode, network string) (chains.Name, bool) {
	for chain, modes := range x402Networks {
		if modes[mode] == network {
			return chain, true
		}
	}
	return "", false
}

// DecodeX402Payment reads an X-PAYMENT header (x402.DecodePaymentV1), a
// header that does not decode refused as a ValidationError naming it.
func DecodeX402Payment(header string) (*x402.PaymentPayloadV1, error) {
	p, err := x402.DecodePaymentV1(header)
	return p, x402HeaderInvalid(err)
}

// x402HeaderInvalid is a header the leaf could not decode as the
// service's ValidationError (nil stays nil).
func x402HeaderInvalid(err error) error {
	var he *x402.HeaderError
	if errors.As(err, &he) {
		return Invalid(he.Header, "%s", he.Reason)
	}
	return err
}

// x402RequestV1 checks the payload's envelope and makes it a relay
// request for the session, in the session's mode.
func x402RequestV1(p *x402.PaymentPayloadV1, externalID string, mode Mode) (AuthorizedPaymentRequest, error) {
	if p.X402Version != x402.Version1 {
		return AuthorizedPaymentRequest{}, Invalid("x402Version", "must be %d", x402.Version1)
	}
	if p.Scheme != x402.SchemeExact {
		return AuthorizedPaymentRequest{}, Invalid("scheme", "must be %q", x402.SchemeExact)
	}
	chain, ok := x402Chain(mode, p.Network)
	if !ok {
		return AuthorizedPaymentRequest{}, Invalid("network", "%q is not a %s-mode network offered: base, polygon (live), base-sepolia, polygon-amoy (test)", p.Network, mode)
	}
	return AuthorizedPaymentRequest{ExternalID: externalID, Chain: string(chain),
		Authorization: transferAuthorizationOf(p.Payload.Authorization, p.Payload.Signature)}, nil
}

// transferAuthorizationOf is an x402 payload's EIP-3009 authorization and
// its signature as the relay reads them.
func transferAuthorizationOf(a x402.Authorization, signature string) TransferAuthorization {
	return TransferAuthorization{From: a.From, To: a.To, Value: a.Value, ValidAfter: a.ValidAfter,
		ValidBefore: a.ValidBefore, Nonce: a.Nonce, Signature: signature}
}

// PayX402 settles an X-PAYMENT for the session: the relay of its
// authorization (PayWithAuthorization), answered as X-PAYMENT-RESPONSE.
// clientIP is the payer's client, whose relays are limited (checkout_relays.go).
func (s *Service) PayX402(ctx context.Context, externalID, clientIP string, p *x402.PaymentPayloadV1) (*AuthorizedPayment, *x402.SettleResponse, error) {
	sess, err := s.sessionByExternalID(ctx, externalID)
	if err != nil {
		return nil, nil, err
	}
	req, err := x402RequestV1(p, externalID, sessionMode(sess))
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

func settleResponse(network string, res *AuthorizedPayment) *x402.SettleResponse {
	out := &x402.SettleResponse{Success: res.Status != "failed", Transaction: res.TxHash, Network: network, Payer: res.Payer}
	if !out.Success {
		out.ErrorReason = "invalid_transaction_state"
	}
	return out
}

// facilitatorRequest checks a facilitator request against itself (the
// payload pays what the requirements ask) and finds the merchant's open
// session whose deposit address is payTo, in the key's mode.
func (s *Service) facilitatorRequest(ctx context.Context, m *MerchantAuth, req *x402.FacilitatorRequestV1) (AuthorizedPaymentRequest, error) {
	pr, pp := req.PaymentRequirements, req.PaymentPayload
	if req.X402Version != x402.Version1 {
		return AuthorizedPaymentRequest{}, Invalid("x402Version", "must be %d", x402.Version1)
	}
	if pr.Scheme != x402.SchemeExact {
		return AuthorizedPaymentRequest{}, Invalid("paymentRequirements.scheme", "must be %q", x402.SchemeExact)
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
	externalID, err := s.facilitatorSession(ctx, m, chain, pr.Network, pr.Asset, pr.PayTo)
	if err != nil {
		return AuthorizedPaymentRequest{}, err
	}
	out, err := x402RequestV1(&pp, externalID, m.Mode)
	if err != nil {
		return AuthorizedPaymentRequest{}, err
	}
	return out, nil
}

// facilitatorSession is the external id of the merchant's session, in the
// key's mode, whose deposit address on chain is payTo, once asset is the
// chain's USDC: what a facilitator request of either version pays.
func (s *Service) facilitatorSession(ctx context.Context, m *MerchantAuth, chain chains.Name, network, asset, payTo string) (string, error) {
	w := s.wallets(chain)
	if ledger, err := s.ledger(m.Mode, chain); err != nil || w.NormalizeAddress(ledger.Token()) != w.NormalizeAddress(asset) {
		return "", Invalid("paymentRequirements.asset", "must be the USDC contract of %s", network)
	}
	if len(payTo) > 64 {
		return "", Invalid("paymentRequirements.payTo", "is not a deposit address of an open session of yours")
	}
	addrs, err := s.cfg.DB.Ent.DepositAddress.Query().Where(
		depositaddress.Chain(string(chain)),
		depositaddress.AddressEqualFold(payTo),
		depositaddress.HasSessionWith(checkoutsession.MerchantID(m.Merchant.ID), checkoutsession.Livemode(m.Livemode())),
	).WithSession().All(ctx)
	if err != nil {
		return "", fmt.Errorf("x402: reading deposit addresses: %w", err)
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("%w: payTo %s is not a deposit address of a %s-mode session of yours", ErrNotFound, payTo, m.Mode)
	}
	return addrs[0].Edges.Session.ExternalID, nil
}

// X402Verify is the facilitator's verify: every check a settle runs, no
// gas spent. A refusal of the payment is an answer (isValid false, with
// x402's reason), not an error; errors are the request's own faults.
func (s *Service) X402Verify(ctx context.Context, m *MerchantAuth, req *x402.FacilitatorRequestV1) (*x402.VerifyResponse, error) {
	ar, err := s.facilitatorRequest(ctx, m, req)
	return s.x402VerifyAnswer(ctx, req.PaymentPayload.Payload.Authorization.From, ar, err)
}

// x402VerifyAnswer is a verify's answer in either version: the checks a
// settle runs on ar (err: the request's own reading of it), a refusal of
// the payment told as x402's reason.
func (s *Service) x402VerifyAnswer(ctx context.Context, payer string, ar AuthorizedPaymentRequest, err error) (*x402.VerifyResponse, error) {
	out := &x402.VerifyResponse{Payer: payer}
	if err == nil {
		err = s.VerifyAuthorizedPayment(ctx, ar)
	}
	return x402Verdict(out, err)
}

// x402Verdict completes a verify's answer from its checks' error, on every
// network: valid when nil, a refusal of the payment told as x402's reason,
// and any other error (the service's own failure) returned as such.
func x402Verdict(out *x402.VerifyResponse, err error) (*x402.VerifyResponse, error) {
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
func (s *Service) X402Settle(ctx context.Context, m *MerchantAuth, req *x402.FacilitatorRequestV1) (*x402.SettleResponse, error) {
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
	return &x402.SettleResponse{ErrorReason: reason, Network: req.PaymentPayload.Network,
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
