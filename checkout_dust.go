package agentpay

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/depositaddress"
	"agentpay/ent/dustdeposit"
	"agentpay/ent/gasspend"
)

// Dust (docs/money.md#dust). A transfer to a deposit address below its
// chain's minimum worth counting (Config.DustMinimums, DUST_MINIMUM_USD;
// default one cent) is dust, not a payment: anyone can send one to any
// address for the price of its gas, and as a payment it would send
// webhooks, hold its session on its chain (no change of chain, no cancel)
// and cost the treasury a sweep worth more than it carries.
//
// So dust is recorded (dust_deposits), once final and never before (a
// payment's states are not worth its while), in the scan's transaction:
// no webhook, no change to its session, nothing settled, no merchant
// credited. The books count it on its address, so they balance with dust
// on deposit addresses, and its sweep in the treasury.
//
// It is swept to the treasury only once what has accumulated on the
// address is worth the gas: at least what a sweep on that chain and mode
// costs, as the gas ledger measured it (sweepGasEstimate: the mean of the
// last sweeps it recorded there, in the chain's native token) valued at
// the chain's gas token price (Config.GasTokenPrices, GAS_TOKEN_PRICE_USD;
// defaults set high, so dust waits rather than costs). Before any sweep
// has been measured on a chain and mode, dust waits. One sweep carries
// every unswept dust row of the address: the rows are claimed under one
// sweep_id, whose transfer (the deposit address's key, relayed and paid
// for by the treasury, as a payment's sweep) has a reference fixed by the
// id, so it moves the funds once whatever crashes; its columns are written
// as a payment's sweep writes its own. settle_pending enqueues a
// sweep_dust job for each address due (DustToSweep). Dust is the
// service's: no merchant or payer is owed it.
//
// A deposit address is not watched longer for its dust: dust arriving
// after the address stopped being watched (checkout_deposits.go) is not seen, as a
// payment is not.

// DefaultDustMinimum is a chain's minimum worth counting unless
// Config.DustMinimums says otherwise: one cent.
var DefaultDustMinimum = decimal.New(1, -2)

// DefaultDustMinimumUnits is DefaultDustMinimum in USDC base units.
const DefaultDustMinimumUnits = 10_000

// DefaultGasTokenPrices value a chain's gas token, in USD, unless
// Config.GasTokenPrices says otherwise: set high (several times the
// market's), so a dust sweep waits rather than costs more than it carries.
var DefaultGasTokenPrices = map[string]decimal.Decimal{
	"ETH": decimal.NewFromInt(10_000),
	"SOL": decimal.NewFromInt(1_000),
	"POL": decimal.NewFromInt(5),
}

// dustEstimateSample is how many of the latest sweeps a chain and mode's
// sweep estimate averages.
const dustEstimateSample = 20

// DustMinimum is the smallest deposit on chain that counts as a payment.
func (s *Service) DustMinimum(chain chains.Name) decimal.Decimal {
	if m, ok := s.cfg.DustMinimums[chain]; ok && !m.IsNegative() {
		return m
	}
	return DefaultDustMinimum
}

// isDust reports whether a deposit of units on chain is below its minimum.
func (s *Service) isDust(chain chains.Name, units *big.Int, decimals int32) bool {
	minimum, err := ToBaseUnits("dust minimum", s.DustMinimum(chain), decimals)
	if err != nil {
		// More decimals than the token: the configuration check refuses
		// it; rounded up here, never down.
		minimum = s.DustMinimum(chain).Shift(decimals).Ceil().BigInt()
	}
	return units.Cmp(minimum) < 0
}

// GasTokenPrice is the USD value of chain's gas token that dust is
// weighed with.
func (s *Service) GasTokenPrice(chain chains.Name) decimal.Decimal {
	if p, ok := s.cfg.GasTokenPrices[chain]; ok && p.IsPositive() {
		return p
	}
	return DefaultGasTokenPrices[nativeTokens[chain]]
}

