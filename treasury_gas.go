package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"sort"

	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/gasspend"
	"agentpay/ent/transfer"
)

// The gas ledger (docs/money.md#gas).
//
// The treasury pays for every transaction the service sends: the two legs
// of an agent's send (amount and fee), withdrawals, agents' checkout
// payments, card reservations and returns, sweeps of deposit addresses (payments and dust),
// merchant payouts, refunds, payers' authorizations it relays (x402,
// browser wallets), and on Solana the rent of token accounts it
// opens for recipients and the closing of emptied deposit accounts. Each
// such transaction is recorded in its own table (transfers.tx_hash,
// payments.sweep_tx_hash...) by the transaction that completes what it
// carried; what it cost is read from the chain afterwards and kept in
// gas_spends, one row per chain and transaction hash.
//
// TallyGas finds the completed transactions that have no gas_spends row yet
// and reads their cost (chains.CostReader), so nothing depends on the
// process that sent them staying up: a crash between a send's completion
// and its cost read only delays the row to the next tally, and the unique
// (chain, tx_hash) index makes two tallies at once record it once. A cost
// the chain cannot tell yet (a node that lags) is read again next time.
//
// Rent is kept apart from the fee: on Solana a send to a wallet without a
// token account pays its rent-exempt deposit (about 0.002 SOL), many times
// the fee, and a closed deposit account gives rent back (negative rent).

// The send policy: the treasury pays the gas of an agent's send (two
// transactions) and a human's withdrawal out of their 0.1% fee, which on a
// small send is less than the gas. Where the operator says so
// (Config.SendMinimums, SEND_MINIMUM_USD) the smallest send on a chain is
// raised to where the fee covers it; below it a send on that chain is
// refused with the minimum named, and a send without a chain goes to the
// next chain whose minimum it reaches. The default is the design's 0.01
// everywhere: the treasury subsidises small sends, by choice and in the
// gas report (GasReports) for anyone to see.

// SendMinimum is the smallest send (or withdrawal) on chain.
func (s *Service) SendMinimum(chain chains.Name) decimal.Decimal {
	if m, ok := s.cfg.SendMinimums[chain]; ok && m.GreaterThan(MinSendUSD) {
		return m
	}
	return MinSendUSD
}

// withinSendMinimums is candidates (the chain asked for, "" for none, or
// the agents' chains in order) less those whose minimum amount does not
// reach.
func (s *Service) withinSendMinimums(candidates []chains.Name, chain chains.Name, amount decimal.Decimal) ([]chains.Name, error) {
	var (
		out    []chains.Name
		lowest decimal.Decimal
	)
	for _, c := range candidates {
		minimum := s.SendMinimum(c)
		if amount.GreaterThanOrEqual(minimum) {
			out = append(out, c)
		} else if lowest.IsZero() || minimum.LessThan(lowest) {
			lowest = minimum
		}
	}
	switch {
	case len(out) > 0:
		return out, nil
	case chain != "":
		return nil, Invalid("amount_usd", "must be at least %s on %s: below it the gas the treasury pays exceeds the send's fee", usd(lowest), chain)
	default:
		return nil, Invalid("amount_usd", "must be at least %s: below it the gas the treasury pays exceeds the send's fee on every chain", usd(lowest))
	}
}

// Gas purposes: why the treasury paid for a transaction.
const (
	GasPurposeSend        = "send"
	GasPurposeSendFee     = "send_fee"
	GasPurposeWithdrawal  = "withdrawal"
	GasPurposeAgentPay    = "agent_pay"
	GasPurposeCardReserve = "card_reserve"
	GasPurposeCardReturn  = "card_return"
	GasPurposeSweep       = "sweep"
	GasPurposePayout      = "payout"
	GasPurposeRefund      = "refund"
	GasPurposeClose       = "close"
	GasPurposeRelay       = "relay"
)

