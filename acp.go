package agentpay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/idempotency"
	"agentpay/x402"
)

// The Agentic Commerce Protocol (ACP 2026-04-17) seller facade: an ACP
// checkout session IS an agentpay checkout session (one row, one state
// machine); this file holds the few rules the facade adds. The line items
// the agent sent are kept in the session's metadata under ACPMetadataKey,
// the amount is their sum, and completion pays through the x402 v2 relay
// (PayX402V2): the crypto payment handler of the open x402 proposal.

// ACPVersion is the ACP version the facade speaks (API-Version header).
const ACPVersion = "2026-04-17"

// ACPMetadataKey is the session metadata entry holding the ACP line items.
const ACPMetadataKey = "acp_line_items"

// ACPMaxLineItems bounds a create request.
const ACPMaxLineItems = 100

// ACPX402HandlerID is the payment handler id the facade offers.
const ACPX402HandlerID = "agentpay_x402"

// The credential types the crypto handler takes in
// payment_data.instrument.credential.type: an x402 v2 payment payload
// (base64 JSON, as PAYMENT-SIGNATURE carries it) or an MPP credential (the
// base64url JSON an Authorization: Payment header carries, with or without
// its "Payment " scheme).
const (
	ACPCredentialX402 = "x402_payment_payload"
	ACPCredentialMPP  = "mpp_credential"
)

// ACPCredential is what complete pays with. Realm is the host the agent
// asked, against which an MPP challenge's realm is checked (MPP's
// challenges are issued per host, as at the session's MPP address).
type ACPCredential struct {
	HandlerID, Type, Token, Realm string
}

// ACPItem is one line item as the agent sends it: unit_amount in US cents.
type ACPItem struct {
	ID         string `json:"id"`
	Name       string `json:"name,omitempty"`
	UnitAmount int64  `json:"unit_amount"`
}

// ACPCreate is an ACP create request as the facade reads it.
type ACPCreate struct {
	Currency  string
	LineItems []ACPItem
}

// acpOperations name the keyed operations (never replayed as each other).
const (
	acpCreateOperation   = "acp_create"
	acpCompleteOperation = "acp_complete"
	acpCancelOperation   = "acp_cancel"
)

func acpScope(auth *MerchantAuth) string {
	return fmt.Sprintf("merchant:%s:%s", auth.Merchant.ID, auth.Mode)
}

// validate checks the items and answers the session amount in USD.
func (in ACPCreate) validate() (decimal.Decimal, error) {
	if !strings.EqualFold(in.Currency, SessionCurrency) {
		return decimal.Zero, Invalid("currency", "must be usd")
	}
	if len(in.LineItems) == 0 || len(in.LineItems) > ACPMaxLineItems {
		return decimal.Zero, Invalid("line_items", "must hold 1 to %d items", ACPMaxLineItems)
	}
	var cents int64
	for i, it := range in.LineItems {
		if it.ID == "" || len(it.ID) > 255 || len(it.Name) > 255 {
			return decimal.Zero, Invalid(fmt.Sprintf("line_items[%d]", i), "needs an id (and a name) of at most 255 characters")
		}
		// The caller holds the merchant's secret key: it prices the items.
		if it.UnitAmount <= 0 || it.UnitAmount > 100_000_000 {
			return decimal.Zero, Invalid(fmt.Sprintf("line_items[%d].unit_amount", i), "must be a positive amount of cents")
		}
		cents += it.UnitAmount
	}
	return decimal.New(cents, -SessionAmountDecimals), nil
}

// CreateACPCheckout creates the session of an ACP checkout under key. A
// replay answers the session as it is now.
func (s *Service) CreateACPCheckout(ctx context.Context, auth *MerchantAuth, key string, in ACPCreate) (*ent.CheckoutSession, bool, error) {
	return s.acpKeyed(ctx, auth, key, acpCreateOperation, in, nil, func(ctx context.Context) (*ent.CheckoutSession, error) {
		amount, err := in.validate()
		if err != nil {
			return nil, err
		}
		items := make([]any, len(in.LineItems))
		for i, it := range in.LineItems {
			items[i] = map[string]any{"id": it.ID, "name": it.Name, "unit_amount": json.Number(fmt.Sprint(it.UnitAmount))}
		}
		created, err := s.CreateSession(ctx, auth, SessionInput{
			Amount: &amount, Currency: SessionCurrency,
			Metadata: map[string]any{ACPMetadataKey: items},
		})
		if err != nil {
			return nil, err
		}
		return created.Session, nil
	})
}

// CancelACPCheckout cancels an ACP checkout under key.
func (s *Service) CancelACPCheckout(ctx context.Context, auth *MerchantAuth, key, externalID string) (*ent.CheckoutSession, bool, error) {
	return s.acpKeyed(ctx, auth, key, acpCancelOperation, externalID, nil, func(ctx context.Context) (*ent.CheckoutSession, error) {
		return s.CancelSession(ctx, auth, externalID)
	})
}

