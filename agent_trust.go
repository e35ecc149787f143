package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/internal/store"
)

// Trust score: 0 to 100, the sum of these parts (design.md section 3 names
// the inputs; the weights are ours):
//
//	verified partner identity             30
//	verified external wallet              15
//	paired identity-verified human        30
//	account age                       0 to 10  (1 point per full 9 days, 10 at 90 days)
//	completed volume (sent + received) 0 to 15  (3 points per decade from 10 USD:
//	                                           10 → 3, 100 → 6, 1,000 → 9,
//	                                           10,000 → 12, 100,000 → 15)
//
// Tiers: T0 below 20, T1 from 20, T2 from 40, T3 from 60, T4 from 80.
//
// So a new agent is T0 (score 0); age and volume alone reach at most 25 (T1),
// so the higher tiers need verified identities: a partner identity alone is
// T1, with an external wallet T2, with a verified human T3, and all three
// plus a little history T4.
const (
	TrustPartnerPoints        = 30
	TrustExternalWalletPoints = 15
	TrustHumanPoints          = 30
	TrustAgeMaxPoints         = 10
	TrustVolumeMaxPoints      = 15

	// trustAgeStep is the account age worth one point.
	trustAgeStep = 9 * 24 * time.Hour
)

// trustVolumeSteps are the completed-volume thresholds (USDC base units),
// each worth 3 points.
var trustVolumeSteps = []int64{
	10_000_000,      // 10 USD
	100_000_000,     // 100 USD
	1_000_000_000,   // 1,000 USD
	10_000_000_000,  // 10,000 USD
	100_000_000_000, // 100,000 USD
}

// Tier names, lowest first.
const (
	TierT0 = "T0"
	TierT1 = "T1"
	TierT2 = "T2"
	TierT3 = "T3"
	TierT4 = "T4"
)

// Tiers lists the tiers lowest first.
var Tiers = []string{TierT0, TierT1, TierT2, TierT3, TierT4}

// tierFloors is the lowest score of each tier of Tiers.
var tierFloors = []int{0, 20, 40, 60, 80}

// TierFor returns the tier of a trust score.
func TierFor(score int) string {
	tier := TierT0
	for i, floor := range tierFloors {
		if score >= floor {
			tier = Tiers[i]
		}
	}
	return tier
}

// TierFloor returns the lowest score of a tier, or -1 for an unknown tier.
func TierFloor(tier string) int {
	for i, t := range Tiers {
		if t == tier {
			return tierFloors[i]
		}
	}
	return -1
}

// TierLimits are what a tier allows: requests per minute and per hour (spec
// section 8) and USD per send and per UTC day (design.md section 3).
type TierLimits struct {
	PerMinute, PerHour int
	PerSend, Daily     decimal.Decimal
}

var tierLimits = map[string]TierLimits{
	TierT0: {PerMinute: 10, PerHour: 100, PerSend: decimal.NewFromInt(100), Daily: decimal.NewFromInt(500)},
	TierT1: {PerMinute: 30, PerHour: 500, PerSend: decimal.NewFromInt(1_000), Daily: decimal.NewFromInt(5_000)},
	TierT2: {PerMinute: 60, PerHour: 1_000, PerSend: decimal.NewFromInt(10_000), Daily: decimal.NewFromInt(50_000)},
	TierT3: {PerMinute: 120, PerHour: 3_000, PerSend: decimal.NewFromInt(50_000), Daily: decimal.NewFromInt(250_000)},
	TierT4: {PerMinute: 300, PerHour: 10_000, PerSend: decimal.NewFromInt(250_000), Daily: decimal.NewFromInt(1_000_000)},
}

// LimitsFor returns the limits of a tier; an unknown tier gets T0's, the
// most restrictive.
func LimitsFor(tier string) TierLimits {
	if l, ok := tierLimits[tier]; ok {
		return l
	}
	return tierLimits[TierT0]
}

// TrustInputs are what the trust score is computed from.
type TrustInputs struct {
	PartnerVerified        bool
	ExternalWalletVerified bool
	HumanVerified          bool
	// Age is how long the agent has existed.
	Age time.Duration
	// Volume is the completed volume, sent plus received, in USDC base units.
	Volume int64
}

