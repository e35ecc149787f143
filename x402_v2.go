package agentpay

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/x402"
)

// x402 version 2 (docs/agent-commerce.md, x402), beside version 1
// (x402.go), which v1 clients keep using.
//
// What changed on the wire, and nothing else: a 402 carries the
// requirements in the PAYMENT-REQUIRED header (base64 JSON: x402Version 2,
// resource, accepts[], extensions), the client pays in PAYMENT-SIGNATURE
// (its payload echoes the requirement it accepted), and the answer is in
// PAYMENT-RESPONSE. Networks are CAIP-2 (eip155:<chain id>) and amounts
// are `amount` in base units. The exact scheme on EVM is the same EIP-3009
// authorization, relayed by PayWithAuthorization as v1's is; so a v2
// payment is a session payment like any other.
//
// A v2 client derives the EIP-712 chainId from the network it is offered,
// so every EVM chain whose ledger relays authorizations can be offered,
// not only those v1 has a name for; a chain is still offered only when
// its node reports the chain id its mode's network names (a devnet
// started with an override is left out, as in v1), so the id the client
// signs for is the id the token checks.
//
// payment-identifier (x402's extension): the client's id for a payment
// is an idempotency key scoped to the session (x402_id.go).

// x402CAIP2 names each EVM chain and mode as a CAIP-2 chain id.
var x402CAIP2 = map[chains.Name]map[Mode]uint64{
	chains.Base:     {ModeLive: 8453, ModeTest: 84532},
	chains.Arbitrum: {ModeLive: 42161, ModeTest: 421614},
	chains.Ethereum: {ModeLive: 1, ModeTest: 11155111},
	chains.Polygon:  {ModeLive: 137, ModeTest: 80002},
}

// x402NetworkV2 is chain's CAIP-2 network in mode.
func x402NetworkV2(chain chains.Name, mode Mode) (string, bool) {
	id, ok := x402CAIP2[chain][mode]
	if !ok {
		return "", false
	}
	return x402.EVMNetwork(id), true
}

// x402ChainV2 is the chain a CAIP-2 network names in mode.
func x402ChainV2(mode Mode, network string) (chains.Name, bool) {
	id, ok := x402.EVMChainID(network)
	if !ok {
		return "", false
	}
	for chain, modes := range x402CAIP2 {
		if want, ok := modes[mode]; ok && want == id {
			return chain, true
		}
	}
	return "", false
}

// X402Offer is a session's 402 in both versions: v1's accepts (the
// networks v1 names) and v2's PaymentRequired (every EVM chain offered).
type X402Offer struct {
	V1 []x402.RequirementsV1
	V2 *x402.PaymentRequired
}

// X402Offers are the session's payment requirements in both versions (see
// X402Requirements for v1's and the note above for v2's). A ValidationError
// when no chain qualifies in either.
func (s *Service) X402Offers(ctx context.Context, externalID, resource string) (*X402Offer, error) {
	sess, err := s.sessionFor402(ctx, externalID)
	if err != nil {
		return nil, err
	}
	mode := sessionMode(sess)
	desc := firstNonEmpty(sess.Description, "Checkout "+sess.ExternalID+" at "+sess.Edges.Merchant.Name)
	out := &X402Offer{V1: []x402.RequirementsV1{}, V2: &x402.PaymentRequired{
		X402Version: x402.Version2,
		Resource:    x402.ResourceInfo{URL: resource, Description: desc, MimeType: "application/json"},
		Accepts:     []x402.Requirements{},
	}}
	for _, chain := range chains.EVMChains {
		network, ok := s.x402EVMNetworkV2(mode, chain)
		if !ok || !merchantAccepts(sess.Edges.Merchant, chain, TokenUSDC) {
			continue
		}
		ledger, _ := s.ledger(mode, chain)
		domain, err := ledger.(chains.AuthorizationRelayer).TokenDomain(ctx)
		if err != nil {
			return nil, fmt.Errorf("x402: %s token domain: %w", chain, err)
		}
		units, err := ToBaseUnits("amount_usd", sess.AmountUsd, ledger.Decimals())
		if err != nil {
			return nil, err
		}
		da, err := s.sessionDepositAddress(ctx, sess, chain)
		if err != nil {
			return nil, err
		}
		out.V2.Accepts = append(out.V2.Accepts, x402.Requirements{
			Scheme: x402.SchemeExact, Network: network, Amount: units.String(), Asset: domain.VerifyingContract,
			PayTo: da.Address, MaxTimeoutSeconds: x402MaxTimeoutSeconds,
			Extra: x402.Extra{Name: domain.Name, Version: domain.Version, AssetTransferMethod: "eip3009"},
		})
		if v1, ok := s.x402Network(mode, chain); ok {
			out.V1 = append(out.V1, x402.RequirementsV1{
				Scheme: x402.SchemeExact, Network: v1, MaxAmountRequired: units.String(), Resource: resource,
				Description: desc, MimeType: "application/json", PayTo: da.Address, MaxTimeoutSeconds: x402MaxTimeoutSeconds,
				Asset: domain.VerifyingContract, Extra: x402.DomainExtra{Name: domain.Name, Version: domain.Version},
			})
		}
	}
	sol, err := s.x402SolanaOffer(ctx, sess)
	if err != nil {
		return nil, err
	}
	if sol != nil {
		out.V2.Accepts = append(out.V2.Accepts, *sol)
	}
	if len(out.V2.Accepts) == 0 {
		return nil, Invalid("chain", "the merchant accepts USDC on none of the networks configured in %s mode that x402 pays (EVM chains that relay authorizations, Solana)", mode)
	}
	pi := &x402.PaymentIdentifier{Schema: x402.PaymentIdentifierSchema()}
	out.V2.Extensions = &x402.Extensions{PaymentIdentifier: pi}
	return out, nil
}

