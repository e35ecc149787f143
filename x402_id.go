package agentpay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/relay"
	"agentpay/internal/idempotency"
	"agentpay/x402"
)

// x402's payment-identifier extension (docs/agent-commerce.md, exactly
// once): the id a v2 client sends in its payload's
// extensions["payment-identifier"].info.id names one payment of the
// session, whatever the client does after a timeout.
//
// An x402 client that retries signs again: a new authorization, a new
// EIP-3009 nonce. The nonce makes each authorization move money at most
// once, but two authorizations are two payments as far as the token is
// concerned, so the id, not the authorization, has to be the unit of
// "once". It is an idempotency key (idempotency.go's table and claim)
// scoped to the session, whose fingerprint is what the payment is: the
// network, the payer, the recipient and the amount. The signature and
// nonce are not in it, so a re-signed retry is the same payment and a
// payment by another payer or of another amount under the same id is a
// conflict (409, as the extension says).
//
// The claim keeps the first authorization (the row's outcome, written
// before the relay, fenced by the claim's attempt) and the id stands for
// that authorization from then on: every retry is answered from it, never
// from its own. So:
//   - first request done: the kept authorization's payment as it stands
//     now (replayAuthorization: found on chain, recorded if the scan has
//     not yet), pending with its transaction while a relay of it is in
//     flight, and otherwise relayed again (the same authorization: the
//     token moves it at most once);
//   - first request still running (another request, this instance or
//     another): never a second relay; the payment if on chain, else
//     pending;
//   - first request's process died after the claim (the lease ran out):
//     the retry takes the claim over and relays the kept authorization,
//     not its own; if the first had broadcast it, the relay answers that
//     transaction (or finds it used on chain) and no second transfer goes
//     out.
// A refusal before anything was broadcast (a ValidationError, the balance
// short, a rate limit, the session not payable) releases the id: the
// client's next attempt with it runs its own authorization.
//
// MPP's Idempotency-Key (mpp.go, the core draft's "Idempotency and Side
// Effects") is the same key: an mppx client that retries after a timeout
// asks for a fresh challenge and signs a new authorization (its nonce is
// the new challenge's hash), exactly as an x402 client signs again. It is
// claimed in the same scope, the session's, with the same fingerprint
// (the network as CAIP-2, eip155:<chain id>, the payer, the recipient,
// the amount), so one key names one payment of the session whichever of
// the two dialects carries it, and a retry in the other dialect is
// answered the first payment. Only the refusal of a key naming another
// payment differs: 409 for a payment-identifier, as the extension says;
// 422 for an Idempotency-Key, as the IETF draft says.

// x402PaymentOperation is the operation the ids are claimed for.
const x402PaymentOperation = "x402_payment"

// x402PaymentID is the payload's payment-identifier id ("" when it
// carries none), or a ValidationError for a malformed one.
func x402PaymentID(p *x402.PaymentPayload) (string, error) {
	id := p.PaymentID()
	if id != "" && !x402.ValidPaymentID(id) {
		return "", Invalid("extensions.payment-identifier.info.id", "must be %d to %d letters, digits, '-' or '_'", x402.PaymentIDMinLen, x402.PaymentIDMaxLen)
	}
	return id, nil
}

func x402IDScope(sessionID uuid.UUID) string { return "x402:" + sessionID.String() }

// x402Fingerprinted is what a payment under an id is: a retry of it
// matches, whatever it signed.
type x402Fingerprinted struct {
	Network string `json:"network"`
	From    string `json:"from"`
	To      string `json:"to"`
	Value   string `json:"value"`
}

// x402IDRequest is a payment under id as its key's claim sees it.
func x402IDRequest(sess *ent.CheckoutSession, id, network string, auth TransferAuthorization) idempotency.Request {
	return idempotency.Request{
		Scope: x402IDScope(sess.ID), Key: id, Operation: x402PaymentOperation,
		Canonical: x402Fingerprinted{
			Network: network, From: strings.ToLower(strings.TrimSpace(auth.From)),
			To: strings.ToLower(strings.TrimSpace(auth.To)), Value: strings.TrimSpace(auth.Value),
		},
	}
}

