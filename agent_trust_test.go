package agentpay

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/ent/agent"
	"agentpay/internal/store"
)

func TestTierFor(t *testing.T) {
	tests := []struct {
		score int
		tier  string
	}{
		{0, "T0"}, {19, "T0"},
		{20, "T1"}, {39, "T1"},
		{40, "T2"}, {59, "T2"},
		{60, "T3"}, {79, "T3"},
		{80, "T4"}, {100, "T4"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.tier, TierFor(tt.score), "score %d", tt.score)
	}
}

func TestComputeTrust(t *testing.T) {
	day := 24 * time.Hour
	usd := func(n int64) int64 { return n * 1_000_000 }
	tests := []struct {
		name  string
		in    TrustInputs
		score int
		tier  string
	}{
		{"new agent", TrustInputs{}, 0, "T0"},
		{"new agent, clock skew", TrustInputs{Age: -time.Hour}, 0, "T0"},
		{"8 days old", TrustInputs{Age: 8 * day}, 0, "T0"},
		{"9 days old", TrustInputs{Age: 9 * day}, 1, "T0"},
		{"age caps at 10", TrustInputs{Age: 5000 * day}, 10, "T0"},
		{"9.99 USD volume", TrustInputs{Volume: usd(10) - 1}, 0, "T0"},
		{"10 USD volume", TrustInputs{Volume: usd(10)}, 3, "T0"},
		{"1,000 USD volume", TrustInputs{Volume: usd(1000)}, 9, "T0"},
		{"volume caps at 15", TrustInputs{Volume: usd(1_000_000_000)}, 15, "T0"},
		{"old and busy, unverified: T1 at most", TrustInputs{Age: 90 * day, Volume: usd(100_000)}, 25, "T1"},
		{"external wallet", TrustInputs{ExternalWalletVerified: true}, 15, "T0"},
		{"partner", TrustInputs{PartnerVerified: true}, 30, "T1"},
		{"human", TrustInputs{HumanVerified: true}, 30, "T1"},
		{"partner + wallet", TrustInputs{PartnerVerified: true, ExternalWalletVerified: true}, 45, "T2"},
		{"partner + human", TrustInputs{PartnerVerified: true, HumanVerified: true}, 60, "T3"},
		{"all verified", TrustInputs{PartnerVerified: true, HumanVerified: true, ExternalWalletVerified: true}, 75, "T3"},
		{"all verified + 45 days", TrustInputs{PartnerVerified: true, HumanVerified: true, ExternalWalletVerified: true, Age: 45 * day}, 80, "T4"},
		{"everything", TrustInputs{PartnerVerified: true, HumanVerified: true, ExternalWalletVerified: true, Age: 365 * day, Volume: usd(1_000_000)}, 100, "T4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			score := ComputeTrust(tt.in).Score()
			require.Equal(t, tt.score, score)
			require.Equal(t, tt.tier, TierFor(score))
		})
	}
}

func TestLimitsFor(t *testing.T) {
	tests := []struct {
		tier               string
		perMinute, perHour int
		perSend, daily     int64
	}{
		{"T0", 10, 100, 100, 500},
		{"T1", 30, 500, 1_000, 5_000},
		{"T2", 60, 1_000, 10_000, 50_000},
		{"T3", 120, 3_000, 50_000, 250_000},
		{"T4", 300, 10_000, 250_000, 1_000_000},
		{"bogus", 10, 100, 100, 500}, // unknown: the most restrictive
	}
	for _, tt := range tests {
		l := LimitsFor(tt.tier)
		require.Equal(t, tt.perMinute, l.PerMinute, tt.tier)
		require.Equal(t, tt.perHour, l.PerHour, tt.tier)
		require.True(t, decimal.NewFromInt(tt.perSend).Equal(l.PerSend), tt.tier)
		require.True(t, decimal.NewFromInt(tt.daily).Equal(l.Daily), tt.tier)
	}
}

func TestRecomputeTrust(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{})
	reg, err := svc.QuickRegister(ctx, "trusty")
	require.NoError(t, err)
	require.Equal(t, 0, reg.Agent.TrustScore)
	require.Equal(t, agent.TierT0, reg.Agent.Tier)

	db := svc.cfg.DB.Ent
	// An input changes (as partner verification or a completed send will do).
	require.NoError(t, db.Agent.UpdateOneID(reg.Agent.ID).
		SetPartnerVerified(true).SetHumanVerified(true).SetVolumeSent(10_000_000).Exec(ctx))
	require.NoError(t, svc.RecomputeTrust(ctx, reg.Agent.ID))
	a := db.Agent.GetX(ctx, reg.Agent.ID)
	require.Equal(t, 63, a.TrustScore)
	require.Equal(t, agent.TierT3, a.Tier)

	// Idempotent.
	require.NoError(t, svc.RecomputeTrust(ctx, reg.Agent.ID))
	b := db.Agent.GetX(ctx, reg.Agent.ID)
	require.Equal(t, a.TrustScore, b.TrustScore)
	require.Equal(t, a.UpdatedAt, b.UpdatedAt, "no write when nothing changed")

	// Account age moves the score with no event: a read refreshes it.
	backdateAgent(t, svc.cfg.DB, reg.Agent.ID, 200*24*time.Hour)
	p, err := svc.Profile(ctx, db.Agent.GetX(ctx, reg.Agent.ID))
	require.NoError(t, err)
	require.Equal(t, 73, p.Agent.TrustScore)
	require.Equal(t, 73, db.Agent.GetX(ctx, reg.Agent.ID).TrustScore)

	require.ErrorIs(t, svc.RecomputeTrust(ctx, reg.Wallets[0].ID), ErrNotFound)
}

// backdateAgent moves an agent's created_at (immutable in ent) into the past.
func backdateAgent(t *testing.T, db *store.DB, id uuid.UUID, by time.Duration) {
	t.Helper()
	q := "UPDATE agents SET created_at = ? WHERE id = ?"
	if db.IsPostgres() {
		q = "UPDATE agents SET created_at = $1 WHERE id = $2"
	}
	_, err := db.SQL.ExecContext(context.Background(), q, time.Now().UTC().Add(-by), id)
	require.NoError(t, err)
}
