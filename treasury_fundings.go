package agentpay

import (
	"context"
	"fmt"
	"math/big"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/depositaddress"
	"agentpay/ent/funding"
	"agentpay/ent/wallet"
)

// Fundings (docs/money.md#outside-usdc-fundings): USDC paid to a holder
// (the treasury, a custodial wallet) from outside the service's own
// transfers, recorded so that the books (treasury_books.go) explain it. The deposit
// scan watches the holders too and records each inbound transfer from
// outside once it is final (inbound below); the devnet faucet records what
// it pays; an operator may record an outside payment by its transaction
// (RecordFundingTx). The amount is always read from the chain, never typed
// in, and a funding is one row per chain, transaction and address (the
// whole of what the transaction paid the address), so the faucet's record
// and the scan's of the same payment are one. A payment to a deposit
// address is never counted as a funding: it is a payment, recorded by the
// deposit scan, and refunded if unwanted (the dev faucet records what it
// sends there too, a row the books name but do not count); nor is a
// transfer from one of the service's own addresses, which its own record
// already counts.

// Funding sources: who paid USDC into an address from outside the
// service's own transfers (ent/schema/funding.go).
const (
	FundingFaucet            = "faucet"
	FundingTreasuryLiquidity = "treasury_liquidity"
	FundingOperator          = "operator"
	// FundingInbound: seen by the deposit scan, which watches the
	// holders too.
	FundingInbound = "inbound"
)

// OutsideFunding is USDC paid to an address from outside the service's
// own transfers, included on chain.
type OutsideFunding struct {
	Chain   chains.Name
	Mode    Mode
	Address string
	Amount  *big.Int
	TxHash  string
	Source  string
}

// RecordFunding records an included outside payment, so the books count
// it as an inflow of the address it paid. Recording the same transaction
// and address again changes nothing.
func (s *Service) RecordFunding(ctx context.Context, f OutsideFunding) error {
	if f.Amount == nil || f.Amount.Sign() <= 0 || !f.Amount.IsInt64() {
		return fmt.Errorf("record funding: amount %v out of range", f.Amount)
	}
	// Canonical, as the scan records it: one row per chain, transaction
	// and address whoever records it first.
	if c, err := s.wallets(f.Chain).ParseAddress(f.Address); err == nil {
		f.Address = c
	}
	err := s.cfg.DB.Ent.Funding.Create().
		SetChain(string(f.Chain)).SetMode(funding.Mode(f.Mode)).SetAddress(f.Address).
		SetAmount(f.Amount.Int64()).SetTxHash(f.TxHash).SetSource(f.Source).
		Exec(ctx)
	if ent.IsConstraintError(err) {
		return nil
	}
	return err
}

// RecordFundingTx records what the included transaction txHash paid to
// address (the treasury or a custodial wallet) on chain in mode, read from
// the chain, as an operator's funding, and answers the amount. Refused:
// a deposit address (its payments are payments), an address the service
// does not hold, a transaction that paid the address nothing (or is not
// included yet), and one sent from an address the service holds (its own
// transfer, counted by its record).
func (s *Service) RecordFundingTx(ctx context.Context, mode Mode, chain chains.Name, address, txHash string) (*big.Int, error) {
	ledger, err := s.ledger(mode, chain)
	if err != nil {
		return nil, err
	}
	if err := ledger.ValidateAddress(address); err != nil {
		return nil, Invalid("address", "not a valid %s address", chain)
	}
	if c, err := s.wallets(chain).ParseAddress(address); err == nil {
		address = c
	}
	if txHash == "" || len(txHash) > 128 {
		return nil, Invalid("tx_hash", "required, at most 128 characters")
	}
	reader, ok := ledger.(chains.DepositReader)
	if !ok {
		return nil, Invalid("chain", "%s cannot read a transaction's transfers", chain)
	}
	held, err := s.holds(ctx, s.cfg.DB.Ent, mode, chain, address)
	if err != nil {
		return nil, err
	}
	switch held {
	case BooksDepositAddresses:
		return nil, Invalid("address", "is a deposit address: what reaches it is a payment, recorded by the deposit scan, not a funding")
	case "":
		return nil, Invalid("address", "is not an address the service holds on %s in %s mode (the treasury or a custodial wallet)", chain, mode)
	}
	deps, err := reader.DepositsIn(ctx, txHash, address)
	if err != nil {
		return nil, fmt.Errorf("record funding: reading %s on %s: %w", txHash, chain, err)
	}
	total := new(big.Int)
	for _, d := range deps {
		from, err := s.holds(ctx, s.cfg.DB.Ent, mode, chain, d.From)
		if err != nil {
			return nil, err
		}
		if from != "" {
			return nil, Invalid("tx_hash", "is a transfer from the service's own %s %s: its record counts it", holderNoun(from), d.From)
		}
		total.Add(total, d.Amount)
	}
	if total.Sign() == 0 {
		return nil, Invalid("tx_hash", "paid %s no USDC on %s (or is not included yet)", address, chain)
	}
	if err := s.RecordFunding(ctx, OutsideFunding{Chain: chain, Mode: mode, Address: address, Amount: total,
		TxHash: txHash, Source: FundingOperator}); err != nil {
		return nil, err
	}
	return total, nil
}