// TrustBreakdown is a score and its parts.
type TrustBreakdown struct {
	Partner, ExternalWallet, Human, Age, Volume int
}

// Score is the sum of the parts, capped to 0-100.
func (b TrustBreakdown) Score() int {
	return min(max(b.Partner+b.ExternalWallet+b.Human+b.Age+b.Volume, 0), 100)
}

// ComputeTrust scores the inputs.
func ComputeTrust(in TrustInputs) TrustBreakdown {
	var b TrustBreakdown
	if in.PartnerVerified {
		b.Partner = TrustPartnerPoints
	}
	if in.ExternalWalletVerified {
		b.ExternalWallet = TrustExternalWalletPoints
	}
	if in.HumanVerified {
		b.Human = TrustHumanPoints
	}
	if in.Age > 0 {
		b.Age = min(int(in.Age/trustAgeStep), TrustAgeMaxPoints)
	}
	for _, step := range trustVolumeSteps {
		if in.Volume >= step {
			b.Volume += TrustVolumeMaxPoints / len(trustVolumeSteps)
		}
	}
	return b
}

// trustInputsOf reads an agent's trust inputs at now.
func trustInputsOf(a *ent.Agent, now time.Time) TrustInputs {
	volume := a.VolumeSent + a.VolumeReceived
	if volume < 0 { // overflow of two huge counters
		volume = 1<<63 - 1
	}
	return TrustInputs{
		PartnerVerified:        a.PartnerVerified,
		ExternalWalletVerified: a.ExternalWalletVerified,
		HumanVerified:          a.HumanVerified,
		Age:                    now.Sub(a.CreatedAt),
		Volume:                 volume,
	}
}

// RecomputeTrust recomputes an agent's trust score and tier from its current
// inputs and stores them if they changed. It is idempotent; call it after
// anything that changes an input (registration, wallet or partner
// verification, human pairing, a completed send). Inside a WithTx it joins
// that transaction, so the score commits with the change that caused it.
func (s *Service) RecomputeTrust(ctx context.Context, agentID uuid.UUID) error {
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		a, err := store.ForUpdate(s.cfg.DB, tx.Agent.Query().Where(agent.ID(agentID))).Only(ctx)
		if ent.IsNotFound(err) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("recompute trust: %w", err)
		}
		_, err = s.storeTrust(ctx, tx.Client(), a)
		return err
	})
}

// trustStale reports whether a's stored trust score or tier is not the one
// its inputs give at now: whether RecomputeTrust would change them.
func trustStale(a *ent.Agent, now time.Time) bool {
	score := ComputeTrust(trustInputsOf(a, now)).Score()
	return score != a.TrustScore || string(a.Tier) != TierFor(score)
}

// refreshTrust brings a's stored score up to date (account age moves it with
// no event) and returns a with the current values. It writes only when the
// score changed, so a read stays a read.
func (s *Service) refreshTrust(ctx context.Context, a *ent.Agent) (*ent.Agent, error) {
	return s.storeTrust(ctx, s.cfg.DB.Ent, a)
}

func (s *Service) storeTrust(ctx context.Context, client *ent.Client, a *ent.Agent) (*ent.Agent, error) {
	score := ComputeTrust(trustInputsOf(a, s.now())).Score()
	tier := TierFor(score)
	if score == a.TrustScore && string(a.Tier) == tier {
		return a, nil
	}
	// Conditional on the inputs read, so a concurrent change of an input is
	// not overwritten by a score computed from stale inputs; whoever changed
	// the input recomputes.
	err := client.Agent.UpdateOneID(a.ID).
		Where(
			agent.PartnerVerified(a.PartnerVerified),
			agent.ExternalWalletVerified(a.ExternalWalletVerified),
			agent.HumanVerified(a.HumanVerified),
			agent.VolumeSent(a.VolumeSent),
			agent.VolumeReceived(a.VolumeReceived),
		).
		SetTrustScore(score).
		SetTier(agent.Tier(tier)).
		Exec(ctx)
	out := *a
	switch {
	case ent.IsNotFound(err): // an input changed meanwhile: its writer recomputes
	case err != nil:
		return nil, fmt.Errorf("storing trust score: %w", err)
	default:
		out.TrustScore, out.Tier = score, agent.Tier(tier)
	}
	return &out, nil
}
