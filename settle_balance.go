package agentpay

import (
	"context"
	"fmt"

	entsql "entgo.io/ent/dialect/sql"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/ent/predicate"
	"agentpay/ent/refund"
	"agentpay/ent/settlementbatch"
)

func batchOf(key SettlementKey) predicate.SettlementBatch {
	return settlementbatch.And(
		settlementbatch.MerchantID(key.MerchantID),
		settlementbatch.Livemode(key.Livemode),
		settlementbatch.Chain(key.Chain),
	)
}

// paymentsOf matches the payments of key's merchant, mode and chain.
func paymentsOf(key SettlementKey) predicate.Payment {
	return payment.And(
		payment.Chain(key.Chain),
		payment.HasSessionWith(checkoutsession.MerchantID(key.MerchantID), checkoutsession.Livemode(key.Livemode)),
	)
}

// heldToSettle matches held payments (swept, never counted) with something
// left after their refunds: what settle_held_payments pays out.
func heldToSettle() predicate.Payment {
	return payment.And(
		payment.StatusEQ(payment.StatusConfirmed),
		payment.SettlementStatusIsNil(),
		payment.SweptAtNotNil(),
		payment.Or(payment.Late(true), payment.HasSessionWith(checkoutsession.StatusIn(endedStatuses...))),
		func(sel *entsql.Selector) {
			sel.Where(entsql.ColumnsLT(sel.C(payment.FieldRefundedToken), sel.C(payment.FieldAmountToken)))
		},
	)
}

// countedToSettle matches counted payments swept and in no batch yet.
func countedToSettle() predicate.Payment {
	return payment.And(
		payment.SettlementStatusEQ(payment.SettlementStatusPending),
		payment.SettlementBatchIDIsNil(),
		payment.SweptAtNotNil(),
	)
}

// unsettledBalance is what a merchant holds with the service on one chain
// and mode and has not been paid yet, in base units.
type unsettledBalance struct {
	key SettlementKey
	// unsettled: the nets of its confirmed counted payments in no batch
	// yet (swept or not): what its next batches pay it.
	unsettled int64
	// reserved: what refunds after a payout took of it, not netted off a
	// batch yet (and not failed); refunds is how many they are.
	reserved int64
	refunds  int
	// carried: the deficit its last batch carried over (only refunds
	// advanced before reservations existed leave one).
	carried int64
}

// available is what a refund after a payout may still reserve.
func (u unsettledBalance) available() int64 { return u.unsettled - u.reserved - u.carried }

// unsettledPayments matches key's payments whose net the next batches pay.
func unsettledPayments(key SettlementKey) predicate.Payment {
	return payment.And(
		paymentsOf(key),
		payment.StatusEQ(payment.StatusConfirmed),
		payment.SettlementStatusEQ(payment.SettlementStatusPending),
		payment.SettlementBatchIDIsNil(),
	)
}

// reservedRefunds matches key's refunds after a payout whose reservation
// is not netted off a batch yet and still holds (not failed).
func reservedRefunds(key SettlementKey) predicate.Refund {
	return refund.And(
		refund.MerchantID(key.MerchantID),
		refund.Livemode(key.Livemode),
		refund.Chain(key.Chain),
		refund.ReservedTokenGT(0),
		refund.NettedBatchIDIsNil(),
		refund.StatusNEQ(refund.StatusFailed),
	)
}

// readUnsettled reads key's unsettledBalance in tx, under
// lockSettlementKey.
func readUnsettled(ctx context.Context, tx *ent.Tx, key SettlementKey) (unsettledBalance, error) {
	u := unsettledBalance{key: key}
	sum := func(col string) func(*entsql.Selector) string {
		return func(sel *entsql.Selector) string { return "COALESCE(SUM(" + sel.C(col) + "), 0)" }
	}
	nets, err := tx.Payment.Query().Where(unsettledPayments(key)).Aggregate(sum(payment.FieldSettlementNet)).Int(ctx)
	if err != nil {
		return u, fmt.Errorf("summing unsettled payments: %w", err)
	}
	var rs []struct {
		Sum   int64 `json:"sum"`
		Count int   `json:"count"`
	}
	if err := tx.Refund.Query().Where(reservedRefunds(key)).Aggregate(
		func(sel *entsql.Selector) string {
			return entsql.As("COALESCE(SUM("+sel.C(refund.FieldReservedToken)+"), 0)", "sum")
		},
		func(sel *entsql.Selector) string { return entsql.As("COUNT(*)", "count") },
	).Scan(ctx, &rs); err != nil {
		return u, fmt.Errorf("summing reserved refunds: %w", err)
	}
	prev, err := tx.SettlementBatch.Query().Where(batchOf(key)).Order(ent.Desc(settlementbatch.FieldSeq)).First(ctx)
	if err != nil && !ent.IsNotFound(err) {
		return u, err
	}
	u.unsettled = int64(nets)
	if len(rs) == 1 {
		u.reserved, u.refunds = rs[0].Sum, rs[0].Count
	}
	if prev != nil {
		u.carried = prev.CarriedOut
	}
	return u, nil
}