// x402PaymentAnswer is what an id keeps: the authorization it stands for.
type x402PaymentAnswer struct {
	Chain         string                `json:"chain"`
	Authorization TransferAuthorization `json:"authorization"`
	// Transaction is a Solana exact payment's payer-signed transaction
	// (x402_svm.go), the id's on Solana.
	Transaction string `json:"transaction,omitempty"`
}

// x402AnswerOf reads a kept authorization (nil for none or unreadable).
func x402AnswerOf(kept json.RawMessage) *x402PaymentAnswer {
	if len(kept) == 0 {
		return nil
	}
	var out x402PaymentAnswer
	if err := json.Unmarshal(kept, &out); err != nil || out.Chain == "" {
		return nil
	}
	return &out
}

// payIdentified relays req's authorization paying sess, as the payment
// the id names when there is one (see the note above).
func (s *Service) payIdentified(ctx context.Context, sess *ent.CheckoutSession, id, network string, req AuthorizedPaymentRequest) (*AuthorizedPayment, error) {
	if id == "" {
		return s.PayWithAuthorization(ctx, req)
	}
	return s.payKeyedAs(ctx, sess, x402IDName(id), id, network, req)
}

// payKeyedAs relays req's authorization paying sess as the payment key
// names (see the note above); name says which field carried it.
func (s *Service) payKeyedAs(ctx context.Context, sess *ent.CheckoutSession, name sessionPaymentKey, id, network string, req AuthorizedPaymentRequest) (*AuthorizedPayment, error) {
	first := &x402PaymentAnswer{Chain: req.Chain, Authorization: req.Authorization}
	return s.payIdentifiedBy(ctx, name, x402IDRequest(sess, id, network, req.Authorization), first,
		func() (*AuthorizedPayment, error) { return s.PayWithAuthorization(ctx, req) },
		func(kept *x402PaymentAnswer, mayRelay bool) (*AuthorizedPayment, error) {
			return s.replayIdentified(ctx, req, kept, mayRelay)
		})
}

// sessionPaymentKey names a key of a session's payment in answers: which
// field carried it, and the error that refuses it for another payment.
type sessionPaymentKey struct {
	name   string // "payment-identifier pay_..." or "Idempotency-Key ..."
	reused error
}

// x402IDName: the extension answers an id naming another payment with 409.
func x402IDName(id string) sessionPaymentKey {
	return sessionPaymentKey{name: "payment-identifier " + id, reused: ErrConflict}
}

// idempotencyKeyName: an Idempotency-Key (MPP's, ACP's complete) naming
// another payment is 422, as the IETF draft says.
func idempotencyKeyName(key string) sessionPaymentKey {
	return sessionPaymentKey{name: "Idempotency-Key " + key, reused: ErrIdempotencyKeyReused}
}