// holds answers which holder class address is on chain in mode, "" when
// the service does not hold it, reading through db (a transaction's client
// inside one).
func (s *Service) holds(ctx context.Context, db *ent.Client, mode Mode, chain chains.Name, address string) (BooksHolder, error) {
	if sameAddress(chain, address, s.cfg.Treasury.Address(chain)) {
		return BooksTreasury, nil
	}
	canonical := address
	if c, err := s.wallets(chain).ParseAddress(address); err == nil {
		canonical = c
	}
	n, err := db.DepositAddress.Query().Where(depositaddress.Chain(string(chain)), depositaddress.Address(canonical)).Count(ctx)
	if err != nil {
		return "", err
	}
	if n > 0 {
		return BooksDepositAddresses, nil
	}
	if mode != s.cfg.AgentMode {
		return "", nil
	}
	w, err := db.Wallet.Query().Where(wallet.Chain(string(chain)), wallet.Address(canonical), wallet.KindEQ(wallet.KindCustodial)).First(ctx)
	switch {
	case ent.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", err
	case w.UserID != nil:
		return BooksHumanWallets, nil
	}
	return BooksAgentWallets, nil
}

// inboundWatch is what a deposit scan watches besides deposit addresses:
// the treasury, and in the agents' mode the custodial wallets, by
// chain-normalised address.
type inboundWatch map[string]string

// inboundHolders lists the addresses whose inbound USDC the scan of chain
// in mode records as fundings. Every custodial wallet is read on each scan
// (one indexed query; the watchers match a transfer's recipient in
// memory, so the chain is not asked per address).
func (s *Service) inboundHolders(ctx context.Context, mode Mode, chain chains.Name) (inboundWatch, error) {
	out := inboundWatch{}
	norm := s.wallets(chain).NormalizeAddress
	if t := s.cfg.Treasury.Address(chain); t != "" {
		out[norm(t)] = t
	}
	if mode != s.cfg.AgentMode {
		return out, nil
	}
	ws, err := s.cfg.DB.Ent.Wallet.Query().
		Where(wallet.Chain(string(chain)), wallet.KindEQ(wallet.KindCustodial)).
		Select(wallet.FieldAddress).
		Strings(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the wallets to watch: %w", err)
	}
	for _, a := range ws {
		out[norm(a)] = a
	}
	return out, nil
}

// inbound is what one transaction paid a holder from outside, once final:
// the first of its transfers to the holder (for the log) and the total.
type inbound struct {
	dep   chains.Deposit
	to    string
	total *big.Int
}

// readInbound groups the final events to a holder by transaction and
// holder, summing what each transaction paid the holder from outside. An
// event not final yet is left: a reorg may still drop it, and the scan
// reports it final once. The sum is taken from the events themselves, not
// read from the chain: the scan decodes every transfer of the token to a
// watched address (the holders are watched), with the decoder DepositsIn
// uses, and a transaction's transfers are in one block (one slot), so they
// turn final in the same poll. Reading each transaction's receipt instead
// cost one RPC call per transfer (and, on a node, a decode of its whole
// block), which at volume was most of the scan's chain reads.
func (s *Service) readInbound(holders inboundWatch, chain chains.Name, evs []chains.DepositEvent) []inbound {
	norm := s.wallets(chain).NormalizeAddress
	var out []inbound
	at := map[[2]string]int{} // (tx, holder) -> index in out
	for _, ev := range evs {
		if ev.Kind != chains.DepositFinal || ev.Deposit.Amount == nil || ev.Deposit.Amount.Sign() <= 0 {
			continue
		}
		if _, own := holders[norm(ev.Deposit.From)]; own {
			// From the treasury or a custodial wallet: the service's own
			// transfer (a send, a fee leg, a card return), counted by its
			// record and never a funding (recordInbound, holds), so
			// dropped here, in memory: at volume most transfers reaching
			// a holder are the service's own.
			continue
		}
		to := holders[norm(ev.Deposit.To)]
		key := [2]string{ev.Deposit.TxHash, to}
		if i, ok := at[key]; ok {
			out[i].total.Add(out[i].total, ev.Deposit.Amount)
			continue
		}
		at[key] = len(out)
		out = append(out, inbound{dep: ev.Deposit, to: to, total: new(big.Int).Set(ev.Deposit.Amount)})
	}
	return out
}

// inChunk bounds the values of one IN list: SQLite allows 32,766 bound
// variables, PostgreSQL 65,535; smaller lists keep each statement's plan
// and memory modest.
const inChunk = 500