// recordDust records a final deposit below the chain's minimum on da as
// dust, once (a replayed scan finds it recorded); earlier states of it
// record nothing.
func (d *depositTx) recordDust(ctx context.Context, da *ent.DepositAddress, livemode bool, ev chains.DepositEvent) error {
	if ev.Kind != chains.DepositFinal {
		return nil
	}
	exists, err := d.tx.DustDeposit.Query().
		Where(dustdeposit.Chain(string(d.chain)), dustdeposit.TxHash(ev.Deposit.TxHash), dustdeposit.LogIndex(int(ev.Deposit.Index))).
		Exist(ctx)
	if err != nil || exists {
		return err
	}
	if !ev.Deposit.Amount.IsInt64() {
		return fmt.Errorf("dust %s: amount %v out of range", ev.Deposit.Key(), ev.Deposit.Amount)
	}
	if err := d.tx.DustDeposit.Create().
		SetDepositAddressID(da.ID).
		SetChain(string(d.chain)).
		SetLivemode(livemode).
		SetTxHash(ev.Deposit.TxHash).
		SetLogIndex(int(ev.Deposit.Index)).
		SetFromAddress(ev.Deposit.From).
		SetAmount(ev.Deposit.Amount.Int64()).
		SetBlockNumber(int64(ev.Deposit.Block)).
		Exec(ctx); err != nil {
		return fmt.Errorf("recording dust: %w", err)
	}
	d.s.logger.InfoContext(ctx, "dust recorded", "chain", d.chain, "to", da.Address, "tx", ev.Deposit.TxHash,
		"amount", FromBaseUnits(ev.Deposit.Amount, d.decimals))
	return nil
}

// sweepGasEstimate is what one sweep costs the treasury on chain in mode,
// in the chain's native token: the mean fee and rent of the latest
// dustEstimateSample sweeps the gas ledger recorded there; ok is false
// before any.
func (s *Service) sweepGasEstimate(ctx context.Context, chain chains.Name, mode Mode) (decimal.Decimal, bool, error) {
	rows, err := s.cfg.DB.Ent.GasSpend.Query().
		Where(gasspend.Chain(string(chain)), gasspend.ModeEQ(gasspend.Mode(mode)), gasspend.Purpose(GasPurposeSweep)).
		Order(ent.Desc(gasspend.FieldCreatedAt), ent.Desc(gasspend.FieldID)).
		Limit(dustEstimateSample).
		All(ctx)
	if err != nil {
		return decimal.Zero, false, fmt.Errorf("reading sweep costs: %w", err)
	}
	if len(rows) == 0 {
		return decimal.Zero, false, nil
	}
	sum := decimal.Zero
	for _, r := range rows {
		sum = sum.Add(decimal.New(r.Fee+r.Rent, -r.Decimals))
	}
	return sum.Div(decimal.NewFromInt(int64(len(rows)))), true, nil
}

// DustSweepMinimum is how much dust, in USDC base units, an address on
// chain in mode must hold before it is worth a sweep's gas; ok is false
// while the gas ledger has measured no sweep there.
func (s *Service) DustSweepMinimum(ctx context.Context, chain chains.Name, mode Mode) (int64, bool, error) {
	gas, ok, err := s.sweepGasEstimate(ctx, chain, mode)
	if err != nil || !ok {
		return 0, false, err
	}
	usd := gas.Mul(s.GasTokenPrice(chain))
	units := usd.Shift(USDCDecimals).Ceil()
	if !units.BigInt().IsInt64() {
		return 0, false, fmt.Errorf("dust sweep minimum on %s: %s USD out of range", chain, usd)
	}
	return max(units.IntPart(), 1), true, nil
}

