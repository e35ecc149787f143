package agentpay

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/transfer"
)

func TestLeaderboard(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{})
	db := svc.cfg.DB.Ent
	// name: volume sent (USD), tx count, trust score
	rows := []struct {
		name          string
		volume, count int64
		score         int
	}{
		{"low", 1, 1, 90},
		{"high", 100, 2, 10},
		{"mid", 50, 7, 50},
		{"idle", 0, 0, 0},
	}
	for _, r := range rows {
		reg, err := svc.QuickRegister(ctx, r.name)
		require.NoError(t, err)
		require.NoError(t, db.Agent.UpdateOneID(reg.Agent.ID).
			SetVolumeSent(r.volume*1_000_000).SetTxCount(r.count).SetTrustScore(r.score).Exec(ctx))
	}
	names := func(as []*ent.Agent) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.Username)
		}
		return out
	}
	// sortBy and limit as asked; the sort and limit applied (the defaults
	// filled in), which the answers show; the ranking.
	tests := []struct {
		sortBy    string
		limit     int
		wantSort  string
		wantLimit int
		want      []string
		err       string
	}{
		{"", 0, "volume", 10, []string{"high", "mid", "low", "idle"}, ""},
		{"volume", 2, "volume", 2, []string{"high", "mid"}, ""},
		{"transactions", 0, "transactions", 10, []string{"mid", "high", "low", "idle"}, ""},
		{"trust_score", 1, "trust_score", 1, []string{"low"}, ""},
		{"volume", 100, "volume", 100, []string{"high", "mid", "low", "idle"}, ""},
		{"volume", 101, "", 0, nil, "limit: must be between 1 and 100"},
		{"volume", -1, "", 0, nil, "limit: must be between 1 and 100"},
		{"name", 0, "", 0, nil, "sort_by: must be one of volume, transactions, trust_score"},
		{"VOLUME", 0, "", 0, nil, "sort_by: must be one of volume, transactions, trust_score"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.sortBy, tt.limit), func(t *testing.T) {
			got, err := svc.Leaderboard(ctx, tt.sortBy, tt.limit)
			if tt.err != "" {
				require.True(t, IsValidation(err))
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantSort, got.SortBy)
			require.Equal(t, tt.wantLimit, got.Limit)
			require.Equal(t, tt.want, names(got.Agents))
		})
	}
}

func TestStatsAndTreasuryTotals(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{})
	db := svc.cfg.DB.Ent
	a, err := svc.QuickRegister(ctx, "payer")
	require.NoError(t, err)
	b, err := svc.QuickRegister(ctx, "payee")
	require.NoError(t, err)
	require.NoError(t, db.Agent.UpdateOneID(a.Agent.ID).SetTxCount(2).SetTier(agent.TierT2).Exec(ctx))

	st, err := svc.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Agents)
	require.EqualValues(t, 0, st.Transfers)
	require.Equal(t, "0", st.Volume.String())

	// Two completed sends (50 and 0.123456), one failed, one in flight.
	for i, tr := range []struct {
		amount, fee int64
		status      string
	}{
		{50_000_000, 50_000, "completed"},
		{123_456, 123, "completed"},
		{1_000_000, 1_000, "failed"},
		{2_000_000, 2_000, "pending"},
	} {
		ref := make([]byte, 32)
		ref[0] = byte(i + 1)
		_, err := db.Transfer.Create().SetKind(transfer.KindSend).
			SetFromAgentID(a.Agent.ID).SetToAgentID(b.Agent.ID).SetChain("base").
			SetFromAddress(a.Wallets[1].Address).SetToAddress(b.Wallets[1].Address).
			SetAmount(tr.amount).SetFee(tr.fee).SetNet(tr.amount - tr.fee).
			SetStatus(transfer.Status(tr.status)).SetRef(ref).Save(ctx)
		require.NoError(t, err)
	}
	st, err = svc.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Transfers)
	require.Equal(t, "50.123456", st.Volume.String())
	require.Equal(t, "0.050123", st.Fees.String())
	require.EqualValues(t, 1, st.ActiveAgents)
	require.EqualValues(t, map[string]int64{"T0": 1, "T1": 0, "T2": 1, "T3": 0, "T4": 0}, st.AgentsByTier)

	tr, err := svc.Treasury(ctx)
	require.NoError(t, err)
	require.Equal(t, "0.001", tr.FeeRate.String())
	require.Equal(t, "0.050123", tr.FeesCollected.String())
	require.EqualValues(t, 2, tr.FeeTransfers)
	require.Len(t, tr.Wallets, 2)
	require.Equal(t, svc.cfg.Treasury.SolanaAddress, tr.Wallets[0].Address)
	require.Equal(t, svc.cfg.Treasury.EVMAddress, tr.Wallets[1].Address)
	for _, w := range tr.Wallets {
		require.Equal(t, TreasuryBalanceUnavailable, w.Status, "no chain configured")
	}

	// Limits count today's sends that did not fail.
	lim, err := svc.Limits(ctx, db.Agent.GetX(ctx, a.Agent.ID))
	require.NoError(t, err)
	require.Equal(t, "52.123456", lim.SentToday.String())
	require.Equal(t, "447.876544", lim.RemainingToday.String())
	require.Equal(t, "T0", lim.Tier, "the tier follows the score, recomputed on read")
	require.Equal(t, "T1", lim.NextTier)
	require.Equal(t, 20, lim.NextTierScore)
}