// gasTallyBatch bounds how many transactions of one source a tally reads:
// one RPC call each.
const gasTallyBatch = 100

// gasSource is one table's completed transactions the treasury paid for.
// Its query returns chain, tx hash, mode and purpose of rows with no
// gas_spends row yet, oldest first.
type gasSource struct {
	name  string
	query string
}

// gasUntallied is the condition "no gas_spends row for this chain and
// hash", on the columns given.
func gasUntallied(chainCol, hashCol string) string {
	return fmt.Sprintf(`COALESCE(%[2]s, '') <> '' AND NOT EXISTS (SELECT 1 FROM gas_spends g WHERE g.chain = %[1]s AND g.tx_hash = %[2]s)`, chainCol, hashCol)
}

func (s *Service) gasSources() []gasSource {
	agentMode := string(s.cfg.AgentMode)
	limit := fmt.Sprintf(" LIMIT %d", gasTallyBatch)
	// The amount leg's purpose is its kind's (transfer_kinds.go).
	transferPurpose := gasPurposeOfKind()
	return []gasSource{
		{"transfers", `SELECT t.chain, t.tx_hash, '` + agentMode + `', ` + transferPurpose + `
			FROM transfers t WHERE t.status = 'completed' AND t.kind <> '` + string(transfer.KindInternalPayment) + `' AND ` + gasUntallied("t.chain", "t.tx_hash") +
			` ORDER BY t.completed_at` + limit},
		{"transfer fees", `SELECT t.chain, t.fee_tx_hash, '` + agentMode + `', '` + GasPurposeSendFee + `'
			FROM transfers t WHERE t.status = 'completed' AND ` + gasUntallied("t.chain", "t.fee_tx_hash") +
			` ORDER BY t.completed_at` + limit},
		{"card returns", `SELECT c.refund_chain, c.refund_tx_hash, '` + agentMode + `', '` + GasPurposeCardReturn + `'
			FROM card_requests c WHERE c.refunded_at IS NOT NULL AND ` + gasUntallied("c.refund_chain", "c.refund_tx_hash") +
			` ORDER BY c.refunded_at` + limit},
		{"sweeps", `SELECT p.chain, p.sweep_tx_hash, CASE WHEN s.livemode THEN 'live' ELSE 'test' END, '` + GasPurposeSweep + `'
			FROM payments p JOIN checkout_sessions s ON s.id = p.session_id
			WHERE p.swept_at IS NOT NULL AND ` + gasUntallied("p.chain", "p.sweep_tx_hash") +
			` ORDER BY p.swept_at` + limit},
		{"payouts", `SELECT COALESCE(p.settlement_chain, p.chain), p.settlement_tx_hash, CASE WHEN s.livemode THEN 'live' ELSE 'test' END, '` + GasPurposePayout + `'
			FROM payments p JOIN checkout_sessions s ON s.id = p.session_id
			WHERE p.settlement_status = 'completed' AND p.settlement_chain IS NOT NULL AND p.settlement_chain <> '' AND ` +
			gasUntallied("COALESCE(p.settlement_chain, p.chain)", "p.settlement_tx_hash") +
			` ORDER BY p.settled_at` + limit},
		// A dust sweep (checkout_dust.go) is one transaction for many rows.
		{"dust sweeps", `SELECT d.chain, d.sweep_tx_hash, CASE WHEN d.livemode THEN 'live' ELSE 'test' END, '` + GasPurposeSweep + `'
			FROM dust_deposits d WHERE d.swept_at IS NOT NULL AND ` + gasUntallied("d.chain", "d.sweep_tx_hash") +
			` GROUP BY d.chain, d.sweep_tx_hash, d.livemode ORDER BY MIN(d.swept_at)` + limit},
		{"refunds", `SELECT r.chain, r.tx_hash, CASE WHEN r.livemode THEN 'live' ELSE 'test' END, '` + GasPurposeRefund + `'
			FROM refunds r WHERE r.status = 'completed' AND ` + gasUntallied("r.chain", "r.tx_hash") +
			` ORDER BY r.completed_at` + limit},
	}
}

