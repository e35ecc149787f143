package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/pairing"
	"agentpay/ent/spendingpolicy"
	"agentpay/ent/wallet"
)

// Spending policies (docs/agent-commerce.md, "Spending policies").
//
// A human with an approved pairing to an agent may set one policy on it:
// an approval threshold, a recipient allow-list, a per-payment and a daily
// cap (each at most the tier's limit), and deny by default. Every agent
// operation that moves money asks DecideSpend, the one place the rule
// lives, with the policies of the agent's approved pairings:
//
//   - a cap exceeded refuses the operation (ErrForbidden naming the cap
//     and who set it);
//   - an operation above a threshold, or one paying a payee not on an
//     allow-list (a send's recipient, a checkout payment's merchant by its
//     id, a card purchase's merchant by its name, a relayed payment's
//     merchant), is held for approval (SpendApproval, or the card request's
//     approval), or refused when that policy denies by default;
//   - with several humans each one's policy applies and the strictest
//     outcome wins (refuse over hold over allow); the lowest caps bind.
//   - a held operation is decided by the humans whose policies held it
//     (SpendDecision.HeldBy): each of them must approve, any one of them
//     may deny, and no other account decides it (agent_spend_approvals.go). A
//     human paired later can neither loosen what another's policy holds
//     nor decide it.
//
// Policies of pairings no longer approved do not apply (the pairing is
// the human's standing to set them).

// Spend operations a policy governs.
const (
	SpendSend         = "send"
	SpendSendToUser   = "send_to_user"
	SpendPayCheckout  = "pay_checkout"
	SpendCardPurchase = "card_purchase"
	// SpendRelayedPayment is a checkout payment the agent signed with one
	// of its own external wallets and the service relays (x402, the
	// hosted page's wallet payment): it cannot wait for a human (the
	// signature lapses in minutes), so what would be held is refused.
	SpendRelayedPayment = "relayed_payment"
)

// MaxAllowedRecipients bounds a policy's allow-list.
const MaxAllowedRecipients = 100

// SpendRule is one human's policy as DecideSpend reads it.
type SpendRule struct {
	// UserID is the human who set it; SetBy names them (in refusals and
	// reasons).
	UserID uuid.UUID
	SetBy  string
	// Threshold, PerPaymentCap and DailyCap are USDC base units; nil: none.
	Threshold, PerPaymentCap, DailyCap *int64
	// Allowed is the payee allow-list; empty: no list.
	Allowed       []string
	DenyByDefault bool
}

// SpendOperation is what an agent is about to do.
type SpendOperation struct {
	Kind   string
	Amount int64
	// Payee names whom it pays, as an allow-list entry may name it: a
	// send's recipient by its username, id and wallet addresses, a
	// checkout payment's merchant by its id, a card purchase's merchant by
	// its name. An entry matching any of them (any case) allows it; none
	// (an empty Payee) matches no list.
	Payee []string
	// PayeeLabel says who it pays in a reason ("the recipient" when empty).
	PayeeLabel string
}

// Spend outcomes.
const (
	SpendAllowed = "allowed"
	SpendHeld    = "awaiting_approval"
	SpendRefused = "refused"
)

// SpendDecision is DecideSpend's answer.
type SpendDecision struct {
	Outcome string
	// Reason says which policy held or refused the operation, and why.
	Reason string
	// CapRefusal: the refusal came from a cap, which applies even to an
	// operation the human approved.
	CapRefusal bool
	// DailyCap is the lowest daily cap (nil: none), DailyCapBy who set it:
	// checked under the wallet lock with what was sent today.
	DailyCap   *int64
	DailyCapBy string
	// HeldBy are the humans whose policies held it (SpendHeld): the ones
	// who decide it, each in the order of the rules.
	HeldBy []uuid.UUID
}

// Err is the refusal as the API answers it (nil unless refused).
func (d SpendDecision) Err() error {
	if d.Outcome != SpendRefused {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrForbidden, d.Reason)
}

