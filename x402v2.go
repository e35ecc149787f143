package agentpay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
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
// is an idempotency key scoped to the session (x402id.go).

// X402Version2 is the second protocol version spoken.
const X402Version2 = 2

// X402PaymentIdentifierExtension is the payment-identifier extension's key.
const X402PaymentIdentifierExtension = "payment-identifier"

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
	return "eip155:" + strconv.FormatUint(id, 10), true
}

// x402ChainV2 is the chain a CAIP-2 network names in mode.
func x402ChainV2(mode Mode, network string) (chains.Name, bool) {
	ref, ok := strings.CutPrefix(network, "eip155:")
	if !ok || ref == "" || len(ref) > 20 || strings.TrimLeft(ref, "0123456789") != "" || ref[0] == '0' {
		return "", false
	}
	id, err := strconv.ParseUint(ref, 10, 64)
	if err != nil {
		return "", false
	}
	for chain, modes := range x402CAIP2 {
		if want, ok := modes[mode]; ok && want == id {
			return chain, true
		}
	}
	return "", false
}

// X402ResourceInfo is v2's description of the resource paid for.
type X402ResourceInfo struct {
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// X402ExtraV2 is a v2 requirement's extra: on EVM the token's EIP-712
// domain and the transfer method (eip3009, the only one offered); on
// Solana the fee payer (the treasury) and the memo the transfer carries
// (the session's external id).
type X402ExtraV2 struct {
	Name                string `json:"name,omitempty"`
	Version             string `json:"version,omitempty"`
	AssetTransferMethod string `json:"assetTransferMethod,omitempty"`
	FeePayer            string `json:"feePayer,omitempty"`
	Memo                string `json:"memo,omitempty"`
}

// X402RequirementV2 is one entry of a v2 402's accepts, and what a v2
// payload's accepted echoes.
type X402RequirementV2 struct {
	Scheme            string      `json:"scheme"`
	Network           string      `json:"network"`
	Amount            string      `json:"amount"`
	Asset             string      `json:"asset"`
	PayTo             string      `json:"payTo"`
	MaxTimeoutSeconds int         `json:"maxTimeoutSeconds"`
	Extra             X402ExtraV2 `json:"extra"`
}

// X402PaymentIdentifier is the payment-identifier extension as a 402
// declares it (info.required) and a payload echoes it (info.id).
type X402PaymentIdentifier struct {
	Info struct {
		Required bool   `json:"required"`
		ID       string `json:"id,omitempty"`
	} `json:"info"`
	// Schema is the JSON schema of info, declared in the 402; a payload's
	// echo of it is not read.
	Schema map[string]any `json:"schema"`
}

// X402Extensions are the extensions the service declares and reads.
type X402Extensions struct {
	PaymentIdentifier *X402PaymentIdentifier `json:"payment-identifier,omitempty"`
}

// X402PaymentRequired is what a v2 402's PAYMENT-REQUIRED carries.
type X402PaymentRequired struct {
	X402Version int                 `json:"x402Version"`
	Error       string              `json:"error,omitempty"`
	Resource    X402ResourceInfo    `json:"resource"`
	Accepts     []X402RequirementV2 `json:"accepts"`
	Extensions  *X402Extensions     `json:"extensions,omitempty"`
}

// X402PaymentPayloadV2 is the JSON in a PAYMENT-SIGNATURE header, and a v2
// facilitator request's paymentPayload.
type X402PaymentPayloadV2 struct {
	X402Version int               `json:"x402Version"`
	Resource    *X402ResourceInfo `json:"resource,omitempty"`
	Accepted    X402RequirementV2 `json:"accepted"`
	Payload     struct {
		// Signature and Authorization: the exact scheme on EVM.
		Signature     string                `json:"signature,omitempty"`
		Authorization TransferAuthorization `json:"authorization"`
		// Transaction: the exact scheme on Solana, the payer-signed
		// transaction in base64 (x402svm.go).
		Transaction string `json:"transaction,omitempty"`
	} `json:"payload"`
	Extensions *X402Extensions `json:"extensions,omitempty"`
}

// paymentIdentifierSchema is the extension's declared schema (x402's
// specs/extensions/payment_identifier.md).
func paymentIdentifierSchema() map[string]any {
	return map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object",
		"properties": map[string]any{
			"required": map[string]any{"type": "boolean"},
			"id":       map[string]any{"type": "string", "minLength": X402PaymentIDMinLen, "maxLength": X402PaymentIDMaxLen},
		},
		"required": []any{"required"},
	}
}

