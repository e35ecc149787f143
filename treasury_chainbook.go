package agentpay

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/dustdeposit"
	"agentpay/ent/funding"
	"agentpay/ent/merchant"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
	"agentpay/ent/settlementbatch"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
)

// bookAccount is one holder address being summed.
type bookAccount struct {
	holder   BooksHolder
	address  string
	owner    string
	records  big.Int
	onChain  *big.Int
	touching []BooksRecord
	inFlight []BooksRecord
}

// chainBook sums one chain and mode's records per holder address.
type chainBook struct {
	chain    chains.Name
	mode     Mode
	accounts map[string]*bookAccount
	order    []*bookAccount
}

func (b *chainBook) key(address string) string {
	if b.chain.IsEVM() {
		return strings.ToLower(address)
	}
	return address
}

func (b *chainBook) holder(h BooksHolder, address, owner string) {
	if address == "" {
		return
	}
	k := b.key(address)
	if _, ok := b.accounts[k]; ok {
		return
	}
	a := &bookAccount{holder: h, address: address, owner: owner}
	b.accounts[k] = a
	b.order = append(b.order, a)
}

func (b *chainBook) account(address string) *bookAccount {
	if address == "" {
		return nil
	}
	return b.accounts[b.key(address)]
}

// move records a final movement: amount leaves from and reaches to
// (either "" or not a holder: outside the books).
func (b *chainBook) move(from, to string, rec BooksRecord) {
	if a := b.account(from); a != nil {
		a.records.Sub(&a.records, big.NewInt(rec.Amount))
		a.touching = append(a.touching, rec)
	}
	if a := b.account(to); a != nil {
		a.records.Add(&a.records, big.NewInt(rec.Amount))
		a.touching = append(a.touching, rec)
	}
}

// touch notes a record that names a holder but, by its state, moved
// nothing (a failed refund or transfer): it may still explain a
// difference, if the chain says otherwise.
func (b *chainBook) touch(rec BooksRecord, addresses ...string) {
	for _, addr := range addresses {
		if a := b.account(addr); a != nil {
			a.touching = append(a.touching, rec)
		}
	}
}

// flight notes a record in flight on the holders among addresses.
func (b *chainBook) flight(rec BooksRecord, addresses ...string) {
	rec.InFlight = true
	for _, addr := range addresses {
		if a := b.account(addr); a != nil {
			a.inFlight = append(a.inFlight, rec)
		}
	}
}