// DecideSpend applies the rules to op. approved: the operation was
// approved by a human, so only the caps apply.
func DecideSpend(rules []SpendRule, op SpendOperation, approved bool) SpendDecision {
	d := SpendDecision{Outcome: SpendAllowed}
	amount := USDCAmount(op.Amount)
	var held, refused []string
	for _, r := range rules {
		if r.DailyCap != nil && (d.DailyCap == nil || *r.DailyCap < *d.DailyCap) {
			d.DailyCap, d.DailyCapBy = r.DailyCap, r.SetBy
		}
		if r.PerPaymentCap != nil && op.Amount > *r.PerPaymentCap {
			d.CapRefusal = true
			refused = append(refused, fmt.Sprintf("%s USD exceeds the per-payment cap of %s USD in the spending policy set by %s",
				amount, USDCAmount(*r.PerPaymentCap), r.SetBy))
			continue
		}
		if approved {
			continue
		}
		var why string
		switch {
		case r.Threshold != nil && op.Amount > *r.Threshold:
			why = fmt.Sprintf("%s USD is above the approval threshold of %s USD in the spending policy set by %s",
				amount, USDCAmount(*r.Threshold), r.SetBy)
		case len(r.Allowed) > 0 && !onList(r.Allowed, op.Payee):
			label := op.PayeeLabel
			if label == "" {
				label = "the recipient"
			}
			why = fmt.Sprintf("%s is not on the allow-list of the spending policy set by %s", label, r.SetBy)
		default:
			continue
		}
		if r.DenyByDefault {
			refused = append(refused, why+", which denies by default")
			continue
		}
		held = append(held, why)
		if !slices.Contains(d.HeldBy, r.UserID) {
			d.HeldBy = append(d.HeldBy, r.UserID)
		}
	}
	switch {
	case len(refused) > 0:
		d.Outcome, d.Reason, d.HeldBy = SpendRefused, strings.Join(refused, "; "), nil
	case len(held) > 0:
		d.Outcome, d.Reason, d.CapRefusal = SpendHeld, strings.Join(held, "; "), false
	default:
		d.CapRefusal = false
	}
	return d
}

func onList(list, names []string) bool {
	for _, entry := range list {
		for _, n := range names {
			if n != "" && strings.EqualFold(strings.TrimSpace(entry), n) {
				return true
			}
		}
	}
	return false
}

// checkoutSpend is a payment to merchant m as a policy reads it: an
// allow-list names the merchant by its id (names are not unique).
func checkoutSpend(kind string, m *ent.Merchant, units int64) SpendOperation {
	return SpendOperation{Kind: kind, Amount: units, Payee: []string{m.ID.String()},
		PayeeLabel: fmt.Sprintf("the merchant %q (id %s)", m.Name, m.ID)}
}

// cardSpend is a card purchase as a policy reads it: an allow-list names
// the card's merchant by its name, which the card is bound to.
func cardSpend(units int64, merchantName string) SpendOperation {
	return SpendOperation{Kind: SpendCardPurchase, Amount: units, Payee: []string{strings.TrimSpace(merchantName)},
		PayeeLabel: fmt.Sprintf("the card merchant %q", merchantName)}
}

// checkDailyCap is the daily cap's refusal when sent (today, before this
// operation) plus units exceeds it.
func (d SpendDecision) checkDailyCap(sent, units int64) error {
	if d.DailyCap == nil || sent+units <= *d.DailyCap {
		return nil
	}
	return fmt.Errorf("%w: %s USD exceeds the daily cap of %s USD in the spending policy set by %s (%s USD already sent today)",
		ErrForbidden, USDCAmount(units), USDCAmount(*d.DailyCap), d.DailyCapBy, USDCAmount(sent))
}

