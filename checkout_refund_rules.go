package agentpay

import (
	"context"
	"fmt"
	"math/big"
	"strings"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
)

// refundablePayment picks the payment a refund is for: the one named, or
// the session's only confirmed payment with something left to refund.
func refundablePayment(ctx context.Context, tx *ent.Tx, sess *ent.CheckoutSession, paymentID string) (*ent.Payment, error) {
	ps, err := tx.Payment.Query().
		Where(payment.SessionID(sess.ID)).
		Order(ent.Asc(payment.FieldCreatedAt), ent.Asc(payment.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading payments: %w", err)
	}
	var p *ent.Payment
	if paymentID != "" {
		for _, c := range ps {
			if c.ExternalID == paymentID {
				p = c
			}
		}
		if p == nil {
			return nil, fmt.Errorf("%w: payment %q of session %s", ErrNotFound, paymentID, sess.ExternalID)
		}
	} else {
		var open []string
		for _, c := range ps {
			if c.Status == payment.StatusConfirmed && c.RefundedToken < c.AmountToken {
				p = c
				open = append(open, c.ExternalID)
			}
		}
		switch len(open) {
		case 0:
			if len(ps) == 0 {
				return nil, fmt.Errorf("%w: session %s has no payment to refund", ErrConflict, sess.ExternalID)
			}
			p = ps[len(ps)-1] // explained below
		case 1:
		default:
			return nil, Invalid("payment_id", "session %s has %d refundable payments (%s): name one", sess.ExternalID, len(open), strings.Join(open, ", "))
		}
	}
	if p.Status != payment.StatusConfirmed {
		return nil, fmt.Errorf("%w: payment %s is %s, not final yet: it can be refunded once confirmed", ErrConflict, p.ExternalID, p.Status)
	}
	return p, nil
}

// refundDestination is where a refund of p goes: the payer's address
// unless address names another (chosen), which only the merchant's secret
// key may do. The address is checked on the payment's chain.
func (s *Service) refundDestination(ledger chains.Ledger, auth *MerchantAuth, p *ent.Payment, address string) (to string, chosen bool, err error) {
	to = address
	if to == "" {
		if p.FromAddress == "" {
			return "", false, Invalid("address", "payment %s has no payer address on record: give the address to refund to", p.ExternalID)
		}
		to = p.FromAddress
	}
	if err := ledger.ValidateAddress(to); err != nil {
		return "", false, Invalid("address", "%s is not an address on %s: %v", to, p.Chain, err)
	}
	norm := s.wallets(chains.Name(p.Chain)).NormalizeAddress
	chosen = p.FromAddress == "" || norm(to) != norm(p.FromAddress)
	if !chosen {
		to = p.FromAddress // the payer's, as recorded
	}
	if chosen && auth.Dashboard != nil {
		return "", false, fmt.Errorf("%w: a refund to an address other than the payer's (%s) needs the merchant's secret key; a dashboard session refunds to the payer only",
			ErrForbidden, firstNonEmpty(p.FromAddress, "none on record"))
	}
	return to, chosen, nil
}

// requestedWith records on the refund being created the credential that
// asked for it: the secret key's key pair, or the dashboard session's
// member.
func requestedWith(ctx context.Context, tx *ent.Tx, auth *MerchantAuth, create *ent.RefundCreate) error {
	if auth.Dashboard != nil {
		create.SetRequestedWith(refund.RequestedWithDashboardSession).SetDashboardUserID(auth.Dashboard.UserID)
		return nil
	}
	create.SetRequestedWith(refund.RequestedWithSecretKey)
	if auth.keyMatch == nil {
		return nil // a MerchantAuth made in process (tests, tools): no key to name
	}
	id, err := tx.MerchantKey.Query().Where(auth.keyMatch).FirstID(ctx)
	if err != nil && !ent.IsNotFound(err) {
		return fmt.Errorf("reading the refund's key: %w", err)
	}
	if err == nil {
		create.SetMerchantKeyID(id)
	}
	return nil
}

// paidOut reports whether p's payout has gone out or is going: p is in a
// settlement batch, or was paid out on its own (before batches).
func paidOut(p *ent.Payment) bool {
	if p.SettlementBatchID != nil {
		return true
	}
	return p.SettlementStatus != nil &&
		(*p.SettlementStatus == payment.SettlementStatusSubmitted || *p.SettlementStatus == payment.SettlementStatusCompleted)
}

// unpaidOf is what the payout of paid-out payment p did not pay the
// merchant of it, the fee aside: the refunds made before the payout
// (amount - fee - net). A refund made before the payout that failed
// afterwards leaves that much in the treasury, which a later refund of p
// uses before the merchant's unsettled money.
func unpaidOf(p *ent.Payment) int64 {
	var fee, net int64
	if p.SettlementFee != nil {
		fee = *p.SettlementFee
	}
	if p.SettlementNet != nil {
		net = *p.SettlementNet
	}
	return max(p.AmountToken-fee-net, 0)
}

// reserveAfterPayout is what a refund of units of paid-out payment p (its
// refunded_token already counting them) reserves of the merchant's
// unsettled money: the part p's own unpaid money does not cover. More
// than the merchant has available is refused, saying what is.
func reserveAfterPayout(p *ent.Payment, units int64, u unsettledBalance, decimals int32) (int64, error) {
	own := max(unpaidOf(p)-(p.RefundedToken-units), 0)
	reserve := units - min(units, own)
	if reserve == 0 {
		return 0, nil
	}
	if u.refunds >= MaxPaymentsPerBatch {
		return 0, fmt.Errorf("%w: %d refunds after a payout on %s wait for the merchant's next settlement, the most there may be; refund again after it",
			ErrConflict, u.refunds, p.Chain)
	}
	if available := u.available(); reserve > available {
		usd := func(units int64) string { return FromBaseUnits(big.NewInt(units), decimals).String() }
		return 0, Invalid("amount_usd", "payment %s was paid out to the merchant; a refund after the payout is paid from what the merchant still holds unsettled on %s (%s mode): %s USDC available (unsettled payments %s, less refunds already reserved %s and a carried deficit %s), %s asked",
			p.ExternalID, p.Chain, sessionModeOf(u.key.Livemode), usd(max(available, 0)), usd(u.unsettled), usd(u.reserved), usd(u.carried), usd(reserve))
	}
	return reserve, nil
}

// keepsReservationsCovered refuses a refund before the payout of counted
// payment p (its net already lowered by resettle) when that would leave
// the merchant less unsettled money than refunds after a payout reserved
// of it. Held payments back no reservation and pass.
func keepsReservationsCovered(ctx context.Context, tx *ent.Tx, key SettlementKey, p *ent.Payment, before unsettledBalance, decimals int32) error {
	if before.reserved == 0 && before.carried == 0 {
		return nil
	}
	after, err := readUnsettled(ctx, tx, key)
	if err != nil {
		return err
	}
	if after.available() >= 0 || after.unsettled == before.unsettled {
		return nil
	}
	return Invalid("amount_usd", "payment %s's money backs refunds made after a payout on %s (%s mode): the merchant holds %s USDC unsettled beyond them, which this refund would take more than",
		p.ExternalID, p.Chain, sessionModeOf(key.Livemode), FromBaseUnits(big.NewInt(max(before.available(), 0)), decimals))
}

// resettle recomputes a pending settlement's fee and net after the
// payment's refunded amount changed; a payment in a batch keeps what the
// batch paid (a refund after the payout reserves the merchant's unsettled
// money instead).
func resettle(ctx context.Context, tx *ent.Tx, p *ent.Payment) error {
	if p.SettlementStatus == nil || *p.SettlementStatus != payment.SettlementStatusPending || p.SettlementBatchID != nil {
		return nil
	}
	left := p.AmountToken - p.RefundedToken
	fee := TransferFee(left)
	_, err := tx.Payment.Update().
		Where(payment.ID(p.ID), payment.SettlementStatusEQ(payment.SettlementStatusPending), payment.SettlementBatchIDIsNil()).
		SetSettlementFee(fee).
		SetSettlementNet(left - fee).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("recomputing the settlement of payment %s: %w", p.ExternalID, err)
	}
	return nil
}
