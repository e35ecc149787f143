package graph

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/shopspring/decimal"

	"agentpay"
	"agentpay/graph/model"
)

func usdOf(units *int64) *decimal.Decimal {
	if units == nil {
		return nil
	}
	d := agentpay.USDCAmount(*units)
	return &d
}

func spendApprovalStartModel(a *agentpay.SpendApprovalStart) (*model.SpendApprovalStart, error) {
	if a.Ceremony == nil {
		return &model.SpendApprovalStart{}, nil
	}
	var options map[string]any
	dec := json.NewDecoder(bytes.NewReader(a.Ceremony.Options))
	dec.UseNumber()
	if err := dec.Decode(&options); err != nil {
		return nil, fmt.Errorf("passkey options: %w", err)
	}
	return &model.SpendApprovalStart{CeremonyID: &a.Ceremony.ID, Options: options, ExpiresAt: &a.Ceremony.ExpiresAt}, nil
}

// awaitingApproval is the answer of an agent's send or checkout payment a
// spending policy held: the mutation's payload describes a transfer, which
// does not exist yet, so it is an error with code AWAITING_APPROVAL and
// the approval's id and expiry in its extensions
// (docs/agent-commerce.md, "Spending policies").
type awaitingApproval struct {
	approval *agentpay.SpendApprovalView
	message  string
}

func (e *awaitingApproval) Error() string { return e.message }
