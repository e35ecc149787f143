package agentpay

import (
	"context"
	"encoding/json"
	"fmt"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/spendapproval"
)

// ApprovalCheckout is what a held checkout payment pays for, as the human
// deciding it must see it: who is paid (and whether the merchant's contact
// e-mail is confirmed), for what, and on which chain. A session id alone
// tells a person nothing.
type ApprovalCheckout struct {
	MerchantName string
	// MerchantVerified: the merchant confirmed its contact e-mail.
	MerchantVerified bool
	Description      string
	// Chain the agent named, else the one the session's customer chose,
	// else "" (the first of the agent's chains that covers the amount).
	Chain string
}

// SpendApprovalCheckout is the checkout a held PAY_CHECKOUT approval pays;
// nil for the other operations.
func (s *Service) SpendApprovalCheckout(ctx context.Context, r *ent.SpendApproval) (*ApprovalCheckout, error) {
	if r.Operation != spendapproval.OperationPayCheckout {
		return nil, nil
	}
	var h heldCheckout
	if err := json.Unmarshal([]byte(r.Request), &h); err != nil {
		return nil, fmt.Errorf("approval %s: request: %w", r.ID, err)
	}
	sess, err := s.cfg.DB.Ent.CheckoutSession.Query().
		Where(checkoutsession.ExternalID(h.ExternalID)).WithMerchant().Only(ctx)
	if err != nil {
		return nil, err
	}
	m := sess.Edges.Merchant
	return &ApprovalCheckout{
		MerchantName:     m.Name,
		MerchantVerified: m.EmailVerifiedAt != nil,
		Description:      sess.Description,
		Chain:            firstNonEmpty(h.Chain, sess.Chain),
	}, nil
}