// x402EVMNetworkV2 is chain's CAIP-2 network in mode, when its ledger is
// configured, relays authorizations and is on the chain id the network
// names.
func (s *Service) x402EVMNetworkV2(mode Mode, chain chains.Name) (string, bool) {
	network, ok := x402NetworkV2(chain, mode)
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
	if !ok || id.ChainID() != x402CAIP2[chain][mode] {
		return "", false
	}
	return network, true
}

// DecodeX402PaymentV2 reads a PAYMENT-SIGNATURE header
// (x402.DecodePaymentSignature), a header that does not decode refused as
// a ValidationError naming it.
func DecodeX402PaymentV2(header string) (*x402.PaymentPayload, error) {
	p, err := x402.DecodePaymentSignature(header)
	return p, x402HeaderInvalid(err)
}

// x402RequestV2 checks the v2 payload's envelope and makes it a relay request
// for the session, in the session's mode: version 2, the exact scheme on
// an EVM network of the mode, and an accepted requirement the
// authorization keeps to (its value the amount, its recipient payTo; what
// the session asks is checked by PayWithAuthorization).
func x402RequestV2(p *x402.PaymentPayload, externalID string, mode Mode) (AuthorizedPaymentRequest, error) {
	if p.X402Version != x402.Version2 {
		return AuthorizedPaymentRequest{}, Invalid("x402Version", "must be %d", x402.Version2)
	}
	if p.Accepted.Scheme != x402.SchemeExact {
		return AuthorizedPaymentRequest{}, Invalid("accepted.scheme", "must be %q", x402.SchemeExact)
	}
	chain, ok := x402ChainV2(mode, p.Accepted.Network)
	if !ok {
		return AuthorizedPaymentRequest{}, Invalid("accepted.network", "%q is not a %s-mode network offered (%s)", p.Accepted.Network, mode, x402NetworksV2Of(mode))
	}
	if m := p.Accepted.Extra.AssetTransferMethod; m != "" && m != "eip3009" {
		return AuthorizedPaymentRequest{}, Invalid("accepted.extra.assetTransferMethod", "must be eip3009, not %q", m)
	}
	auth := p.Payload.Authorization
	if strings.TrimSpace(auth.Value) != p.Accepted.Amount {
		return AuthorizedPaymentRequest{}, Invalid("authorization.value", "must be the accepted amount, %q", p.Accepted.Amount)
	}
	if !strings.EqualFold(strings.TrimSpace(auth.To), strings.TrimSpace(p.Accepted.PayTo)) {
		return AuthorizedPaymentRequest{}, Invalid("authorization.to", "must be the accepted payTo")
	}
	if _, err := x402PaymentID(p); err != nil {
		return AuthorizedPaymentRequest{}, err
	}
	return AuthorizedPaymentRequest{ExternalID: externalID, Chain: string(chain), Authorization: transferAuthorizationOf(auth, p.Payload.Signature)}, nil
}