// DustToSweep lists the deposit addresses whose dust a sweep_dust job
// should look at: those with a dust sweep under way (claimed, not swept)
// untouched for at least minAge, and those whose unswept dust is worth a
// sweep's gas (DustSweepMinimum); at most limit.
func (s *Service) DustToSweep(ctx context.Context, minAge time.Duration, limit int) ([]uuid.UUID, error) {
	seen := map[uuid.UUID]bool{}
	var out []uuid.UUID
	add := func(ids ...uuid.UUID) {
		for _, id := range ids {
			if !seen[id] && len(out) < limit {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	under, err := s.cfg.DB.Ent.DustDeposit.Query().
		Where(dustdeposit.SweepIDNotNil(), dustdeposit.SweptAtIsNil(), dustdeposit.UpdatedAtLTE(s.now().UTC().Add(-minAge))).
		Limit(limit).
		Select(dustdeposit.FieldDepositAddressID).
		Strings(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing dust sweeps: %w", err)
	}
	for _, raw := range under {
		id, err := uuid.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("listing dust sweeps: %w", err)
		}
		add(id)
	}
	for _, mode := range []Mode{ModeLive, ModeTest} {
		for chain := range s.networks(mode) {
			if len(out) >= limit {
				return out, nil
			}
			minimum, ok, err := s.DustSweepMinimum(ctx, chain, mode)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			ids, err := s.dustWorthSweeping(ctx, chain, mode, minimum, limit-len(out))
			if err != nil {
				return nil, err
			}
			add(ids...)
		}
	}
	return out, nil
}

// dustWorthSweeping lists up to limit deposit addresses on chain in mode
// whose dust not taken by a sweep yet sums to minimum or more: one grouped
// query, most dust first.
func (s *Service) dustWorthSweeping(ctx context.Context, chain chains.Name, mode Mode, minimum int64, limit int) ([]uuid.UUID, error) {
	b := entsql.Dialect(s.cfg.DB.Dialect)
	t := b.Table(dustdeposit.Table)
	total := func(w *entsql.Builder) { w.WriteString("SUM(").Ident(t.C(dustdeposit.FieldAmount)).WriteString(")") }
	sel := b.Select(t.C(dustdeposit.FieldDepositAddressID)).From(t).
		Where(entsql.And(
			entsql.EQ(t.C(dustdeposit.FieldChain), string(chain)),
			entsql.EQ(t.C(dustdeposit.FieldLivemode), mode == ModeLive),
			entsql.IsNull(t.C(dustdeposit.FieldSweepID)),
		)).
		GroupBy(t.C(dustdeposit.FieldDepositAddressID)).
		Having(entsql.P(func(w *entsql.Builder) { total(w); w.WriteString(" >= ").Arg(minimum) })).
		OrderExpr(entsql.ExprFunc(func(w *entsql.Builder) { total(w); w.WriteString(" DESC") })).
		Limit(limit)
	query, args := sel.Query()
	rows, err := s.cfg.DB.SQL.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing dust to sweep: %w", err)
	}
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("listing dust to sweep: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// SweepDust sweeps a deposit address's dust to the treasury, as far as it
// can in one run: a sweep under way first, else a new one taking every
// dust row of the address not swept yet, when they are worth the gas.
// Done once nothing is under way (swept now, or nothing worth sweeping).
func (s *Service) SweepDust(ctx context.Context, depositAddressID uuid.UUID) (SettleResult, error) {
	return s.sweepDustWith(ctx, depositAddressID, s.cfg.Settlement)
}

func (s *Service) sweepDustWith(ctx context.Context, depositAddressID uuid.UUID, opts SettlementOptions) (SettleResult, error) {
	opts = opts.withDefaults()
	da, err := s.cfg.DB.Ent.DepositAddress.Query().Where(depositaddress.ID(depositAddressID)).WithSession().Only(ctx)
	if ent.IsNotFound(err) {
		return SettleResult{}, fmt.Errorf("%w: deposit address %s", ErrNotFound, depositAddressID)
	}
	if err != nil {
		return SettleResult{}, err
	}
	mode := sessionMode(da.Edges.Session)
	chain := chains.Name(da.Chain)
	ledger, err := s.ledger(mode, chain)
	if err != nil {
		return SettleResult{}, fmt.Errorf("dust sweep: %w", err)
	}
	sweepID, err := s.dustSweepUnderWay(ctx, da.ID)
	if err != nil {
		return SettleResult{}, err
	}
	if sweepID == uuid.Nil {
		if sweepID, err = s.claimDust(ctx, da, chain, mode); err != nil || sweepID == uuid.Nil {
			return SettleResult{Done: err == nil}, err
		}
	}
	rows, err := s.cfg.DB.Ent.DustDeposit.Query().Where(dustdeposit.SweepID(sweepID)).All(ctx)
	if err != nil {
		return SettleResult{}, fmt.Errorf("dust sweep: reading its dust: %w", err)
	}
	if len(rows) == 0 {
		return SettleResult{Done: true}, nil
	}
	run := &dustSweep{s: s, id: sweepID, rows: rows}
	leg := &chainLeg{
		name:      "dust sweep",
		ledger:    ledger,
		from:      da.Address,
		to:        s.cfg.Treasury.Address(chain),
		amount:    big.NewInt(run.amount()),
		ref:       dustSweepRef(sweepID),
		hash:      rows[0].SweepTxHash,
		mayBeSent: rows[0].SweepSubmittedAt != nil,
		key:       func() ([]byte, error) { return s.DepositAddressKey(da) },
		row:       legRow{submit: run.submit, record: run.record, touched: run.touched},
	}
	done, waiting, err := s.driveLeg(ctx, opts, leg)
	if errors.Is(err, errSweepTaken) {
		return SettleResult{Waiting: err.Error()}, nil
	}
	if err != nil || !done {
		return SettleResult{Waiting: waiting}, err
	}
	if _, err := s.cfg.DB.Ent.DustDeposit.Update().
		Where(dustdeposit.SweepID(sweepID), dustdeposit.SweptAtIsNil()).
		SetSweptAt(s.now().UTC()).
		Save(ctx); err != nil {
		return SettleResult{}, fmt.Errorf("dust sweep: recording it swept: %w", err)
	}
	s.logger.InfoContext(ctx, "dust swept", "chain", chain, "mode", mode, "address", da.Address,
		"amount", FromBaseUnits(leg.amount, ledger.Decimals()), "tx", leg.hash)
	s.observeGas(ctx, mode, ledger, leg.hash)
	// The address emptied of dust and payments: on Solana its token
	// account's rent comes back (as after a payment's sweep).
	empty, err := s.depositAddressEmpty(ctx, da.ID)
	if err == nil && empty {
		s.closeSweptAccount(ctx, ledger, mode, da)
	}
	return SettleResult{Done: true}, nil
}

// dustSweepUnderWay is the id of a dust sweep of the address claimed and
// not swept yet (the oldest), uuid.Nil if none.
func (s *Service) dustSweepUnderWay(ctx context.Context, depositAddressID uuid.UUID) (uuid.UUID, error) {
	r, err := s.cfg.DB.Ent.DustDeposit.Query().
		Where(dustdeposit.DepositAddressID(depositAddressID), dustdeposit.SweepIDNotNil(), dustdeposit.SweptAtIsNil()).
		Order(ent.Asc(dustdeposit.FieldUpdatedAt), ent.Asc(dustdeposit.FieldID)).
		First(ctx)
	if ent.IsNotFound(err) {
		return uuid.Nil, nil
	}
	if err != nil {
		return uuid.Nil, fmt.Errorf("dust sweep: reading sweeps under way: %w", err)
	}
	return *r.SweepID, nil
}

// claimDust takes every dust row of the address not taken by a sweep into
// a new sweep, when together they are worth the gas: its id, or uuid.Nil
// when they are not (or there are none). One conditional update: a row
// recorded meanwhile is either in it or left for the next.
func (s *Service) claimDust(ctx context.Context, da *ent.DepositAddress, chain chains.Name, mode Mode) (uuid.UUID, error) {
	minimum, ok, err := s.DustSweepMinimum(ctx, chain, mode)
	if err != nil || !ok {
		return uuid.Nil, err
	}
	total, err := s.cfg.DB.Ent.DustDeposit.Query().
		Where(dustdeposit.DepositAddressID(da.ID), dustdeposit.SweepIDIsNil()).
		Aggregate(func(sel *entsql.Selector) string {
			return "COALESCE(SUM(" + sel.C(dustdeposit.FieldAmount) + "), 0)"
		}).
		Int(ctx)
	if err != nil {
		return uuid.Nil, fmt.Errorf("dust sweep: summing dust: %w", err)
	}
	if int64(total) < minimum {
		return uuid.Nil, nil
	}
	id := uuid.New()
	n, err := s.cfg.DB.Ent.DustDeposit.Update().
		Where(dustdeposit.DepositAddressID(da.ID), dustdeposit.SweepIDIsNil()).
		SetSweepID(id).
		SetUpdatedAt(s.now().UTC()).
		Save(ctx)
	if err != nil {
		return uuid.Nil, fmt.Errorf("dust sweep: claiming dust: %w", err)
	}
	if n == 0 {
		return uuid.Nil, nil // another run claimed it
	}
	return id, nil
}

// dustSweepRef is a dust sweep's idempotency reference (chainLeg.ref).
func dustSweepRef(id uuid.UUID) [32]byte {
	return sha256.Sum256(append([]byte("agentpay/dust-sweep/"), id[:]...))
}

// dustSweep is one run over one dust sweep: its rows, as last read.
type dustSweep struct {
	s    *Service
	id   uuid.UUID
	rows []*ent.DustDeposit
}

func (d *dustSweep) amount() int64 {
	var total int64
	for _, r := range d.rows {
		total += r.Amount
	}
	return total
}

// submit writes sweep_submitted_at before a broadcast, conditionally on
// the value this run read: errSweepTaken if another run wrote it since.
func (d *dustSweep) submit(ctx context.Context) error {
	now := d.s.now().UTC().Truncate(time.Microsecond) // as PostgreSQL keeps it
	u := d.s.cfg.DB.Ent.DustDeposit.Update().Where(dustdeposit.SweepID(d.id), dustdeposit.SweptAtIsNil())
	if at := d.rows[0].SweepSubmittedAt; at != nil {
		u.Where(dustdeposit.SweepSubmittedAt(*at))
	} else {
		u.Where(dustdeposit.SweepSubmittedAtIsNil())
	}
	n, err := u.SetSweepSubmittedAt(now).SetUpdatedAt(now).Save(ctx)
	if err != nil {
		return fmt.Errorf("dust sweep: saving: %w", err)
	}
	if n != len(d.rows) {
		return errSweepTaken
	}
	for _, r := range d.rows {
		r.SweepSubmittedAt, r.UpdatedAt = &now, now
	}
	return nil
}

func (d *dustSweep) record(ctx context.Context, hash string) error {
	if _, err := d.s.cfg.DB.Ent.DustDeposit.Update().
		Where(dustdeposit.SweepID(d.id)).
		SetSweepTxHash(hash).
		SetUpdatedAt(d.s.now().UTC()).
		Save(ctx); err != nil {
		return fmt.Errorf("dust sweep: recording %s: %w", hash, err)
	}
	return nil
}

func (d *dustSweep) touched() time.Time {
	r := d.rows[0]
	if r.SweepSubmittedAt != nil && r.SweepSubmittedAt.After(r.UpdatedAt) {
		return *r.SweepSubmittedAt
	}
	return r.UpdatedAt
}

// depositAddressEmpty reports whether nothing recorded on the address is
// left to sweep: no payment, no dust.
func (s *Service) depositAddressEmpty(ctx context.Context, id uuid.UUID) (bool, error) {
	dust, err := s.cfg.DB.Ent.DustDeposit.Query().
		Where(dustdeposit.DepositAddressID(id), dustdeposit.SweptAtIsNil()).Exist(ctx)
	if err != nil || dust {
		return false, err
	}
	paid, err := s.cfg.DB.Ent.DepositAddress.Query().
		Where(depositaddress.ID(id), depositaddress.HasPaymentsWith(paymentToSweep())).Exist(ctx)
	return !paid, err
}
