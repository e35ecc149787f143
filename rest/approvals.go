package rest

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"agentpay"
)

// approvalResponse is an operation a paired human's spending policy held
// for approval (docs/agent-commerce.md, "Spending policies"): the 202
// answer of the send, send-to-user or agent-pay it held, and GET
// /agents/me/approvals/{approval_id}.
type approvalResponse struct {
	ApprovalID string `json:"approval_id"`
	// Operation is send, send_to_user or pay_checkout.
	Operation string `json:"operation"`
	// Status is awaiting_approval, approved, denied, expired or failed.
	Status    string `json:"status"`
	AmountUSD Amount `json:"amount_usd"`
	// Recipient is the username paid, or the checkout session's id.
	Recipient string     `json:"recipient"`
	Reason    string     `json:"reason"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	DecidedAt *time.Time `json:"decided_at"`
	// TransactionID, TransferStatus and TxHash: the transfer the approved
	// operation recorded, as it is now (null before).
	TransactionID  *string `json:"transaction_id"`
	TransferStatus *string `json:"transfer_status"`
	TxHash         *string `json:"tx_hash"`
	// Error: why the approved operation was refused when it ran.
	Error *string `json:"error"`
	// Deciders are the humans whose policies held it (usernames): each
	// must approve; ApprovedBy those who did so far.
	Deciders   []string `json:"deciders"`
	ApprovedBy []string `json:"approved_by"`
	Message    string   `json:"message,omitempty"`
}

func approvalResponseOf(v *agentpay.SpendApprovalView, message string) approvalResponse {
	a := v.Approval
	out := approvalResponse{
		ApprovalID: a.ID.String(), Operation: string(a.Operation), Status: v.Status(), AmountUSD: Amount{v.Amount()},
		Recipient: a.Recipient, Reason: a.Reason, CreatedAt: a.CreatedAt.UTC(), ExpiresAt: a.ExpiresAt.UTC(),
		Deciders: nonNil(v.Deciders), ApprovedBy: nonNil(v.ApprovedBy), Message: message,
	}
	if a.DecidedAt != nil {
		d := a.DecidedAt.UTC()
		out.DecidedAt = &d
	}
	if t := v.Transfer; t != nil {
		id, st := t.ID.String(), string(t.Status)
		out.TransactionID, out.TransferStatus = &id, &st
		if t.TxHash != "" {
			h := t.TxHash
			out.TxHash = &h
		}
	}
	if a.Error != "" {
		out.Error = &a.Error
	}
	return out
}

// nonNil is list, or an empty list for nil (JSON [] rather than null).
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// myApproval answers one of the agent's held operations as it is now.
func (s *server) myApproval(w http.ResponseWriter, r *http.Request) {
	v, err := s.svc.AgentSpendApproval(r.Context(), agentFrom(r.Context()), chi.URLParam(r, "approval_id"))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, approvalResponseOf(v, ""))
}
