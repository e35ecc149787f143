package agentpay

import (
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
)

func TestSessionAttentionRule(t *testing.T) {
	usd := decimal.RequireFromString
	pay := func(id, amount string, late bool, status payment.Status, refunded int64) *ent.Payment {
		return &ent.Payment{ExternalID: id, AmountUsd: usd(amount), Late: late, Status: status, RefundedToken: refunded}
	}
	confirmed := payment.StatusConfirmed
	type flag struct {
		kind    AttentionKind
		payment string
		amount  string
		advice  string // a part of the advice
	}
	tests := []struct {
		name       string
		status     checkoutsession.Status
		payments   []*ent.Payment
		settleHeld bool
		want       []flag
	}{
		{"paid as asked", checkoutsession.StatusConfirmed, []*ent.Payment{pay("p1", "10", false, confirmed, 0)}, false, nil},
		{"no payment", checkoutsession.StatusPending, nil, false, nil},
		{"expired unpaid", checkoutsession.StatusExpired, nil, false, nil},
		{"part paid, open", checkoutsession.StatusDetecting, []*ent.Payment{pay("p1", "4", false, payment.StatusDetected, 0)}, false,
			[]flag{{AttentionUnderpaid, "", "6", "4.00 USD of 10.00 USD arrived and 6.00 USD is still due"}}},
		{"part paid, expired", checkoutsession.StatusExpired, []*ent.Payment{pay("p1", "4", false, confirmed, 0)}, false,
			[]flag{{AttentionUnderpaidEnded, "", "4", "The session expired with 4.00 USD of 10.00 USD paid"}}},
		{"part paid, cancelled, settle held on", checkoutsession.StatusCancelled, []*ent.Payment{pay("p1", "4", false, confirmed, 0)}, true,
			[]flag{{AttentionUnderpaidEnded, "", "4", "The session was cancelled with 4.00 USD of 10.00 USD paid, so the order was not paid in full. It is held, and paid out to you in your next settlement batch"}}},
		{"part paid, expired, refunded in part", checkoutsession.StatusExpired, []*ent.Payment{pay("p1", "4", false, confirmed, 1_500_000)}, false,
			[]flag{{AttentionUnderpaidEnded, "", "2.5", "refund it to the customer"}}},
		{"part paid, expired, refunded", checkoutsession.StatusExpired, []*ent.Payment{pay("p1", "4", false, confirmed, 4_000_000)}, false, nil},
		{"overpaid", checkoutsession.StatusConfirmed, []*ent.Payment{pay("p1", "8", false, confirmed, 0), pay("p2", "4", false, confirmed, 0)}, false,
			[]flag{{AttentionOverpaid, "", "2", "the customer sent 2.00 USD more than the amount"}}},
		{"overpaid while confirming", checkoutsession.StatusConfirming, []*ent.Payment{pay("p1", "12", false, payment.StatusDetected, 0)}, false,
			[]flag{{AttentionOverpaid, "", "2", "refund 2.00 USD to return it"}}},
		{"overpaid, excess partly refunded", checkoutsession.StatusConfirmed, []*ent.Payment{pay("p1", "12", false, confirmed, 1_000_000)}, false,
			[]flag{{AttentionOverpaid, "", "1", "1.00 USD more"}}},
		{"overpaid, excess refunded", checkoutsession.StatusConfirmed, []*ent.Payment{pay("p1", "12", false, confirmed, 2_000_000)}, false, nil},
		{"late after expiry", checkoutsession.StatusExpired, []*ent.Payment{pay("p9", "10", true, confirmed, 0)}, false,
			[]flag{{AttentionLatePayment, "p9", "10", "Late: 10.00 USD arrived after the session expired. It is held, not settled"}}},
		{"late after cancel", checkoutsession.StatusCancelled, []*ent.Payment{pay("p9", "10", true, confirmed, 0)}, false,
			[]flag{{AttentionLatePayment, "p9", "10", "after the session was cancelled"}}},
		{"late, not confirmed yet", checkoutsession.StatusExpired, []*ent.Payment{pay("p9", "10", true, payment.StatusDetected, 0)}, false, nil},
		{"late, refunded", checkoutsession.StatusExpired, []*ent.Payment{pay("p9", "10", true, confirmed, 10_000_000)}, false, nil},
		{"paid twice", checkoutsession.StatusConfirmed, []*ent.Payment{pay("p1", "10", false, confirmed, 0), pay("p2", "10", true, confirmed, 0)}, false,
			[]flag{{AttentionRepeatPayment, "p2", "10", "Paid twice: 10.00 USD arrived after the session was already paid"}}},
		{"part paid, expired, then a late payment", checkoutsession.StatusExpired,
			[]*ent.Payment{pay("p1", "4", false, confirmed, 0), pay("p2", "6", true, confirmed, 0)}, false,
			[]flag{{AttentionUnderpaidEnded, "", "4", "4.00 USD of 10.00 USD"}, {AttentionLatePayment, "p2", "6", "6.00 USD arrived after"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sess := &ent.CheckoutSession{Status: tt.status, AmountUsd: usd("10")}
			got := attentionOf(sess, tt.payments, tt.settleHeld)
			require.Len(t, got, len(tt.want), "%+v", got)
			for i, w := range tt.want {
				require.Equal(t, w.kind, got[i].Kind)
				require.Equal(t, w.payment, got[i].PaymentExternalID)
				require.True(t, usd(w.amount).Equal(got[i].Amount), "amount %s, want %s", got[i].Amount, w.amount)
				require.Contains(t, got[i].Advice, w.advice)
			}
		})
	}
}

func TestUSDText(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0.00 USD", "12": "12.00 USD", "12.5": "12.50 USD", "1234.5": "1,234.50 USD", "1234567.891": "1,234,567.891 USD",
		"0.000001": "0.000001 USD", "999": "999.00 USD", "1000": "1,000.00 USD", "-1500.25": "-1,500.25 USD",
	} {
		require.Equal(t, want, usdText(decimal.RequireFromString(in)), in)
	}
}
