package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/pairing"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
	"agentpay/ent/transfer"
)

// refundReceivedData is refund.received's data.
type refundReceivedData struct {
	RefundID          string `json:"refund_id"`
	SessionExternalID string `json:"session_external_id"`
	PaymentExternalID string `json:"payment_external_id"`
	// TransactionID is the agent's checkout payment the refund returns.
	TransactionID uuid.UUID   `json:"transaction_id"`
	Agent         string      `json:"agent"`
	AmountUSD     json.Number `json:"amount_usd"` // a JSON number, exact
	Chain         string      `json:"chain"`
	ToAddress     string      `json:"to_address"`
	TxHash        string      `json:"tx_hash"`
	Reason        string      `json:"reason,omitempty"`
}

// tellRefundedAgent records refund.received, in the transaction that
// completes refund r, when the payment it returns was an agent's checkout
// payment from its custodial wallet (agent_checkout.go) and the refund went
// back to that wallet: to the agent, and to each human paired with it, who
// answers for the agent's spending.
func (s *Service) tellRefundedAgent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, r *ent.Refund) error {
	p, err := tx.Payment.Query().Where(payment.ID(r.PaymentID)).WithSession().Only(ctx)
	if err != nil {
		return fmt.Errorf("refund: reading payment: %w", err)
	}
	paid, err := tx.Transfer.Query().Where(
		transfer.KindEQ(transfer.KindCheckoutPayment), transfer.CheckoutSessionID(p.SessionID),
		transfer.Chain(p.Chain), transfer.TxHash(p.TxHash), transfer.FromAgentIDNotNil(),
	).WithFromAgent().First(ctx)
	if ent.IsNotFound(err) {
		return nil // not an agent's payment
	}
	if err != nil {
		return fmt.Errorf("refund: reading the agent's payment: %w", err)
	}
	norm := s.wallets(chains.Name(r.Chain)).NormalizeAddress
	if norm(r.ToAddress) != norm(paid.FromAddress) {
		return nil // sent elsewhere, as the merchant chose: not the agent's money
	}
	a := paid.Edges.FromAgent
	data := refundReceivedData{
		RefundID: r.ExternalID, SessionExternalID: p.Edges.Session.ExternalID, PaymentExternalID: p.ExternalID,
		TransactionID: paid.ID, Agent: a.Username, AmountUSD: json.Number(r.AmountUsd.String()), Chain: r.Chain,
		ToAddress: r.ToAddress, TxHash: r.TxHash, Reason: r.Reason,
	}
	if err := s.recordAccountEvent(ctx, tx, sqlTx, AgentParty(a.ID), EventRefundReceived, data); err != nil {
		return err
	}
	humans, err := tx.Pairing.Query().Where(pairing.AgentID(a.ID), pairing.StatusEQ(pairing.StatusApproved)).All(ctx)
	if err != nil {
		return fmt.Errorf("refund: reading the agent's humans: %w", err)
	}
	for _, h := range humans {
		if err := s.recordAccountEvent(ctx, tx, sqlTx, UserParty(h.UserID), EventRefundReceived, data); err != nil {
			return err
		}
	}
	return nil
}

// refundEvent records a refund.* event from the refund's current row.
func (s *Service) refundEvent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, id uuid.UUID, kind string, extra map[string]any) error {
	r, err := tx.Refund.Query().Where(refund.ID(id)).WithPayment(func(q *ent.PaymentQuery) { q.WithSession() }).Only(ctx)
	if err != nil {
		return err
	}
	p := r.Edges.Payment
	sess := p.Edges.Session
	ledger, err := s.ledger(sessionMode(sess), chains.Name(r.Chain))
	if err != nil {
		return err
	}
	data := refundEventData(sess, p, r, ledger.Decimals())
	for k, v := range extra {
		data.Extra[k] = v
	}
	return recordSessionEvent(ctx, s, tx, sqlTx, sess, kind, data)
}

// refundEventData is a refund.* event's data: the standard fields describe
// the refund (its amount, its transaction), the payment it returns is
// named by payment_external_id and described in payment_*.
func refundEventData(sess *ent.CheckoutSession, p *ent.Payment, r *ent.Refund, decimals int32) EventData {
	usd := r.AmountUsd
	tok := FromBaseUnits(big.NewInt(r.AmountToken), decimals)
	extra := map[string]any{
		"refund_id":          r.ExternalID,
		"refund_status":      string(r.Status),
		"to_address":         r.ToAddress,
		"payment_amount_usd": p.AmountUsd,
		"payment_tx_hash":    p.TxHash,
		"refunded_usd":       FromBaseUnits(big.NewInt(p.RefundedToken), decimals),
	}
	if isInternalRef(p.TxHash) {
		// No chain transaction (settle_internal.go): null, and the
		// reference in its own field.
		extra["payment_tx_hash"] = nil
		extra["payment_internal_reference"] = p.TxHash
	}
	if r.Reason != "" {
		extra["reason"] = r.Reason
	}
	if r.CompletedAt != nil {
		extra["completed_at"] = r.CompletedAt.UTC().Format(time.RFC3339)
	}
	return EventData{
		SessionExternalID: sess.ExternalID,
		PaymentExternalID: p.ExternalID,
		AmountUSD:         &usd,
		AmountToken:       &tok,
		Token:             r.Token,
		Chain:             r.Chain,
		TxHash:            r.TxHash,
		Metadata:          sess.Metadata,
		Extra:             extra,
	}
}