// chainBook sums the records of chain in mode per holder.
func (s *Service) chainBook(ctx context.Context, chain chains.Name, mode Mode) (*chainBook, error) {
	db := s.cfg.DB.Ent
	live := mode == ModeLive
	b := &chainBook{chain: chain, mode: mode, accounts: map[string]*bookAccount{}}
	treasury := s.cfg.Treasury.Address(chain)
	b.holder(BooksTreasury, treasury, "")

	deposits, err := db.DepositAddress.Query().
		Where(depositaddress.Chain(string(chain)), depositaddress.HasSessionWith(checkoutsession.Livemode(live))).
		Order(ent.Asc(depositaddress.FieldCreatedAt), ent.Asc(depositaddress.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading deposit addresses: %w", err)
	}
	depositOf := make(map[string]string, len(deposits))
	for _, d := range deposits {
		b.holder(BooksDepositAddresses, d.Address, "session "+d.SessionID.String())
		depositOf[d.ID.String()] = d.Address
	}
	agentMode := mode == s.cfg.AgentMode
	if agentMode {
		ws, err := db.Wallet.Query().
			Where(wallet.Chain(string(chain)), wallet.KindEQ(wallet.KindCustodial)).
			Order(ent.Asc(wallet.FieldCreatedAt), ent.Asc(wallet.FieldID)).
			All(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading wallets: %w", err)
		}
		for _, w := range ws {
			if w.UserID != nil {
				b.holder(BooksHumanWallets, w.Address, "user "+w.UserID.String())
			} else {
				b.holder(BooksAgentWallets, w.Address, "agent "+w.AgentID.String())
			}
		}
	}

	fundings, err := db.Funding.Query().
		Where(funding.Chain(string(chain)), funding.ModeEQ(funding.Mode(mode))).
		Order(ent.Asc(funding.FieldCreatedAt), ent.Asc(funding.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading fundings: %w", err)
	}
	for _, f := range fundings {
		rec := BooksRecord{Kind: "funding", ID: f.ID.String(), Amount: f.Amount, Status: f.Source}
		if a := b.account(f.Address); a != nil && a.holder == BooksDepositAddresses {
			// The faucet paying a checkout: what reaches a deposit address
			// is a payment, whose record counts it.
			b.touch(rec, f.Address)
			continue
		}
		b.move("", f.Address, rec)
	}

	payments, err := db.Payment.Query().
		Where(payment.Chain(string(chain)), payment.HasSessionWith(checkoutsession.Livemode(live))).
		Order(ent.Asc(payment.FieldCreatedAt), ent.Asc(payment.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading payments: %w", err)
	}
	for _, p := range payments {
		addr := depositOf[p.DepositAddressID.String()]
		rec := BooksRecord{Kind: "payment", ID: p.ID.String(), Amount: p.AmountToken, Status: string(p.Status)}
		if p.Status == payment.StatusFailed {
			b.touch(rec, addr) // dropped by a reorg: the chain holds nothing of it
			continue
		}
		sweep := BooksRecord{Kind: "sweep", ID: p.ID.String(), Amount: p.AmountToken, Status: "swept"}
		if isInternalRef(p.TxHash) {
			// An internal payment (settle_internal.go) moved nothing to
			// its deposit address: its USDC stays in the payer's wallet
			// until its sweep, the collection, moves it to the treasury.
			addr = p.FromAddress
			sweep.Status = "collected"
		} else {
			b.move("", addr, rec)
			if p.Status != payment.StatusConfirmed {
				b.flight(rec, addr)
			}
		}
		switch {
		case p.SweptAt != nil:
			b.move(addr, treasury, sweep)
		case p.SweepSubmittedAt != nil:
			sweep.Status = "submitted " + p.SweepTxHash
			b.flight(sweep, addr, treasury)
		}
	}

	// Dust (checkout_dust.go): on its address until its sweep, then the
	// treasury's; one sweep carries many rows, named once by its id.
	dust, err := db.DustDeposit.Query().
		Where(dustdeposit.Chain(string(chain)), dustdeposit.Livemode(live)).
		Order(ent.Asc(dustdeposit.FieldCreatedAt), ent.Asc(dustdeposit.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading dust: %w", err)
	}
	type dustSweepLine struct {
		addr string
		rec  BooksRecord
		done bool
	}
	var dustSweeps []*dustSweepLine
	bySweep := map[string]*dustSweepLine{}
	for _, d := range dust {
		addr := depositOf[d.DepositAddressID.String()]
		b.move("", addr, BooksRecord{Kind: "dust", ID: d.ID.String(), Amount: d.Amount, Status: "final"})
		if d.SweepID == nil || (d.SweptAt == nil && d.SweepSubmittedAt == nil) {
			continue
		}
		l := bySweep[d.SweepID.String()]
		if l == nil {
			l = &dustSweepLine{addr: addr, rec: BooksRecord{Kind: "sweep", ID: d.SweepID.String(), Status: "dust swept"}, done: d.SweptAt != nil}
			if !l.done {
				l.rec.Status = "dust sweep submitted " + d.SweepTxHash
			}
			bySweep[d.SweepID.String()] = l
			dustSweeps = append(dustSweeps, l)
		}
		l.rec.Amount += d.Amount
	}
	for _, l := range dustSweeps {
		if l.done {
			b.move(l.addr, treasury, l.rec)
		} else {
			b.flight(l.rec, l.addr, treasury)
		}
	}

	batches, err := db.SettlementBatch.Query().
		Where(settlementbatch.Livemode(live), settlementbatch.PayoutChain(string(chain)),
			settlementbatch.SettlementType(string(merchant.SettlementTypeCryptoUsdc))).
		Order(ent.Asc(settlementbatch.FieldCreatedAt), ent.Asc(settlementbatch.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading settlement batches: %w", err)
	}
	for _, sb := range batches {
		if sb.Net == 0 {
			continue
		}
		rec := BooksRecord{Kind: "payout", ID: sb.ID.String(), Amount: sb.Net, Status: string(sb.Status)}
		switch sb.Status {
		case settlementbatch.StatusCompleted:
			b.move(treasury, sb.PayoutAddress, rec)
		case settlementbatch.StatusSubmitted:
			b.flight(rec, treasury, sb.PayoutAddress)
		}
	}

	refunds, err := db.Refund.Query().
		Where(refund.Chain(string(chain)), refund.Livemode(live)).
		Order(ent.Asc(refund.FieldCreatedAt), ent.Asc(refund.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading refunds: %w", err)
	}
	for _, r := range refunds {
		rec := BooksRecord{Kind: "refund", ID: r.ID.String(), Amount: r.AmountToken, Status: string(r.Status)}
		switch r.Status {
		case refund.StatusCompleted:
			b.move(treasury, r.ToAddress, rec)
		case refund.StatusSubmitted:
			b.flight(rec, treasury, r.ToAddress)
		case refund.StatusFailed:
			b.touch(rec, treasury, r.ToAddress)
		}
	}

	if !agentMode {
		return b, nil
	}
	transfers, err := db.Transfer.Query().
		Where(transfer.Chain(string(chain))).
		Order(ent.Asc(transfer.FieldCreatedAt), ent.Asc(transfer.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading transfers: %w", err)
	}
	for _, t := range transfers {
		k, err := kindOf(t)
		if err != nil {
			return nil, err
		}
		rec := BooksRecord{Kind: "transfer", ID: t.ID.String(), Status: string(t.Status)}
		if k.internal {
			// No chain movement: its payment's collection is the record
			// that moves the wallet (above).
			continue
		}
		switch t.Status {
		case transfer.StatusCompleted:
			to := t.ToAddress
			net, fee := rec, rec
			net.Amount, fee.Amount = t.Net, t.Fee
			if k.paysDepositAddress {
				// The deposit address's record of it is the payment:
				// only the sender is moved here.
				to = ""
				b.touch(net, t.ToAddress) // explains a payment missing from the records
			}
			b.move(t.FromAddress, to, net)
			if k.fee {
				b.move(t.FromAddress, treasury, fee)
			}
		case transfer.StatusPending, transfer.StatusSubmitted:
			rec.Amount = t.Amount
			b.flight(rec, t.FromAddress, t.ToAddress)
			if k.fee {
				b.flight(rec, treasury)
			}
		case transfer.StatusFailed:
			rec.Amount = t.Amount
			b.touch(rec, t.FromAddress, t.ToAddress)
		}
	}

	cards, err := db.CardRequest.Query().
		Where(cardrequest.RefundChain(string(chain)), cardrequest.RefundAmountGT(0)).
		Order(ent.Asc(cardrequest.FieldCreatedAt), ent.Asc(cardrequest.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading card returns: %w", err)
	}
	for _, c := range cards {
		rec := BooksRecord{Kind: "card_return", ID: c.ID.String(), Amount: c.RefundAmount, Status: "returned"}
		switch {
		case c.RefundedAt != nil:
			b.move(treasury, c.RefundTo, rec)
		case c.Status == cardrequest.StatusUsed || c.Status == cardrequest.StatusExpiredUnused:
			rec.Status = "returning " + c.RefundTxHash
			b.flight(rec, treasury, c.RefundTo)
		}
	}
	return b, nil
}

// readBalances reads every holder's balance on ledger.
func (s *Service) readBalances(ctx context.Context, ledger chains.Ledger, b *chainBook) error {
	sem := make(chan struct{}, booksBalanceConcurrency)
	errs := make([]error, len(b.order))
	var wg sync.WaitGroup
	for i, a := range b.order {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			rctx, cancel := context.WithTimeout(ctx, booksBalanceTimeout)
			defer cancel()
			units, err := ledger.Balance(rctx, a.address)
			if err != nil {
				// The detail is logged; the answer names what could not
				// be read (a chain's error may quote its node).
				s.logger.WarnContext(ctx, "books: balance read", "chain", b.chain, "mode", b.mode, "address", a.address, "err", err)
				errs[i] = fmt.Errorf("%w: cannot read the balance of %s %s", ErrUnavailable, holderNoun(a.holder), a.address)
				return
			}
			a.onChain = units
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first: one is enough to say the books cannot be read
		}
	}
	return nil
}

// lines totals the accounts per holder class and explains each difference.
func (b *chainBook) lines(wallets bool, decimals int32) ChainBooks {
	out := ChainBooks{Chain: b.chain, Mode: b.mode, Decimals: decimals}
	for _, h := range BooksHolderClasses {
		if !wallets && (h == BooksAgentWallets || h == BooksHumanWallets) {
			continue
		}
		l := BooksLine{Holder: h, OnChain: new(big.Int), Records: new(big.Int)}
		for _, a := range b.order {
			if a.holder != h {
				continue
			}
			l.Addresses++
			l.OnChain.Add(l.OnChain, a.onChain)
			l.Records.Add(l.Records, &a.records)
			// A record in flight between two holders of the class (a send
			// between agents) is named once.
			for _, r := range a.inFlight {
				if !slices.ContainsFunc(l.InFlight, func(o BooksRecord) bool { return o.Kind == r.Kind && o.ID == r.ID }) {
					l.InFlight = append(l.InFlight, r)
				}
			}
			if a.onChain.Cmp(&a.records) != 0 {
				l.Differences = append(l.Differences, BooksDifference{
					Address: a.address, Owner: a.owner,
					OnChain: a.onChain, Records: new(big.Int).Set(&a.records),
					Explained: a.explain(),
				})
			}
		}
		out.Lines = append(out.Lines, l)
	}
	return out
}

// explain picks the record that explains the account's difference.
func (a *bookAccount) explain() *BooksRecord {
	if len(a.inFlight) > 0 {
		r := a.inFlight[0]
		return &r
	}
	diff := new(big.Int).Sub(a.onChain, &a.records)
	diff.Abs(diff)
	for i := len(a.touching) - 1; i >= 0; i-- {
		if diff.IsInt64() && a.touching[i].Amount == diff.Int64() {
			r := a.touching[i]
			return &r
		}
	}
	return nil
}