// payIdentifiedBy makes the payment key names (see the note above): pay
// makes first, this request's own, when the key is new; replay answers
// from the payment the key keeps otherwise.
func (s *Service) payIdentifiedBy(ctx context.Context, key sessionPaymentKey, r idempotency.Request, first *x402PaymentAnswer,
	pay func() (*AuthorizedPayment, error), replay func(kept *x402PaymentAnswer, mayRelay bool) (*AuthorizedPayment, error)) (*AuthorizedPayment, error) {
	claim, prior, err := s.idem.Claim(ctx, r)
	switch {
	case errors.Is(err, idempotency.ErrKeyReused):
		return nil, fmt.Errorf("%w: %s already names another payment of this session (another payer, recipient, amount or network); a new payment needs a new key", key.reused, key.name)
	case errors.Is(err, idempotency.ErrInProgress):
		held, rerr := s.idem.HeldBy(ctx, r)
		if rerr != nil {
			return nil, fmt.Errorf("reading %s: %w", key.name, rerr)
		}
		kept := x402AnswerOf(held)
		if kept == nil {
			// Claimed an instant ago, its authorization not yet kept:
			// nothing can have been broadcast.
			return nil, fmt.Errorf("%w: the payment named by %s is being made; retry in a moment", ErrConflict, key.name)
		}
		return replay(kept, false)
	case err != nil:
		return nil, err
	case prior != nil:
		var answer json.RawMessage
		if prior.Answer != nil {
			answer = json.RawMessage(*prior.Answer)
		}
		kept := x402AnswerOf(answer)
		if kept == nil {
			return nil, fmt.Errorf("%s: unreadable answer", key.name)
		}
		return replay(kept, true)
	}
	// This request holds the claim. An earlier attempt whose process died
	// may have kept its authorization: the id stands for that one.
	var res *AuthorizedPayment
	kept := x402AnswerOf(claim.Held())
	if kept != nil {
		res, err = replay(kept, true)
	} else {
		kept = first
		if err := claim.Hold(ctx, kept); err != nil {
			s.idem.Finish(ctx, claim, nil, false)
			return nil, err
		}
		res, err = pay()
	}
	s.idem.Finish(ctx, claim, kept, err == nil || !refusedUnsent(err))
	return res, err
}

// refusedUnsent tells a refusal that comes before any broadcast: nothing
// moved, and the id is free for the client's next attempt.
func refusedUnsent(err error) bool {
	var rl *RateLimitError
	return IsValidation(err) || errors.Is(err, ErrInsufficientFunds) || errors.Is(err, ErrConflict) ||
		errors.Is(err, ErrNotFound) || errors.Is(err, ErrForbidden) || errors.As(err, &rl) ||
		errors.As(err, new(relayedPolicyRefusal)) || errors.As(err, new(*MPPError))
}

// replayIdentified answers a retry under an id from the authorization the
// id keeps: its payment if it is on chain, pending while a relay of it is
// in flight (or, when mayRelay is false, while the first request runs),
// and otherwise the same authorization relayed again.
func (s *Service) replayIdentified(ctx context.Context, req AuthorizedPaymentRequest, kept *x402PaymentAnswer, mayRelay bool) (*AuthorizedPayment, error) {
	auth, err := kept.Authorization.parse()
	if err != nil {
		return nil, err
	}
	t, err := s.authorizedTargetOf(ctx, req.ExternalID, kept.Chain)
	if err != nil {
		return nil, err
	}
	res, done, err := s.replayAuthorization(ctx, t, auth)
	if done || err != nil {
		if res != nil {
			res.Replayed = true
		}
		return res, err
	}
	pending := &AuthorizedPayment{
		Session: t.sess, Chain: t.chain, Payer: auth.From, PayTo: auth.To,
		AmountUSD: FromBaseUnits(auth.Value, t.ledger.Decimals()), Status: "pending", Replayed: true,
	}
	if n, ok := s.networks(t.mode)[t.chain]; ok {
		pending.Required = n.Confirmations
	}
	of := s.relayOutflowsOf(t, auth)
	inFlight, err := of.query(s.cfg.DB.Ent).Where(
		relay.Nonce(of.nonce), relay.StatusIn(relay.StatusPending, relay.StatusSubmitted), relay.InFlightUntilGT(of.now),
	).Order(ent.Desc(relay.FieldCreatedAt)).First(ctx)
	switch {
	case err == nil:
		pending.TxHash = inFlight.TxHash
		return pending, nil
	case !ent.IsNotFound(err):
		return nil, fmt.Errorf("x402: reading relays: %w", err)
	case !mayRelay:
		return pending, nil
	}
	res, err = s.PayWithAuthorization(ctx, AuthorizedPaymentRequest{
		ExternalID: req.ExternalID, Chain: kept.Chain, Authorization: kept.Authorization, Wait: req.Wait, ClientIP: req.ClientIP,
	})
	if res != nil {
		res.Replayed = true
	}
	return res, err
}
