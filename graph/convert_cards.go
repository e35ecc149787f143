package graph

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"agentpay"
	"agentpay/graph/model"
)

// viewerCardRequestModel is a card request as the human viewer sees it:
// never the card's number or CVC, which only the agent reads (once).
func viewerCardRequestModel(v *agentpay.CardRequestView, viewer uuid.UUID) *model.ViewerCardRequest {
	r := v.Request
	out := &model.ViewerCardRequest{
		ID: r.ID, AgentID: r.AgentID, AgentUsername: v.AgentUsername, Status: r.Status,
		AmountUsd: v.Amount(), MerchantName: r.MerchantName, Description: r.Description,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, DecidedAt: r.DecidedAt,
		Deciders: v.Deciders, ApprovedBy: v.ApprovedBy, ViewerDecides: v.AwaitsDecisionOf(viewer),
	}
	if r.CardLast4 != "" {
		out.CardLast4 = &r.CardLast4
	}
	if r.ChargedAmount != nil {
		d := agentpay.USDCAmount(*r.ChargedAmount)
		out.ChargedUsd = &d
	}
	if r.RefundedAt != nil {
		d := agentpay.USDCAmount(r.RefundAmount)
		out.ReturnedUsd = &d
	}
	if r.Error != "" {
		out.Error = &r.Error
	}
	return out
}

func cardApprovalModel(a *agentpay.CardApproval) (*model.CardApproval, error) {
	if a.Ceremony == nil {
		return &model.CardApproval{}, nil
	}
	var options map[string]any
	dec := json.NewDecoder(bytes.NewReader(a.Ceremony.Options))
	dec.UseNumber()
	if err := dec.Decode(&options); err != nil {
		return nil, fmt.Errorf("passkey options: %w", err)
	}
	return &model.CardApproval{CeremonyID: &a.Ceremony.ID, Options: options, ExpiresAt: &a.Ceremony.ExpiresAt}, nil
}
