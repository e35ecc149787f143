package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"time"

	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
)

// recordBatchEvent records settlement.completed for a completed batch.
func (s *Service) recordBatchEvent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, b *ent.SettlementBatch) error {
	ps, err := tx.Payment.Query().
		Where(payment.SettlementBatchID(b.ID)).
		WithSession().
		Order(ent.Asc(payment.FieldSweptAt), ent.Asc(payment.FieldID)).
		All(ctx)
	if err != nil {
		return err
	}
	rs, err := tx.Refund.Query().
		Where(refund.NettedBatchID(b.ID)).
		WithPayment(func(q *ent.PaymentQuery) { q.WithSession() }).
		Order(ent.Asc(refund.FieldCreatedAt), ent.Asc(refund.FieldID)).
		All(ctx)
	if err != nil {
		return err
	}
	l, err := s.ledger(sessionModeOf(b.Livemode), chains.Name(b.Chain))
	if err != nil {
		return err
	}
	data := settlementEventData(b, ps, rs, l.Decimals())
	in := EventInput{MerchantID: b.MerchantID, Type: EventSettlementCompleted, Livemode: b.Livemode, Data: data}
	if sess := oneSession(ps); sess != nil {
		in.SessionID = &sess.ID
	}
	if _, err := s.RecordEvent(ctx, tx, sqlTx, in); err != nil {
		return fmt.Errorf("recording %s: %w", EventSettlementCompleted, err)
	}
	return nil
}

// oneSession is the session of every payment of ps, nil if they are of
// several (or none).
func oneSession(ps []*ent.Payment) *ent.CheckoutSession {
	if len(ps) == 0 {
		return nil
	}
	for _, p := range ps[1:] {
		if p.SessionID != ps[0].SessionID {
			return nil
		}
	}
	return ps[0].Edges.Session
}

// settlementEventData is settlement.completed's data for batch b, its
// payments ps (sessions loaded) and the refunds rs netted off it:
//   - standard fields: chain and token (the paid chain's), amount_usd the
//     batch's gross; when the batch covers one session, its
//     session_external_id and metadata; when one payment, that payment's
//     payment_external_id, amount_token, tx_hash and from_address (the
//     per-payment shape of before batching);
//   - settlement_id, totals (gross_usd, fee_usd, refunds_usd,
//     carried_in_usd, carried_out_usd, net_usd: net = gross - fee - refunds
//   - carried_in, or 0 with the deficit in carried_out), settlement_type,
//     payout_reference, where the payout went, settled_at;
//   - payments: one line per payment (gross, refunded before the payout,
//     fee, net); refunds: one negative line per refund netted.
func settlementEventData(b *ent.SettlementBatch, ps []*ent.Payment, rs []*ent.Refund, decimals int32) EventData {
	usd := func(units int64) decimal.Decimal { return FromBaseUnits(big.NewInt(units), decimals) }
	gross := usd(b.Gross)
	data := EventData{Chain: b.Chain, Token: "USDC", AmountUSD: &gross}
	if sess := oneSession(ps); sess != nil {
		data.SessionExternalID = sess.ExternalID
		data.Metadata = sess.Metadata
	}
	if len(ps) == 1 {
		p := ps[0]
		tok := usd(p.AmountToken)
		data.PaymentExternalID, data.AmountToken = p.ExternalID, &tok
		data.Token, data.TxHash, data.FromAddress = p.Token, p.TxHash, p.FromAddress
		data.Extra = map[string]any{"sweep_tx_hash": p.SweepTxHash}
	} else {
		data.Extra = map[string]any{}
	}
	lines := make([]any, 0, len(ps))
	for _, p := range ps {
		var fee, net int64
		if p.SettlementFee != nil {
			fee = *p.SettlementFee
		}
		if p.SettlementNet != nil {
			net = *p.SettlementNet
		}
		line := map[string]any{
			"payment_external_id": p.ExternalID,
			"amount_usd":          p.AmountUsd,
			"refunded_usd":        usd(p.AmountToken - fee - net),
			"gross_usd":           usd(fee + net),
			"fee_usd":             usd(fee),
			"net_usd":             usd(net),
			"tx_hash":             p.TxHash,
			"sweep_tx_hash":       p.SweepTxHash,
			"late":                p.Late,
		}
		if p.Edges.Session != nil {
			line["session_external_id"] = p.Edges.Session.ExternalID
		}
		lines = append(lines, line)
	}
	refundLines := make([]any, 0, len(rs))
	for _, r := range rs {
		// What the batch netted: the refund's reservation (its amount, less
		// what the payment's own unpaid money covered).
		line := map[string]any{"refund_id": r.ExternalID, "amount_usd": usd(r.ReservedToken).Neg()}
		if p := r.Edges.Payment; p != nil {
			line["payment_external_id"] = p.ExternalID
			if p.Edges.Session != nil {
				line["session_external_id"] = p.Edges.Session.ExternalID
			}
		}
		refundLines = append(refundLines, line)
	}
	x := data.Extra
	x["settlement_id"] = b.ExternalID
	x["payments"] = lines
	x["refunds"] = refundLines
	x["gross_usd"] = gross
	x["fee_usd"] = usd(b.Fee)
	x["refunds_usd"] = usd(b.RefundsNetted)
	x["carried_in_usd"] = usd(b.CarriedIn)
	x["carried_out_usd"] = usd(b.CarriedOut)
	x["net_usd"] = usd(b.Net)
	x["settlement_type"] = b.SettlementType
	x["payout_reference"] = b.Reference
	if b.CompletedAt != nil {
		x["settled_at"] = b.CompletedAt.UTC().Format(time.RFC3339)
	}
	if b.TxHash != "" {
		x["settlement_chain"] = b.PayoutChain
		x["settlement_address"] = b.PayoutAddress
		x["settlement_tx_hash"] = b.TxHash
	}
	if b.FxRate != "" {
		// Stored as decimal strings (exact); sent as JSON numbers like
		// every amount.
		x["fx_rate"] = decimalOrString(b.FxRate)
		x["payout_amount"] = decimalOrString(b.FiatAmount)
		x["payout_currency"] = b.FiatCurrency
	}
	return data
}