// spendRules reads the policies of the agent's approved pairings.
func (s *Service) spendRules(ctx context.Context, agentID uuid.UUID) ([]SpendRule, error) {
	ps, err := s.cfg.DB.Ent.Pairing.Query().
		Where(pairing.AgentID(agentID), pairing.StatusEQ(pairing.StatusApproved)).
		WithUser().All(ctx)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	names := map[uuid.UUID]string{}
	var ids []uuid.UUID
	for _, p := range ps {
		names[p.UserID] = p.Edges.User.Username
		ids = append(ids, p.UserID)
	}
	pols, err := s.cfg.DB.Ent.SpendingPolicy.Query().
		Where(spendingpolicy.AgentID(agentID), spendingpolicy.UserIDIn(ids...)).
		Order(ent.Asc(spendingpolicy.FieldCreatedAt)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading spending policies: %w", err)
	}
	rules := make([]SpendRule, len(pols))
	for i, p := range pols {
		rules[i] = SpendRule{UserID: p.UserID, SetBy: names[p.UserID], Threshold: p.ApprovalThreshold, PerPaymentCap: p.PerPaymentCap,
			DailyCap: p.DailyCap, Allowed: p.AllowedRecipients, DenyByDefault: p.DenyByDefault}
	}
	return rules, nil
}

// decideSpend reads the agent's rules and decides op.
func (s *Service) decideSpend(ctx context.Context, a *ent.Agent, op SpendOperation, approved bool) (SpendDecision, error) {
	rules, err := s.spendRules(ctx, a.ID)
	if err != nil {
		return SpendDecision{}, err
	}
	return DecideSpend(rules, op, approved), nil
}

// SpendingPolicyInput is what a human sets; nil amounts: none.
type SpendingPolicyInput struct {
	ApprovalThreshold, PerPaymentCap, DailyCap *decimal.Decimal
	AllowedRecipients                          []string
	DenyByDefault                              bool
}

// SpendingPolicyView is a policy with its agent's name and tier limits.
type SpendingPolicyView struct {
	Policy        *ent.SpendingPolicy
	AgentUsername string
	Tier          string
}

func optionalUSD(v *int64) *decimal.Decimal {
	if v == nil {
		return nil
	}
	d := USDCAmount(*v)
	return &d
}

// ApprovalThreshold, PerPaymentCap and DailyCap in USD (nil: none).
func (v *SpendingPolicyView) ApprovalThreshold() *decimal.Decimal {
	return optionalUSD(v.Policy.ApprovalThreshold)
}
func (v *SpendingPolicyView) PerPaymentCap() *decimal.Decimal {
	return optionalUSD(v.Policy.PerPaymentCap)
}
func (v *SpendingPolicyView) DailyCap() *decimal.Decimal { return optionalUSD(v.Policy.DailyCap) }

// pairedAgent is the agent (by username) the user has an approved pairing
// with; anything else is ErrNotFound.
func (s *Service) pairedAgent(ctx context.Context, u *ent.User, agentUsername string) (*ent.Agent, error) {
	a, err := s.cfg.DB.Ent.Agent.Query().Where(agent.Username(strings.TrimSpace(agentUsername))).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: you have no approved pairing with an agent named %q", ErrNotFound, agentUsername)
	}
	if err != nil {
		return nil, fmt.Errorf("reading agent: %w", err)
	}
	ok, err := pairedWith(ctx, s.cfg.DB.Ent, a.ID, u.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: you have no approved pairing with an agent named %q", ErrNotFound, agentUsername)
	}
	return a, nil
}

// validateCap checks a cap or threshold: positive, at most 6 decimals,
// and a cap at most the tier's limit (limit nil: a threshold, unbounded).
func validateCap(field string, v *decimal.Decimal, limit *decimal.Decimal, tier string) (*int64, error) {
	if v == nil {
		return nil, nil
	}
	u, err := ToBaseUnits(field, *v, USDCDecimals)
	if err != nil {
		return nil, err
	}
	if !v.IsPositive() {
		return nil, Invalid(field, "must be more than 0")
	}
	if limit != nil && v.GreaterThan(*limit) {
		return nil, Invalid(field, "%s USD is above the agent's tier %s limit of %s USD: a policy's cap may only be lower", v, tier, limit)
	}
	if !u.IsInt64() {
		return nil, Invalid(field, "is too large")
	}
	n := u.Int64()
	return &n, nil
}