// X402Offer is a session's 402 in both versions: v1's accepts (the
// networks v1 names) and v2's PaymentRequired (every EVM chain offered).
type X402Offer struct {
	V1 []X402Requirement
	V2 *X402PaymentRequired
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
	out := &X402Offer{V1: []X402Requirement{}, V2: &X402PaymentRequired{
		X402Version: X402Version2,
		Resource:    X402ResourceInfo{URL: resource, Description: desc, MimeType: "application/json"},
		Accepts:     []X402RequirementV2{},
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
		out.V2.Accepts = append(out.V2.Accepts, X402RequirementV2{
			Scheme: X402Scheme, Network: network, Amount: units.String(), Asset: domain.VerifyingContract,
			PayTo: da.Address, MaxTimeoutSeconds: x402MaxTimeoutSeconds,
			Extra: X402ExtraV2{Name: domain.Name, Version: domain.Version, AssetTransferMethod: "eip3009"},
		})
		if v1, ok := s.x402Network(mode, chain); ok {
			out.V1 = append(out.V1, X402Requirement{
				Scheme: X402Scheme, Network: v1, MaxAmountRequired: units.String(), Resource: resource,
				Description: desc, MimeType: "application/json", PayTo: da.Address, MaxTimeoutSeconds: x402MaxTimeoutSeconds,
				Asset: domain.VerifyingContract, Extra: X402DomainExtra{Name: domain.Name, Version: domain.Version},
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
	pi := &X402PaymentIdentifier{Schema: paymentIdentifierSchema()}
	out.V2.Extensions = &X402Extensions{PaymentIdentifier: pi}
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

// DecodeX402PaymentV2 reads a PAYMENT-SIGNATURE header: base64 of the v2
// payment payload's JSON, bounded as X-PAYMENT is.
func DecodeX402PaymentV2(header string) (*X402PaymentPayloadV2, error) {
	const name = "PAYMENT-SIGNATURE"
	if len(header) > X402PaymentMaxBytes {
		return nil, Invalid(name, "must be at most %d bytes", X402PaymentMaxBytes)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(header))
	if err != nil {
		if raw, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(header), "=")); err != nil {
			return nil, Invalid(name, "must be base64 of the payment payload's JSON")
		}
	}
	var p X402PaymentPayloadV2
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, Invalid(name, "must be base64 of the payment payload's JSON: %v", err)
	}
	return &p, nil
}

// request checks the v2 payload's envelope and makes it a relay request
// for the session, in the session's mode: version 2, the exact scheme on
// an EVM network of the mode, and an accepted requirement the
// authorization keeps to (its value the amount, its recipient payTo; what
// the session asks is checked by PayWithAuthorization).
func (p *X402PaymentPayloadV2) request(externalID string, mode Mode) (AuthorizedPaymentRequest, error) {
	if p.X402Version != X402Version2 {
		return AuthorizedPaymentRequest{}, Invalid("x402Version", "must be %d", X402Version2)
	}
	if p.Accepted.Scheme != X402Scheme {
		return AuthorizedPaymentRequest{}, Invalid("accepted.scheme", "must be %q", X402Scheme)
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
	if _, err := p.paymentID(); err != nil {
		return AuthorizedPaymentRequest{}, err
	}
	auth.Signature = p.Payload.Signature
	return AuthorizedPaymentRequest{ExternalID: externalID, Chain: string(chain), Authorization: auth}, nil
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
// it carries one (x402id.go), answered as PAYMENT-RESPONSE.
func (s *Service) PayX402V2(ctx context.Context, externalID, clientIP string, p *X402PaymentPayloadV2) (*AuthorizedPayment, *X402SettleResponse, error) {
	sess, err := s.sessionByExternalID(ctx, externalID)
	if err != nil {
		return nil, nil, err
	}
	if isSolanaNetwork(p.Accepted.Network) {
		res, err := s.payX402Solana(ctx, sess, clientIP, p)
		if err != nil {
			return nil, nil, err
		}
		return res, settleResponse(p.Accepted.Network, res), nil
	}
	req, err := p.request(externalID, sessionMode(sess))
	if err != nil {
		return nil, nil, err
	}
	req.ClientIP = clientIP
	id, _ := p.paymentID()
	res, err := s.payIdentified(ctx, sess, id, p.Accepted.Network, req)
	if err != nil {
		return nil, nil, err
	}
	return res, settleResponse(p.Accepted.Network, res), nil
}

// X402FacilitatorRequestV2 is what /x402/verify and /x402/settle take in
// version 2.
type X402FacilitatorRequestV2 struct {
	X402Version         int                  `json:"x402Version"`
	PaymentPayload      X402PaymentPayloadV2 `json:"paymentPayload"`
	PaymentRequirements X402RequirementV2    `json:"paymentRequirements"`
}

// facilitatorRequestV2 checks a v2 facilitator request against itself
// (the payload accepted the requirements, pays what they ask) and finds
// the merchant's open session whose deposit address is payTo, in the
// key's mode; as v1's facilitatorRequest does.
func (s *Service) facilitatorRequestV2(ctx context.Context, m *MerchantAuth, req *X402FacilitatorRequestV2) (AuthorizedPaymentRequest, error) {
	pr, pp := req.PaymentRequirements, &req.PaymentPayload
	if req.X402Version != X402Version2 {
		return AuthorizedPaymentRequest{}, Invalid("x402Version", "must be %d", X402Version2)
	}
	if pr.Scheme != X402Scheme {
		return AuthorizedPaymentRequest{}, Invalid("paymentRequirements.scheme", "must be %q", X402Scheme)
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
	w := s.wallets(chain)
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
	return pp.request(addrs[0].Edges.Session.ExternalID, m.Mode)
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
func (s *Service) X402VerifyV2(ctx context.Context, m *MerchantAuth, req *X402FacilitatorRequestV2) (*X402VerifyResponse, error) {
	if isSolanaNetwork(req.PaymentRequirements.Network) {
		return s.x402SolanaVerify(ctx, m, req)
	}
	ar, err := s.facilitatorRequestV2(ctx, m, req)
	return s.x402VerifyAnswer(ctx, req.PaymentPayload.Payload.Authorization.From, ar, err)
}

// X402SettleV2 is the facilitator's settle in version 2 (X402Settle's),
// under the payload's payment-identifier when it carries one.
func (s *Service) X402SettleV2(ctx context.Context, m *MerchantAuth, req *X402FacilitatorRequestV2) (*X402SettleResponse, error) {
	if isSolanaNetwork(req.PaymentRequirements.Network) {
		return s.x402SolanaSettle(ctx, m, req)
	}
	network := req.PaymentPayload.Accepted.Network
	ar, err := s.facilitatorRequestV2(ctx, m, req)
	if err == nil {
		var sess *ent.CheckoutSession
		if sess, err = s.sessionByExternalID(ctx, ar.ExternalID); err == nil {
			id, _ := req.PaymentPayload.paymentID()
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
	return &X402SettleResponse{ErrorReason: reason, Network: network, Payer: req.PaymentPayload.Payload.Authorization.From}, nil
}

// X402SupportedKind is one kind /x402/supported lists.
type X402SupportedKind struct {
	X402Version int    `json:"x402Version"`
	Scheme      string `json:"scheme"`
	Network     string `json:"network"`
	// Extra is the kind's extra: on Solana the fee payer.
	Extra *X402ExtraV2 `json:"extra,omitempty"`
}

// X402Supported is what /x402/supported answers.
type X402Supported struct {
	Kinds      []X402SupportedKind `json:"kinds"`
	Extensions []string            `json:"extensions"`
	// Signers are the treasury's relaying addresses per CAIP-2 family:
	// the accounts that send the transactions (and pay their gas).
	Signers map[string][]string `json:"signers"`
}

// X402SupportedFor is what the facilitator settles for a key of mode: the
// exact scheme on every network of the mode it can relay on, in v1 (the
// networks v1 names) and v2, and on Solana in v2 (its fee payer the
// treasury, x402svm.go).
func (s *Service) X402SupportedFor(mode Mode) *X402Supported {
	out := &X402Supported{Kinds: []X402SupportedKind{}, Extensions: []string{X402PaymentIdentifierExtension}, Signers: map[string][]string{}}
	var signers []string
	for _, chain := range chains.EVMChains {
		network, ok := s.x402EVMNetworkV2(mode, chain)
		if !ok {
			continue
		}
		if v1, ok := s.x402Network(mode, chain); ok {
			out.Kinds = append(out.Kinds, X402SupportedKind{X402Version: X402Version, Scheme: X402Scheme, Network: v1})
		}
		out.Kinds = append(out.Kinds, X402SupportedKind{X402Version: X402Version2, Scheme: X402Scheme, Network: network})
		ledger, _ := s.ledger(mode, chain)
		if g, ok := ledger.(interface{ GasAddress() string }); ok && g.GasAddress() != "" && !slices.Contains(signers, g.GasAddress()) {
			signers = append(signers, g.GasAddress())
		}
	}
	if len(signers) > 0 {
		out.Signers["eip155:*"] = signers
	}
	if settler, _, network, ok := s.x402SolanaSettler(mode); ok {
		out.Kinds = append(out.Kinds, X402SupportedKind{X402Version: X402Version2, Scheme: X402Scheme, Network: network,
			Extra: &X402ExtraV2{FeePayer: settler.FeePayer()}})
		out.Signers["solana:*"] = []string{settler.FeePayer()}
	}
	return out
}
