package agentpay

import (
	"context"
	"time"

	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/transfer"
)

// AgentLimits are an agent's current limits and permissions.
type AgentLimits struct {
	Tier       string
	TrustScore int
	Trust      TrustBreakdown
	Limits     TierLimits
	// SentToday is what the agent sent since 00:00 UTC (completed and in
	// flight sends); RemainingToday is what the daily limit still allows.
	SentToday      decimal.Decimal
	RemainingToday decimal.Decimal
	DayResetsAt    time.Time
	// NextTier is the tier above (empty at T4) and NextTierScore its floor.
	NextTier      string
	NextTierScore int
	// Raise lists what raises the score, with what is already done.
	Raise []TrustAction
	// CanSend, CanReceive and CardPurchases are the agent's permissions;
	// card purchases need a paired identity-verified human.
	CanSend, CanReceive, CardPurchases bool
}

// TrustAction is one way to raise the trust score.
type TrustAction struct {
	Action string
	// Points is what it adds at most; Earned what the agent has from it.
	Points, Earned int
	Done           bool
	// How says what to do ("POST /agents/me/verify-partner", ...).
	How string
}

// Limits returns the agent's limits, its tier and what raises the tier.
func (s *Service) Limits(ctx context.Context, a *ent.Agent) (*AgentLimits, error) {
	a, err := s.refreshTrust(ctx, a)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	tier := string(a.Tier)
	l := &AgentLimits{
		Tier:          tier,
		TrustScore:    a.TrustScore,
		Trust:         ComputeTrust(trustInputsOf(a, now)),
		Limits:        LimitsFor(tier),
		DayResetsAt:   startOfDayUTC(now).Add(24 * time.Hour),
		CanSend:       true,
		CanReceive:    true,
		CardPurchases: a.HumanVerified && s.CardsOn(),
	}
	sent, err := sentToday(ctx, s.cfg.DB.Ent.Transfer, agentHolder(a), now)
	if err != nil {
		return nil, err
	}
	l.SentToday = USDCAmount(sent)
	l.RemainingToday = decimal.Max(l.Limits.Daily.Sub(l.SentToday), decimal.Zero)
	for i, t := range Tiers {
		if t == tier && i+1 < len(Tiers) {
			l.NextTier, l.NextTierScore = Tiers[i+1], tierFloors[i+1]
		}
	}
	b := l.Trust
	l.Raise = []TrustAction{
		{Action: "verify_partner", Points: TrustPartnerPoints, Earned: b.Partner, Done: a.PartnerVerified,
			How: ActionVerifyPartner.Mark() + ": link and verify an external identity"},
		{Action: "verify_external_wallet", Points: TrustExternalWalletPoints, Earned: b.ExternalWallet, Done: a.ExternalWalletVerified,
			How: ActionVerifyWallet.Mark() + ": prove an external wallet with an EIP-712 signature"},
		{Action: "pair_verified_human", Points: TrustHumanPoints, Earned: b.Human, Done: a.HumanVerified,
			How: ActionRequestPairing.Mark() + ": pair with a human who completed identity verification"},
		{Action: "account_age", Points: TrustAgeMaxPoints, Earned: b.Age, Done: b.Age >= TrustAgeMaxPoints,
			How: "1 point per 9 days since registration, up to 10 at 90 days"},
		{Action: "completed_volume", Points: TrustVolumeMaxPoints, Earned: b.Volume, Done: b.Volume >= TrustVolumeMaxPoints,
			How: "3 points each at 10, 100, 1,000, 10,000 and 100,000 USD sent and received"},
	}
	return l, nil
}

func startOfDayUTC(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// sentToday is what counts against the sender's daily limit at now (an
// agent's sends, a user's withdrawals): the gross amount, in base units, of
// its transfers since 00:00 UTC that did not fail (completed and in
// flight). transfers is the caller's transaction's client when the answer
// decides a send.
func sentToday(ctx context.Context, transfers *ent.TransferClient, from holder, now time.Time) (int64, error) {
	return sumAmounts(ctx, transfers.Query().Where(
		from.sent(),
		transfer.CreatedAtGTE(startOfDayUTC(now)),
		transfer.StatusNEQ(transfer.StatusFailed),
	))
}