// SetSpendingPolicy sets (creates or replaces) the signed-in human's
// policy on a paired agent. Refusals change nothing: no approved pairing
// (ErrNotFound); a cap above the tier's limit, a bad amount, an allow-list
// too long or with an empty or over-long entry (ValidationError).
func (s *Service) SetSpendingPolicy(ctx context.Context, v *Viewer, agentUsername string, in SpendingPolicyInput) (*SpendingPolicyView, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	a, err := s.pairedAgent(ctx, v.User, agentUsername)
	if err != nil {
		return nil, err
	}
	limits := LimitsFor(string(a.Tier))
	threshold, err := validateCap("approval_threshold", in.ApprovalThreshold, nil, string(a.Tier))
	if err != nil {
		return nil, err
	}
	perPayment, err := validateCap("per_payment_cap", in.PerPaymentCap, &limits.PerSend, string(a.Tier))
	if err != nil {
		return nil, err
	}
	daily, err := validateCap("daily_cap", in.DailyCap, &limits.Daily, string(a.Tier))
	if err != nil {
		return nil, err
	}
	if len(in.AllowedRecipients) > MaxAllowedRecipients {
		return nil, Invalid("allowed_recipients", "must have at most %d entries", MaxAllowedRecipients)
	}
	allowed := make([]string, 0, len(in.AllowedRecipients))
	for _, r := range in.AllowedRecipients {
		r = strings.TrimSpace(r)
		if r == "" || len(r) > 100 {
			return nil, Invalid("allowed_recipients", "entries must be 1 to 100 characters (a username, a user or agent id, an address)")
		}
		allowed = append(allowed, r)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	var p *ent.SpendingPolicy
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		cur, err := tx.SpendingPolicy.Query().
			Where(spendingpolicy.AgentID(a.ID), spendingpolicy.UserID(v.User.ID)).Only(ctx)
		switch {
		case ent.IsNotFound(err):
			p, err = tx.SpendingPolicy.Create().SetAgentID(a.ID).SetUserID(v.User.ID).
				SetNillableApprovalThreshold(threshold).SetNillablePerPaymentCap(perPayment).SetNillableDailyCap(daily).
				SetAllowedRecipients(allowed).SetDenyByDefault(in.DenyByDefault).
				SetCreatedAt(now).SetUpdatedAt(now).Save(ctx)
			return err
		case err != nil:
			return err
		}
		u := tx.SpendingPolicy.UpdateOne(cur).SetAllowedRecipients(allowed).SetDenyByDefault(in.DenyByDefault).SetUpdatedAt(now)
		if threshold == nil {
			u.ClearApprovalThreshold()
		} else {
			u.SetApprovalThreshold(*threshold)
		}
		if perPayment == nil {
			u.ClearPerPaymentCap()
		} else {
			u.SetPerPaymentCap(*perPayment)
		}
		if daily == nil {
			u.ClearDailyCap()
		} else {
			u.SetDailyCap(*daily)
		}
		p, err = u.Save(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("saving spending policy: %w", err)
	}
	return &SpendingPolicyView{Policy: p, AgentUsername: a.Username, Tier: string(a.Tier)}, nil
}

// ClearSpendingPolicy removes the human's policy on the agent (none: a no-op).
func (s *Service) ClearSpendingPolicy(ctx context.Context, v *Viewer, agentUsername string) error {
	if v == nil || v.User == nil {
		return ErrNotSignedIn
	}
	a, err := s.pairedAgent(ctx, v.User, agentUsername)
	if err != nil {
		return err
	}
	_, err = s.cfg.DB.Ent.SpendingPolicy.Delete().
		Where(spendingpolicy.AgentID(a.ID), spendingpolicy.UserID(v.User.ID)).Exec(ctx)
	return err
}

// UserSpendingPolicies lists the human's policies on agents still paired.
func (s *Service) UserSpendingPolicies(ctx context.Context, u *ent.User) ([]*SpendingPolicyView, error) {
	ps, err := s.cfg.DB.Ent.Pairing.Query().
		Where(pairing.UserID(u.ID), pairing.StatusEQ(pairing.StatusApproved)).WithAgent().All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading pairings: %w", err)
	}
	var out []*SpendingPolicyView
	for _, p := range ps {
		pol, err := s.cfg.DB.Ent.SpendingPolicy.Query().
			Where(spendingpolicy.AgentID(p.AgentID), spendingpolicy.UserID(u.ID)).Only(ctx)
		if ent.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading spending policy: %w", err)
		}
		out = append(out, &SpendingPolicyView{Policy: pol, AgentUsername: p.Edges.Agent.Username, Tier: string(p.Edges.Agent.Tier)})
	}
	return out, nil
}

