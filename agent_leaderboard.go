package agentpay

import (
	"context"
	"fmt"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/agent"
)

// Leaderboard sorts (design.md section 3).
const (
	SortVolume       = "volume"
	SortTransactions = "transactions"
	SortTrustScore   = "trust_score"

	LeaderboardDefaultLimit = 10
	LeaderboardMaxLimit     = 100
)

// Leaderboard is a ranking and the sort and limit it was made with (the
// defaults filled in), which the answers show.
type Leaderboard struct {
	SortBy string
	Limit  int
	Agents []*ent.Agent
}

// Leaderboard ranks agents by sortBy: volume (USDC sent, the default),
// transactions (sends) or trust_score, highest first; ties go to the older
// agent. limit 0 means the default (10); it may be at most 100.
func (s *Service) Leaderboard(ctx context.Context, sortBy string, limit int) (*Leaderboard, error) {
	if sortBy == "" {
		sortBy = SortVolume
	}
	var order []agent.OrderOption
	switch sortBy {
	case SortVolume:
		order = []agent.OrderOption{agent.ByVolumeSent(entsql.OrderDesc()), agent.ByTxCount(entsql.OrderDesc())}
	case SortTransactions:
		order = []agent.OrderOption{agent.ByTxCount(entsql.OrderDesc()), agent.ByVolumeSent(entsql.OrderDesc())}
	case SortTrustScore:
		order = []agent.OrderOption{agent.ByTrustScore(entsql.OrderDesc()), agent.ByVolumeSent(entsql.OrderDesc())}
	default:
		return nil, Invalid("sort_by", "must be one of volume, transactions, trust_score")
	}
	switch {
	case limit == 0:
		limit = LeaderboardDefaultLimit
	case limit < 0 || limit > LeaderboardMaxLimit:
		return nil, Invalid("limit", "must be between 1 and %d", LeaderboardMaxLimit)
	}
	order = append(order, agent.ByCreatedAt(), agent.ByID())
	agents, err := s.cfg.DB.Ent.Agent.Query().Order(order...).Limit(limit).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("leaderboard: %w", err)
	}
	return &Leaderboard{SortBy: sortBy, Limit: limit, Agents: agents}, nil
}

// AgentStats are platform-wide agent statistics.
type AgentStats struct {
	Agents int64
	// ActiveAgents have made at least one send.
	ActiveAgents int64
	// AgentsByTier counts agents per tier; every tier is present.
	AgentsByTier map[string]int64
	// Transfers counts completed sends; Volume is their gross USD amount and
	// Fees the treasury fees they paid.
	Transfers int64
	Volume    decimal.Decimal
	Fees      decimal.Decimal
	FeeRate   decimal.Decimal
}

// Stats computes the platform-wide agent statistics.
func (s *Service) Stats(ctx context.Context) (*AgentStats, error) {
	st := &AgentStats{AgentsByTier: make(map[string]int64, len(Tiers)), FeeRate: FeeRate}
	for _, t := range Tiers {
		st.AgentsByTier[t] = 0
	}
	var byTier []struct {
		Tier  string `json:"tier"`
		Count int64  `json:"count"`
	}
	if err := s.cfg.DB.Ent.Agent.Query().GroupBy(agent.FieldTier).Aggregate(ent.Count()).Scan(ctx, &byTier); err != nil {
		return nil, fmt.Errorf("stats: counting agents: %w", err)
	}
	for _, row := range byTier {
		st.AgentsByTier[row.Tier] = row.Count
		st.Agents += row.Count
	}
	active, err := s.cfg.DB.Ent.Agent.Query().Where(agent.TxCountGT(0)).Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("stats: counting active agents: %w", err)
	}
	st.ActiveAgents = int64(active)
	totals, err := s.completedTransferTotals(ctx, false)
	if err != nil {
		return nil, err
	}
	st.Transfers, st.Volume, st.Fees = totals.count, totals.amount, totals.fee
	return st, nil
}

type transferTotals struct {
	count       int64
	amount, fee decimal.Decimal
}

// completedTransferTotals sums completed transfers in SQL (integer base
// units: exact on both engines): with feeOnly, every one that paid the
// treasury a fee (users' withdrawals too); otherwise agents' sends only,
// the agent statistics.
func (s *Service) completedTransferTotals(ctx context.Context, feeOnly bool) (transferTotals, error) {
	q := `SELECT COUNT(*), COALESCE(SUM(amount), 0), COALESCE(SUM(fee), 0) FROM transfers WHERE status = 'completed'`
	if feeOnly {
		q += ` AND fee > 0`
	} else {
		q += ` AND from_agent_id IS NOT NULL`
	}
	var (
		t           transferTotals
		amount, fee string
	)
	if err := s.cfg.DB.SQL.QueryRowContext(ctx, q).Scan(&t.count, &amount, &fee); err != nil {
		return t, fmt.Errorf("summing transfers: %w", err)
	}
	var err error
	if t.amount, err = baseUnitsSum(amount); err != nil {
		return t, err
	}
	if t.fee, err = baseUnitsSum(fee); err != nil {
		return t, err
	}
	return t, nil
}

func baseUnitsSum(s string) (decimal.Decimal, error) {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("summing transfers: %q is not a number", s)
	}
	return d.Shift(-USDCDecimals), nil
}
