package graph

import (
	"agentpay"
	"agentpay/ent/merchant"
	"agentpay/graph/model"
)

// Conversions between the merchant API's GraphQL inputs and the service
// layer's. They rename fields, nothing else: every rule (amounts, URLs,
// tokens, filters) is the service's, as on the REST facade.

func tokenRefs(ts []agentpay.TokenRef) []*model.TokenRef {
	out := make([]*model.TokenRef, len(ts))
	for i, t := range ts {
		out[i] = &model.TokenRef{Chain: t.Chain, Token: t.Token}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sessionInput is a createSession input as the service takes it; absent
// optional strings are empty, as in an absent JSON field on REST.
func sessionInput(in model.CreateSessionInput) agentpay.SessionInput {
	amount := in.Amount
	return agentpay.SessionInput{
		Amount:         &amount,
		Currency:       in.Currency,
		Description:    deref(in.Description),
		SuccessURL:     deref(in.SuccessURL),
		CancelURL:      deref(in.CancelURL),
		Metadata:       in.Metadata,
		IdempotencyKey: in.IdempotencyKey,
	}
}

// merchantInput is an updateMerchant input: absent and null fields are nil
// (unchanged), as on PATCH /checkout/merchants/me.
func merchantInput(in model.UpdateMerchantInput) agentpay.MerchantInput {
	out := agentpay.MerchantInput{
		Name: in.Name, Email: in.Email, Website: in.Website, WebhookURL: in.WebhookURL,
		SuccessURL: in.SuccessURL, CancelURL: in.CancelURL, SettlementType: settlementTypeInput(in.SettlementType),
		SettlementAddress: in.SettlementAddress, SettlementChain: in.SettlementChain, BrandColor: in.BrandColor,
		SettleHeldPayments: in.SettleHeldPayments,
	}
	if in.AcceptedTokens != nil {
		tokens := make([]agentpay.TokenRef, len(in.AcceptedTokens))
		for i, t := range in.AcceptedTokens {
			tokens[i] = agentpay.TokenRef{Chain: t.Chain, Token: t.Token}
		}
		out.AcceptedTokens = &tokens
	}
	return out
}

func sessionFilter(f *model.SessionFilter) agentpay.SessionFilter {
	if f == nil {
		return agentpay.SessionFilter{}
	}
	return agentpay.SessionFilter{Statuses: f.Status, CreatedFrom: f.CreatedFrom, CreatedTo: f.CreatedTo, Search: f.Search}
}

func paymentFilter(f *model.PaymentFilter) agentpay.PaymentFilter {
	if f == nil {
		return agentpay.PaymentFilter{}
	}
	return agentpay.PaymentFilter{SessionExternalID: f.SessionExternalID, Statuses: f.Status}
}

func webhookEventFilter(f *model.WebhookEventFilter) agentpay.WebhookEventFilter {
	if f == nil {
		return agentpay.WebhookEventFilter{}
	}
	return agentpay.WebhookEventFilter{EventTypes: f.EventType, SessionExternalID: f.SessionExternalID}
}

// int64Ptr widens an optional GraphQL Int.
func int64Ptr(n *int) *int64 {
	if n == nil {
		return nil
	}
	v := int64(*n)
	return &v
}

func rolledWebhookSecret(r *agentpay.RolledWebhookSecret) *model.RolledWebhookSecret {
	return &model.RolledWebhookSecret{
		WebhookSecret:           r.Secret,
		Livemode:                r.Livemode,
		PreviousSecretExpiresAt: r.PreviousExpiresAt,
		Warning:                 agentpay.WebhookSecretRolledWarning,
	}
}

// refundInput is createRefund's input as the service takes it.
func refundInput(in *model.RefundInput, idempotencyKey *string) agentpay.RefundInput {
	var out agentpay.RefundInput
	if in != nil {
		out.PaymentID = deref(in.PaymentID)
		out.AmountUSD = in.AmountUsd
		out.Address = deref(in.Address)
		out.Reason = deref(in.Reason)
	}
	if idempotencyKey != nil {
		out.IdempotencyKey = *idempotencyKey
	}
	return out
}

// settlementTypeInput is the enum GraphQL reads (CRYPTO_USDC) as the
// service's word (crypto_usdc), nil when absent.
func settlementTypeInput(t *merchant.SettlementType) *string {
	if t == nil {
		return nil
	}
	s := string(*t)
	return &s
}