// x402NetworksV2Of lists mode's CAIP-2 networks, for messages.
func x402NetworksV2Of(mode Mode) string {
	var out []string
	for chain := range x402CAIP2 {
		n, _ := x402NetworkV2(chain, mode)
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// PayX402V2 settles a PAYMENT-SIGNATURE for the session: the relay of its
// authorization (PayWithAuthorization), under its payment-identifier when
// it carries one (x402_id.go), answered as PAYMENT-RESPONSE.
func (s *Service) PayX402V2(ctx context.Context, externalID, clientIP string, p *x402.PaymentPayload) (*AuthorizedPayment, *x402.SettleResponse, error) {
	return s.payX402V2(ctx, externalID, clientIP, p, "")
}

// payX402V2 is PayX402V2 under key, an Idempotency-Key naming the payment
// of a payload that carries no payment-identifier (ACP's complete, whose
// request key is the payment's: acp.go); "" for none.
func (s *Service) payX402V2(ctx context.Context, externalID, clientIP string, p *x402.PaymentPayload, key string) (*AuthorizedPayment, *x402.SettleResponse, error) {
	sess, err := s.sessionByExternalID(ctx, externalID)
	if err != nil {
		return nil, nil, err
	}
	if x402.IsSolanaNetwork(p.Accepted.Network) {
		res, err := s.payX402Solana(ctx, sess, clientIP, p, key)
		if err != nil {
			return nil, nil, err
		}
		return res, settleResponse(p.Accepted.Network, res), nil
	}
	req, err := x402RequestV2(p, externalID, sessionMode(sess))
	if err != nil {
		return nil, nil, err
	}
	req.ClientIP = clientIP
	id, _ := x402PaymentID(p)
	var res *AuthorizedPayment
	if id == "" && key != "" {
		res, err = s.payKeyedAs(ctx, sess, idempotencyKeyName(key), key, p.Accepted.Network, req)
	} else {
		res, err = s.payIdentified(ctx, sess, id, p.Accepted.Network, req)
	}
	if err != nil {
		return nil, nil, err
	}
	return res, settleResponse(p.Accepted.Network, res), nil
}

// facilitatorRequestV2 checks a v2 facilitator request against itself
// (the payload accepted the requirements, pays what they ask) and finds
// the merchant's open session whose deposit address is payTo, in the
// key's mode; as v1's facilitatorRequest does.
func (s *Service) facilitatorRequestV2(ctx context.Context, m *MerchantAuth, req *x402.FacilitatorRequest) (AuthorizedPaymentRequest, error) {
	pr, pp := req.PaymentRequirements, &req.PaymentPayload
	if req.X402Version != x402.Version2 {
		return AuthorizedPaymentRequest{}, Invalid("x402Version", "must be %d", x402.Version2)
	}
	if pr.Scheme != x402.SchemeExact {
		return AuthorizedPaymentRequest{}, Invalid("paymentRequirements.scheme", "must be %q", x402.SchemeExact)
	}
	if pr.Network != pp.Accepted.Network || pr.Scheme != pp.Accepted.Scheme {
		return AuthorizedPaymentRequest{}, Invalid("paymentPayload.accepted.network", "must be the requirements' scheme and network")
	}
	if pr.Amount != pp.Accepted.Amount || !strings.EqualFold(pr.PayTo, pp.Accepted.PayTo) || !strings.EqualFold(pr.Asset, pp.Accepted.Asset) {
		return AuthorizedPaymentRequest{}, Invalid("paymentPayload.accepted", "must be the requirements' amount, asset and payTo")
	}
	chain, ok := x402ChainV2(m.Mode, pr.Network)
	if !ok {
		return AuthorizedPaymentRequest{}, Invalid("paymentRequirements.network", "%q is not a %s-mode network offered (%s)", pr.Network, m.Mode, x402NetworksV2Of(m.Mode))
	}
	externalID, err := s.facilitatorSession(ctx, m, chain, pr.Network, pr.Asset, pr.PayTo)
	if err != nil {
		return AuthorizedPaymentRequest{}, err
	}
	return x402RequestV2(pp, externalID, m.Mode)
}

// sessionFor402 is the session a 402 answer offers to pay (x402's and
// MPP's challenges), with its merchant: refused when unknown, its
// merchant deactivated, or no longer payable.
func (s *Service) sessionFor402(ctx context.Context, externalID string) (*ent.CheckoutSession, error) {
	if externalID == "" || len(externalID) > SessionExternalIDMaxLen {
		return nil, Invalid("external_id", "must be 1 to %d characters long", SessionExternalIDMaxLen)
	}
	sess, err := s.sessionByExternalID(ctx, externalID)
	if err != nil {
		return nil, err
	}
	if !sess.Edges.Merchant.Active {
		return nil, fmt.Errorf("%w: merchant is deactivated", ErrForbidden)
	}
	if err := selectable(sess, s.now(), nil); err != nil {
		return nil, err
	}
	return sess, nil
}

// X402VerifyV2 is the facilitator's verify in version 2 (X402Verify's).
func (s *Service) X402VerifyV2(ctx context.Context, m *MerchantAuth, req *x402.FacilitatorRequest) (*x402.VerifyResponse, error) {
	if x402.IsSolanaNetwork(req.PaymentRequirements.Network) {
		return s.x402SolanaVerify(ctx, m, req)
	}
	ar, err := s.facilitatorRequestV2(ctx, m, req)
	return s.x402VerifyAnswer(ctx, req.PaymentPayload.Payload.Authorization.From, ar, err)
}

// X402SettleV2 is the facilitator's settle in version 2 (X402Settle's),
// under the payload's payment-identifier when it carries one.
func (s *Service) X402SettleV2(ctx context.Context, m *MerchantAuth, req *x402.FacilitatorRequest) (*x402.SettleResponse, error) {
	if x402.IsSolanaNetwork(req.PaymentRequirements.Network) {
		return s.x402SolanaSettle(ctx, m, req)
	}
	network := req.PaymentPayload.Accepted.Network
	ar, err := s.facilitatorRequestV2(ctx, m, req)
	if err == nil {
		var sess *ent.CheckoutSession
		if sess, err = s.sessionByExternalID(ctx, ar.ExternalID); err == nil {
			id, _ := x402PaymentID(&req.PaymentPayload)
			var res *AuthorizedPayment
			if res, err = s.payIdentified(ctx, sess, id, network, ar); err == nil {
				return settleResponse(network, res), nil
			}
		}
	}
	reason, ok := X402Reason(err)
	if !ok {
		return nil, err
	}
	return &x402.SettleResponse{ErrorReason: reason, Network: network, Payer: s.x402PayerOf(&req.PaymentPayload)}, nil
}

// X402Refusal is the PAYMENT-RESPONSE of a refused v2 payment: x402's
// reason for err, and the network and payer the payload names (p nil: a
// header that did not decode, neither known).
func (s *Service) X402Refusal(err error, p *x402.PaymentPayload) *x402.SettleResponse {
	out := &x402.SettleResponse{}
	out.ErrorReason, _ = X402Reason(err)
	if p != nil {
		out.Network, out.Payer = p.Accepted.Network, s.x402PayerOf(p)
	}
	return out
}

// x402PayerOf is the payer a v2 payload names, as a refusal tells it: on
// EVM the authorization's from; on Solana the transfer's authority in the
// signed transaction, when it decodes ("" otherwise). Neither is checked
// here: a refusal may be of its signature.
func (s *Service) x402PayerOf(p *x402.PaymentPayload) string {
	if !x402.IsSolanaNetwork(p.Accepted.Network) {
		return p.Payload.Authorization.From
	}
	for _, mode := range []Mode{ModeTest, ModeLive} {
		if settler, _, _, ok := s.x402SolanaSettler(mode); ok {
			return settler.ExactPayer(p.Payload.Transaction)
		}
	}
	return ""
}

// X402SupportedFor is what the facilitator settles for a key of mode: the
// exact scheme on every network of the mode it can relay on, in v1 (the
// networks v1 names) and v2, and on Solana in v2 (its fee payer the
// treasury, x402_svm.go).
func (s *Service) X402SupportedFor(mode Mode) *x402.Supported {
	out := &x402.Supported{Kinds: []x402.SupportedKind{}, Extensions: []string{x402.ExtensionPaymentIdentifier}, Signers: map[string][]string{}}
	var signers []string
	for _, chain := range chains.EVMChains {
		network, ok := s.x402EVMNetworkV2(mode, chain)
		if !ok {
			continue
		}
		if v1, ok := s.x402Network(mode, chain); ok {
			out.Kinds = append(out.Kinds, x402.SupportedKind{X402Version: x402.Version1, Scheme: x402.SchemeExact, Network: v1})
		}
		out.Kinds = append(out.Kinds, x402.SupportedKind{X402Version: x402.Version2, Scheme: x402.SchemeExact, Network: network})
		ledger, _ := s.ledger(mode, chain)
		if g, ok := ledger.(interface{ GasAddress() string }); ok && g.GasAddress() != "" && !slices.Contains(signers, g.GasAddress()) {
			signers = append(signers, g.GasAddress())
		}
	}
	if len(signers) > 0 {
		out.Signers["eip155:*"] = signers
	}
	if settler, _, network, ok := s.x402SolanaSettler(mode); ok {
		out.Kinds = append(out.Kinds, x402.SupportedKind{X402Version: x402.Version2, Scheme: x402.SchemeExact, Network: network,
			Extra: &x402.Extra{FeePayer: settler.FeePayer()}})
		out.Signers["solana:*"] = []string{settler.FeePayer()}
	}
	return out
}