// CompleteACPCheckout pays an ACP checkout with the credential: an x402 v2
// payment payload settled by the relay as x402 pays any session
// (PayX402V2), or an MPP credential answering one of the session's Payment
// challenges, settled as MPP pays any session (PayMPP). An MPP refusal is
// invalid input here (ACP has no 402), its code kept in the message.
//
// Exactly once (docs/agent-commerce.md#exactly-once-on-every-path): the
// request's key also names the session's payment, as MPP's
// Idempotency-Key does (x402_id.go; a payload's own payment-identifier
// wins), so the payment keeps the credential's authorization before it is
// relayed. A retry while the first request holds the key (still running,
// or its process died after broadcasting, until the lease runs out) is
// answered from that payment, the session as it is now (complete in
// progress while the chain has not decided), never relayed a second time;
// only a first that has kept nothing yet makes it 409 (nothing moved).
func (s *Service) CompleteACPCheckout(ctx context.Context, auth *MerchantAuth, key, externalID string, cred ACPCredential, clientIP string) (*ent.CheckoutSession, bool, error) {
	// The realm is not part of the request the key names: the same body
	// replayed through another host is the same request.
	canonical := struct{ ID, Handler, Token string }{externalID, cred.HandlerID, cred.Token}
	if cred.Type == ACPCredentialMPP {
		canonical.Handler += "/" + ACPCredentialMPP
	}
	complete := func(ctx context.Context) (*ent.CheckoutSession, error) {
		if _, err := s.MerchantSession(ctx, auth, externalID); err != nil {
			return nil, err
		}
		paymentKey, err := ParseIdempotencyKey(key) // acpKeyed took it: well formed
		if err != nil {
			return nil, err
		}
		if cred.HandlerID != ACPX402HandlerID {
			return nil, Invalid("payment_data.handler_id", "must be %s", ACPX402HandlerID)
		}
		switch cred.Type {
		case ACPCredentialX402, "":
			var p *x402.PaymentPayload
			if p, err = DecodeX402PaymentV2(cred.Token); err == nil {
				_, _, err = s.payX402V2(ctx, externalID, clientIP, p, paymentKey)
			}
		case ACPCredentialMPP:
			err = s.completeACPWithMPP(ctx, externalID, cred, clientIP, paymentKey)
		default:
			return nil, Invalid("payment_data.instrument.credential.type", "must be %s or %s", ACPCredentialX402, ACPCredentialMPP)
		}
		if err != nil {
			return nil, err
		}
		return s.MerchantSession(ctx, auth, externalID)
	}
	return s.acpKeyed(ctx, auth, key, acpCompleteOperation, canonical, complete, complete)
}

func (s *Service) completeACPWithMPP(ctx context.Context, externalID string, cred ACPCredential, clientIP, key string) error {
	header := strings.TrimSpace(cred.Token)
	if scheme, _, _ := strings.Cut(header, " "); !strings.EqualFold(scheme, "Payment") {
		header = "Payment " + header
	}
	c, err := DecodeMPPCredential(header)
	if err == nil {
		_, _, err = s.PayMPP(ctx, externalID, cred.Realm, clientIP, &key, c)
	}
	var refusal *MPPError
	if errors.As(err, &refusal) {
		return Invalid("payment_data.instrument.credential.token", "MPP %s: %s", refusal.Code, refusal.Detail)
	}
	return err
}

// acpKeyed runs op under the merchant's key: a replay reads the session
// again; the same key with another request is ErrConflict. While the
// first request holds the key, inFlight (nil: none) answers the retry
// instead of the runner's in-progress refusal: an operation whose own
// effect is keyed (complete's payment) answers what that effect is now.
func (s *Service) acpKeyed(ctx context.Context, auth *MerchantAuth, key, operation string, canonical any, inFlight, op func(context.Context) (*ent.CheckoutSession, error)) (*ent.CheckoutSession, bool, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, false, err
	}
	k, err := ParseIdempotencyKey(key)
	if err != nil {
		return nil, false, err
	}
	cs, replayed, err := idempotency.Do(ctx, s.idem, idempotency.Op[*ent.CheckoutSession]{
		Request: idempotency.Request{Scope: acpScope(auth), Key: k, Operation: operation, Canonical: canonical},
		Run: func(ctx context.Context, _ *idempotency.Claim) (*ent.CheckoutSession, error) {
			return op(ctx)
		},
		Keep: func(cs *ent.CheckoutSession) any { return cs.ExternalID },
		Replay: func(ctx context.Context, kept json.RawMessage) (*ent.CheckoutSession, error) {
			var id string
			if err := json.Unmarshal(kept, &id); err != nil {
				return nil, fmt.Errorf("idempotency key: unreadable acp answer: %w", err)
			}
			return s.MerchantSession(ctx, auth, id)
		},
	})
	if inFlight != nil && errors.Is(err, idempotency.ErrInProgress) {
		cs, err = inFlight(ctx)
		return cs, true, err
	}
	return cs, replayed, err
}

// ACPStatus is a session's status in ACP's words.
func ACPStatus(st checkoutsession.Status) string {
	switch st {
	case checkoutsession.StatusPending:
		return "ready_for_payment"
	case checkoutsession.StatusDetecting, checkoutsession.StatusConfirming:
		return "complete_in_progress"
	case checkoutsession.StatusConfirmed:
		return "completed"
	case checkoutsession.StatusCancelled:
		return "canceled"
	default:
		return "expired"
	}
}

// ACPLineItems reads the items kept in a session's metadata.
func ACPLineItems(cs *ent.CheckoutSession) []ACPItem {
	raw, err := json.Marshal(cs.Metadata[ACPMetadataKey])
	if err != nil {
		return nil
	}
	var out []ACPItem
	_ = json.Unmarshal(raw, &out)
	return out
}