// AgentNameAndTier reads an agent's username and tier (the GraphQL
// policy and approval types show them).
func (s *Service) AgentNameAndTier(ctx context.Context, id uuid.UUID) (string, string, error) {
	a, err := s.cfg.DB.Ent.Agent.Get(ctx, id)
	if err != nil {
		return "", "", fmt.Errorf("reading agent: %w", err)
	}
	return a.Username, string(a.Tier), nil
}

// checkRelayedPayer applies an agent's spending policies to a payment its
// own wallet signed and the service relays (x402, the hosted page's wallet
// payment): payer is one of the agent's verified external wallets (or,
// were one ever to sign, a custodial one). Such a payment cannot wait for
// a human (the signature lapses in minutes), so whatever a policy would
// hold (a merchant missing from an allow-list, an amount above a
// threshold) is refused, as a cap refuses it; the daily cap counts the
// custodial wallets' sends, which this is not, so it does not bind here.
// A payer no agent holds pays as anyone does.
func (s *Service) checkRelayedPayer(ctx context.Context, payer string, sess *ent.CheckoutSession) error {
	w, err := s.cfg.DB.Ent.Wallet.Query().Where(wallet.AddressEqualFold(payer), wallet.AgentIDNotNil(),
		wallet.Or(wallet.KindEQ(wallet.KindCustodial), wallet.Verified(true))).First(ctx)
	if ent.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading payer's wallet: %w", err)
	}
	units, err := ToBaseUnits("amount_usd", sess.AmountUsd, USDCDecimals)
	if err != nil || !units.IsInt64() {
		return fmt.Errorf("relayed payment: session %s amount %s out of range", sess.ExternalID, sess.AmountUsd)
	}
	m := sess.Edges.Merchant
	if m == nil {
		if m, err = s.cfg.DB.Ent.Merchant.Get(ctx, sess.MerchantID); err != nil {
			return fmt.Errorf("reading merchant: %w", err)
		}
	}
	rules, err := s.spendRules(ctx, w.AgentID)
	if err != nil {
		return err
	}
	d := DecideSpend(rules, checkoutSpend(SpendRelayedPayment, m, units.Int64()), false)
	switch d.Outcome {
	case SpendRefused:
		return relayedPolicyRefusal{d.Err()}
	case SpendHeld:
		return relayedPolicyRefusal{fmt.Errorf("%w: %s; a payment signed by the agent's own wallet cannot wait for approval: "+
			"pay with agent-pay to have it held for the human", ErrForbidden, d.Reason)}
	}
	return nil
}

// relayedPolicyRefusal is checkRelayedPayer's refusal (ErrForbidden): x402
// answers it as a refused payment.
type relayedPolicyRefusal struct{ error }

func (e relayedPolicyRefusal) Unwrap() error { return e.error }