// GasTally is what one TallyGas did.
type GasTally struct {
	// Recorded is the number of transactions whose cost was recorded.
	Recorded int
	// Unread is the number whose cost the chain could not tell now (read
	// again by the next tally).
	Unread int
}

// TallyGas records the cost of every completed transaction the treasury
// paid for that has no gas_spends row yet (at most gasTallyBatch per
// source per call). The worker runs it periodically.
func (s *Service) TallyGas(ctx context.Context) (GasTally, error) {
	var tally GasTally
	for _, src := range s.gasSources() {
		pending, err := s.untalliedGas(ctx, src)
		if err != nil {
			return tally, err
		}
		for _, tx := range pending {
			ok, err := s.recordGas(ctx, tx)
			if err != nil {
				return tally, err
			}
			if ok {
				tally.Recorded++
			} else {
				tally.Unread++
			}
		}
	}
	return tally, nil
}

// gasTx is a transaction the treasury paid for.
type gasTx struct {
	chain   chains.Name
	mode    Mode
	hash    string
	purpose string
}

func (s *Service) untalliedGas(ctx context.Context, src gasSource) ([]gasTx, error) {
	rows, err := s.cfg.DB.SQL.QueryContext(ctx, src.query)
	if err != nil {
		return nil, fmt.Errorf("gas tally of %s: %w", src.name, err)
	}
	defer rows.Close()
	var out []gasTx
	for rows.Next() {
		var chain, hash, mode, purpose sql.NullString
		if err := rows.Scan(&chain, &hash, &mode, &purpose); err != nil {
			return nil, fmt.Errorf("gas tally of %s: %w", src.name, err)
		}
		out = append(out, gasTx{chain: chains.Name(chain.String), mode: Mode(mode.String), hash: hash.String, purpose: purpose.String})
	}
	return out, rows.Err()
}

// recordGas reads tx's cost from its chain and records it; false when the
// chain could not tell it now (or the chain is not configured here).
func (s *Service) recordGas(ctx context.Context, tx gasTx) (bool, error) {
	ledger, err := s.ledger(tx.mode, tx.chain)
	if err != nil {
		s.logger.DebugContext(ctx, "gas tally: chain not configured", "chain", tx.chain, "mode", tx.mode)
		return false, nil
	}
	reader, ok := ledger.(chains.CostReader)
	if !ok {
		return false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, gasReadTimeout)
	defer cancel()
	cost, err := reader.TxCost(rctx, tx.hash)
	if err != nil {
		s.logger.DebugContext(ctx, "gas tally: reading a transaction's cost", "chain", tx.chain, "tx", tx.hash, "err", err)
		return false, nil
	}
	return true, s.saveGas(ctx, tx, cost)
}

// saveGas records cost once: a second tally of the same transaction (two
// workers at once) hits the unique index and changes nothing.
func (s *Service) saveGas(ctx context.Context, tx gasTx, cost chains.TxCost) error {
	rent := cost.Rent
	if rent == nil {
		rent = new(big.Int)
	}
	if cost.Fee == nil || !cost.Fee.IsInt64() || cost.Fee.Sign() < 0 || !rent.IsInt64() {
		return fmt.Errorf("recording gas of %s %s: cost fee %v rent %v out of range", tx.chain, tx.hash, cost.Fee, rent)
	}
	err := s.cfg.DB.Ent.GasSpend.Create().
		SetChain(string(tx.chain)).
		SetMode(gasspend.Mode(tx.mode)).
		SetTxHash(tx.hash).
		SetPurpose(tx.purpose).
		SetFee(cost.Fee.Int64()).
		SetRent(rent.Int64()).
		SetDecimals(cost.Decimals).
		Exec(ctx)
	if err != nil && !ent.IsConstraintError(err) {
		return fmt.Errorf("recording gas of %s %s: %w", tx.chain, tx.hash, err)
	}
	return nil
}

