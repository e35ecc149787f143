package agentpay

import (
	"context"
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
)

// A session needs its merchant's attention when what was paid is not what
// was asked (issue 27): a customer who paid part and has not sent the
// rest, or sent more than the amount, or paid after the session ended or
// was already paid. The dashboard flags each with what to do; the rule of
// when, and the advice, are here (the page renders them and derives
// nothing). The amounts follow the books: a payment refunded in full needs
// nothing more.

// AttentionKind is why a session is flagged.
type AttentionKind string

const (
	// AttentionUnderpaid: the session is open with part of its amount
	// paid, waiting for the rest.
	AttentionUnderpaid AttentionKind = "underpaid"
	// AttentionUnderpaidEnded: the session expired or was cancelled with
	// part of its amount paid; what arrived is held for refund.
	AttentionUnderpaidEnded AttentionKind = "underpaid_ended"
	// AttentionOverpaid: the counted payments exceed the amount; the
	// excess settles with them unless refunded.
	AttentionOverpaid AttentionKind = "overpaid"
	// AttentionLatePayment: a payment arrived after the session expired or
	// was cancelled; it is held.
	AttentionLatePayment AttentionKind = "late_payment"
	// AttentionRepeatPayment: a payment arrived after the session was
	// already paid; it is held.
	AttentionRepeatPayment AttentionKind = "repeat_payment"
)

// SessionAttention is one thing about a session its merchant should act
// on, with what to do.
type SessionAttention struct {
	Kind AttentionKind
	// PaymentExternalID names the payment concerned; "" when it is the
	// session's sum (underpaid, overpaid).
	PaymentExternalID string
	// Amount is the USD concerned: still due (underpaid), paid beyond the
	// amount and not refunded (overpaid), or held and not refunded.
	Amount decimal.Decimal
	// Advice says what happened and what the merchant can do, a sentence.
	Advice string
}

// SessionAttention lists what about sess needs its merchant's attention,
// in the order of the rule (attentionOf); none for a session paid as
// asked. sess is one the caller may read (the resolver's object).
func (s *Service) SessionAttention(ctx context.Context, sess *ent.CheckoutSession) ([]SessionAttention, error) {
	ps, err := sess.QueryPayments().
		Where(payment.StatusNEQ(payment.StatusFailed)).
		Order(ent.Asc(payment.FieldCreatedAt), ent.Asc(payment.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading payments: %w", err)
	}
	m, err := sess.QueryMerchant().Only(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading merchant: %w", err)
	}
	return attentionOf(sess, ps, m.SettleHeldPayments), nil
}

// attentionOf is the rule. Counted payments are the session's live ones
// not late (what sessionPaid sums); a held payment is a confirmed one the
// session did not count: late (after expiry or cancel), repeat (after it
// was paid), or part of an amount never completed. settleHeld is the
// merchant's settle_held_payments, which pays held money out instead of
// keeping it for refund.
func attentionOf(sess *ent.CheckoutSession, ps []*ent.Payment, settleHeld bool) []SessionAttention {
	var out []SessionAttention
	paid, refunded := decimal.Zero, decimal.Zero
	for _, p := range ps {
		if p.Late {
			continue
		}
		paid = paid.Add(p.AmountUsd)
		refunded = refunded.Add(USDCAmount(p.RefundedToken))
	}
	ended := sess.Status == checkoutsession.StatusExpired || sess.Status == checkoutsession.StatusCancelled
	progress := ProgressOf(sess.Status, sess.AmountUsd, paid)
	held := heldAdvice(settleHeld)
	switch {
	case progress.State == PageStateUnderpaid:
		out = append(out, SessionAttention{Kind: AttentionUnderpaid, Amount: progress.Due,
			Advice: fmt.Sprintf("Part paid: %s of %s arrived and %s is still due. The customer can send the rest from the hosted page until the session expires; if they do not, what arrived is held for you to refund.",
				usdText(paid), usdText(sess.AmountUsd), usdText(progress.Due))})
	case ended && paid.IsPositive():
		// Each part-payment is held; the session's flag carries their sum
		// not yet refunded.
		left := paid.Sub(refunded)
		if left.IsPositive() {
			out = append(out, SessionAttention{Kind: AttentionUnderpaidEnded, Amount: left,
				Advice: fmt.Sprintf("The session %s with %s of %s paid, so the order was not paid in full. %s",
					endedText(sess.Status), usdText(paid), usdText(sess.AmountUsd), held)})
		}
	case progress.Excess.IsPositive():
		// Refunds of the counted payments return the excess first.
		left := progress.Excess.Sub(refunded)
		if left.IsPositive() {
			out = append(out, SessionAttention{Kind: AttentionOverpaid, Amount: left,
				Advice: fmt.Sprintf("Overpaid: the customer sent %s more than the amount. The excess settles to you with the payment; refund %s to return it.",
					usdText(left), usdText(left))})
		}
	}
	for _, p := range ps {
		if !p.Late || p.Status != payment.StatusConfirmed {
			continue
		}
		left := p.AmountUsd.Sub(USDCAmount(p.RefundedToken))
		if !left.IsPositive() {
			continue
		}
		a := SessionAttention{Kind: AttentionLatePayment, PaymentExternalID: p.ExternalID, Amount: left,
			Advice: fmt.Sprintf("Late: %s arrived after the session %s. %s", usdText(left), endedText(sess.Status), held)}
		if sess.Status == checkoutsession.StatusConfirmed {
			a.Kind = AttentionRepeatPayment
			a.Advice = fmt.Sprintf("Paid twice: %s arrived after the session was already paid. %s", usdText(left), held)
		}
		out = append(out, a)
	}
	return out
}

// endedText says how a session ended, in a sentence.
func endedText(status checkoutsession.Status) string {
	if status == checkoutsession.StatusCancelled {
		return "was cancelled"
	}
	return string(status)
}

// heldAdvice says what becomes of held money under the merchant's
// setting.
func heldAdvice(settleHeld bool) string {
	if settleHeld {
		return "It is held, and paid out to you in your next settlement batch (settle held payments is on); refund it if the customer did not mean to pay it."
	}
	return "It is held, not settled: refund it to the customer, or turn on settle held payments to have it paid out to you."
}

// usdText writes a USD amount as people read it: thousands separated, two
// decimals, or every decimal an amount below a cent needs; "USD" once.
func usdText(d decimal.Decimal) string {
	s := d.StringFixed(2)
	if !d.Equal(d.Truncate(2)) {
		s = d.String()
	}
	whole, frac, _ := strings.Cut(s, ".")
	sign := ""
	if strings.HasPrefix(whole, "-") {
		sign, whole = "-", whole[1:]
	}
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return sign + b.String() + "." + frac + " USD"
}