// chunks calls f with successive slices of at most inChunk values.
func chunks[T any](vs []T, f func([]T) error) error {
	for i := 0; i < len(vs); i += inChunk {
		if err := f(vs[i:min(i+inChunk, len(vs))]); err != nil {
			return err
		}
	}
	return nil
}

// recordInbound records, in the scan's transaction, each final transfer to
// a holder that came from outside as a funding. One from an address the
// service holds is its own transfer (a send, a fee leg, a sweep, a card
// return), counted by its record; one whose transaction is already
// recorded for the address (the faucet's own record, another transfer in
// the same transaction) changes nothing. The lookups are set queries (the
// senders the service holds, the fundings already recorded) and the rows
// are inserted in bulk, so a scan costs a few statements per few hundred
// transfers, not several per transfer.
func (s *Service) recordInbound(ctx context.Context, tx *ent.Tx, mode Mode, chain chains.Name, ins []inbound) error {
	if len(ins) == 0 {
		return nil
	}
	froms := make([]string, 0, len(ins))
	hashes := make([]string, 0, len(ins))
	for _, in := range ins {
		froms = append(froms, in.dep.From)
		hashes = append(hashes, in.dep.TxHash)
	}
	own, err := s.holdsAny(ctx, tx.Client(), mode, chain, froms)
	if err != nil {
		return err
	}
	recorded := map[[2]string]bool{}
	if err := chunks(uniq(hashes), func(part []string) error {
		rows, err := tx.Funding.Query().
			Where(funding.Chain(string(chain)), funding.TxHashIn(part...)).
			Select(funding.FieldTxHash, funding.FieldAddress).
			All(ctx)
		for _, r := range rows {
			recorded[[2]string{r.TxHash, r.Address}] = true
		}
		return err
	}); err != nil {
		return err
	}
	var creates []*ent.FundingCreate
	for _, in := range ins {
		if own[s.canonicalAddress(chain, in.dep.From)] || recorded[[2]string{in.dep.TxHash, in.to}] {
			continue
		}
		if !in.total.IsInt64() {
			// More than any USDC supply: never holds up the scan; the
			// books show it as a difference.
			s.logger.WarnContext(ctx, "funding: amount out of range, not recorded", "chain", chain, "tx", in.dep.TxHash, "amount", in.total.String())
			continue
		}
		creates = append(creates, tx.Funding.Create().
			SetChain(string(chain)).SetMode(funding.Mode(mode)).SetAddress(in.to).
			SetAmount(in.total.Int64()).SetTxHash(in.dep.TxHash).SetSource(FundingInbound))
		s.logger.InfoContext(ctx, "funding", "chain", chain, "mode", mode, "to", in.to, "from", in.dep.From,
			"tx", in.dep.TxHash, "amount", in.total.String())
	}
	return chunks(creates, func(part []*ent.FundingCreate) error {
		if err := tx.Funding.CreateBulk(part...).Exec(ctx); err != nil {
			return fmt.Errorf("recording %d fundings: %w", len(part), err)
		}
		return nil
	})
}

// canonicalAddress is address as the service stores it on chain (EVM:
// checksummed), or as given when it does not parse.
func (s *Service) canonicalAddress(chain chains.Name, address string) string {
	if c, err := s.wallets(chain).ParseAddress(address); err == nil {
		return c
	}
	return address
}

// holdsAny answers which of addresses (by canonicalAddress) the service
// holds on chain in mode, as holds does one: the treasury, a deposit
// address, and in the agents' mode a custodial wallet. Two set queries per
// inChunk addresses.
func (s *Service) holdsAny(ctx context.Context, db *ent.Client, mode Mode, chain chains.Name, addresses []string) (map[string]bool, error) {
	held := map[string]bool{}
	canon := make([]string, 0, len(addresses))
	for _, a := range addresses {
		c := s.canonicalAddress(chain, a)
		if sameAddress(chain, a, s.cfg.Treasury.Address(chain)) {
			held[c] = true
			continue
		}
		canon = append(canon, c)
	}
	err := chunks(uniq(canon), func(part []string) error {
		found, err := db.DepositAddress.Query().
			Where(depositaddress.Chain(string(chain)), depositaddress.AddressIn(part...)).
			Select(depositaddress.FieldAddress).
			Strings(ctx)
		if err != nil {
			return err
		}
		if mode == s.cfg.AgentMode {
			ws, err := db.Wallet.Query().
				Where(wallet.Chain(string(chain)), wallet.AddressIn(part...), wallet.KindEQ(wallet.KindCustodial)).
				Select(wallet.FieldAddress).
				Strings(ctx)
			if err != nil {
				return err
			}
			found = append(found, ws...)
		}
		for _, a := range found {
			held[a] = true
		}
		return nil
	})
	return held, err
}

// uniq is vs without repeats, in first-seen order.
func uniq(vs []string) []string {
	seen := make(map[string]bool, len(vs))
	out := vs[:0:0]
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