// recordRelayGas records the cost of relaying a payer's signed
// authorization (checkout_authorized_payments.go). Best effort, like recordCloseGas.
func (s *Service) recordRelayGas(ctx context.Context, mode Mode, ledger chains.Ledger, hash string) {
	if _, err := s.recordGas(ctx, gasTx{chain: ledger.Chain(), mode: mode, hash: hash, purpose: GasPurposeRelay}); err != nil {
		s.logger.WarnContext(ctx, "recording the gas of a relayed authorization", "chain", ledger.Chain(), "tx", hash, "err", err)
	}
}

// recordCloseGas records the cost of closing an emptied Solana deposit
// account (its hash is kept nowhere else). Best effort, as the close is.
func (s *Service) recordCloseGas(ctx context.Context, mode Mode, ledger chains.Ledger, hash string) {
	if hash == "" {
		return
	}
	if _, err := s.recordGas(ctx, gasTx{chain: ledger.Chain(), mode: mode, hash: hash, purpose: GasPurposeClose}); err != nil {
		s.logger.WarnContext(ctx, "recording the gas of a token account close", "chain", ledger.Chain(), "tx", hash, "err", err)
	}
}

// GasReport is what the treasury paid for transactions on one chain in one
// mode, next to what it earned there.
type GasReport struct {
	Chain chains.Name
	Mode  Mode
	// Native is the chain's gas token (ETH, SOL) and Decimals its smallest
	// unit's decimals.
	Native   string
	Decimals int32
	// Transactions is how many transactions were paid for; Fees and Rent
	// their cost in the native token (exact decimals), Rent negative when
	// closes returned more than opens spent.
	Transactions int64
	Fees         decimal.Decimal
	Rent         decimal.Decimal
	// ByPurpose splits Fees+Rent by purpose (send, sweep, payout...).
	ByPurpose map[string]decimal.Decimal
	// SendFees is the 0.1% fee collected on agents' sends on this chain,
	// and SettlementFees the merchants' settlement fees, both in USDC.
	SendFees       decimal.Decimal
	SettlementFees decimal.Decimal
}

// nativeTokens names each chain's gas token.
var nativeTokens = map[chains.Name]string{
	chains.Solana:   "SOL",
	chains.Base:     "ETH",
	chains.Arbitrum: "ETH",
	chains.Ethereum: "ETH",
	chains.Polygon:  "POL",
}

// gasSplit is the unit the sums are split at: SUM(x / gasSplit) and
// SUM(x % gasSplit) are exact integers on both databases long after SUM(x)
// would overflow SQLite's int64 (9.2 ETH in wei).
const gasSplit = 1_000_000_000

// GasReports reports the gas ledger per chain and mode, in the chains'
// order, with the fees collected there.
func (s *Service) GasReports(ctx context.Context) ([]GasReport, error) {
	type key struct {
		chain chains.Name
		mode  Mode
	}
	reports := map[key]*GasReport{}
	get := func(chain chains.Name, mode Mode) *GasReport {
		k := key{chain, mode}
		r := reports[k]
		if r == nil {
			r = &GasReport{Chain: chain, Mode: mode, Native: nativeTokens[chain], Decimals: nativeDecimals(chain), ByPurpose: map[string]decimal.Decimal{}}
			reports[k] = r
		}
		return r
	}
	q := fmt.Sprintf(`SELECT chain, mode, purpose, decimals, COUNT(*),
		SUM(fee / %[1]d), SUM(fee %% %[1]d), SUM(rent / %[1]d), SUM(rent %% %[1]d)
		FROM gas_spends GROUP BY chain, mode, purpose, decimals`, gasSplit)
	rows, err := s.cfg.DB.SQL.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("reading the gas ledger: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			chain, mode, purpose         string
			decimals                     int32
			count                        int64
			feeHi, feeLo, rentHi, rentLo string
		)
		if err := rows.Scan(&chain, &mode, &purpose, &decimals, &count, &feeHi, &feeLo, &rentHi, &rentLo); err != nil {
			return nil, fmt.Errorf("reading the gas ledger: %w", err)
		}
		fee, err := joinSplitSum(feeHi, feeLo)
		if err != nil {
			return nil, err
		}
		rent, err := joinSplitSum(rentHi, rentLo)
		if err != nil {
			return nil, err
		}
		fee, rent = fee.Shift(-decimals), rent.Shift(-decimals)
		r := get(chains.Name(chain), Mode(mode))
		r.Transactions += count
		r.Fees = r.Fees.Add(fee)
		r.Rent = r.Rent.Add(rent)
		r.ByPurpose[purpose] = r.ByPurpose[purpose].Add(fee).Add(rent)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the gas ledger: %w", err)
	}
	if err := s.addCollectedFees(ctx, get); err != nil {
		return nil, err
	}
	out := make([]GasReport, 0, len(reports))
	for _, r := range reports {
		out = append(out, *r)
	}
	order := map[chains.Name]int{}
	for i, c := range chains.All {
		order[c] = i
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Mode != out[j].Mode {
			return out[i].Mode < out[j].Mode
		}
		return order[out[i].Chain] < order[out[j].Chain]
	})
	return out, nil
}

// joinSplitSum is hi*gasSplit + lo, the two parts' sums as the database
// wrote them.
func joinSplitSum(hi, lo string) (decimal.Decimal, error) {
	h, err := decimal.NewFromString(hi)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("reading the gas ledger: sum %q: %w", hi, err)
	}
	l, err := decimal.NewFromString(lo)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("reading the gas ledger: sum %q: %w", lo, err)
	}
	return h.Mul(decimal.NewFromInt(gasSplit)).Add(l), nil
}

// nativeDecimals is the decimals of the chain's gas token's smallest unit.
func nativeDecimals(chain chains.Name) int32 {
	if chain == chains.Solana {
		return 9
	}
	return 18
}

// addCollectedFees adds to the reports what the treasury earned: send fees
// per chain (agents' mode) and settlement fees per paid chain and mode.
func (s *Service) addCollectedFees(ctx context.Context, get func(chains.Name, Mode) *GasReport) error {
	agentMode := s.cfg.AgentMode
	sums := []struct {
		query string
		add   func(r *GasReport, v decimal.Decimal)
	}{
		{`SELECT chain, '` + string(agentMode) + `', COALESCE(SUM(fee), 0) FROM transfers WHERE status = 'completed' AND fee > 0 GROUP BY chain`,
			func(r *GasReport, v decimal.Decimal) { r.SendFees = r.SendFees.Add(v) }},
		{`SELECT p.chain, CASE WHEN s.livemode THEN 'live' ELSE 'test' END, COALESCE(SUM(p.settlement_fee), 0)
			FROM payments p JOIN checkout_sessions s ON s.id = p.session_id
			WHERE p.settlement_status = 'completed' GROUP BY p.chain, s.livemode`,
			func(r *GasReport, v decimal.Decimal) { r.SettlementFees = r.SettlementFees.Add(v) }},
	}
	for _, sum := range sums {
		rows, err := s.cfg.DB.SQL.QueryContext(ctx, sum.query)
		if err != nil {
			return fmt.Errorf("summing fees: %w", err)
		}
		for rows.Next() {
			var chain, mode, total string
			if err := rows.Scan(&chain, &mode, &total); err != nil {
				rows.Close()
				return fmt.Errorf("summing fees: %w", err)
			}
			units, err := baseUnitsSum(total)
			if err != nil {
				rows.Close()
				return err
			}
			sum.add(get(chains.Name(chain), Mode(mode)), units)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("summing fees: %w", err)
		}
	}
	return nil
}
