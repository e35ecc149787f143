package agentpay

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"agentpay/chains"
)

// The books (docs/money.md#books): what the chains hold next to what the
// records say they should hold, per chain and mode, in USDC base units.
//
// Holders are the addresses whose USDC only the service moves (it holds
// their keys): the treasury, every deposit address, and the custodial
// wallets of agents and of human users (in the agents' mode). Each one's
// balance is read from its chain, and each one's recorded balance is
// summed from the records of every transfer that moved it:
//
//   - deposit address: the payments recorded on it (not dropped by a
//     reorg), less their sweeps (swept_at set), and its dust (checkout_dust.go),
//     less the dust sweeps;
//   - treasury: the sweeps (of payments and of dust), the completed transfers paying it (sends' and
//     withdrawals' fee legs, card reservations), less the crypto payouts
//     of completed settlement batches, the completed refunds and the card
//     returns;
//   - custodial wallet: the completed transfers to it (their net) and the
//     card returns to it, less the completed transfers from it (their
//     amount: net and fee). A transfer's kind (transfer_kinds.go) says
//     whether it has a fee leg and whether it pays a deposit address,
//     whose record of it is the payment (an agent's checkout payment: the
//     transfer moves the sender only);
//   - the treasury and custodial wallets, also: their fundings
//     (treasury_fundings.go), USDC paid to them from outside that the service saw
//     (the deposit scan watches them too) or sent (the devnet faucet, the
//     treasury's starting liquidity), or an operator recorded. A deposit
//     address counts none: what reaches it is a payment, even from the
//     faucet (whose funding row for it is only named, never counted).
//
// Nothing else may move a holder's USDC, so the two must be equal to the
// base unit. USDC a holder received from outside without a funding row (a
// payment to a deposit address no longer watched, an inbound transfer the
// scan has not seen final yet) is a difference: the books do not guess an
// opening balance, which would make them balance whatever the chain holds.
//
// Transactions in flight are not counted: a record counts once it is final
// (a completed transfer, refund, payout or card return; a sweep with
// swept_at). While one is in flight, the chain may already hold what the
// records do not say yet; a difference on a holder an in-flight record
// touches is explained by that record, named, and not balanced away. A
// payment still detected or confirming is counted (the chain holds it) and
// named the same way, since a reorg may still drop it.
//
// A difference is explained by, in this order: the first in-flight record
// touching the holder; else the latest record naming it whose amount is
// exactly the difference (one that moved it, or one whose state says it
// moved nothing: a failed refund the chain did pay); else by no record
// (USDC moved outside the records). The books never guess further.
//
// The books read every record and one balance per holder: an operator's
// check, not a request path.

// BooksHolder is a class of addresses the books account for.
type BooksHolder string

// The holder classes, in the order a chain's lines list them.
const (
	BooksTreasury         BooksHolder = "treasury"
	BooksDepositAddresses BooksHolder = "deposit_addresses"
	BooksAgentWallets     BooksHolder = "agent_wallets"
	BooksHumanWallets     BooksHolder = "human_wallets"
)

// BooksHolderClasses are the holder classes in the order a chain's lines
// list them.
var BooksHolderClasses = []BooksHolder{BooksTreasury, BooksDepositAddresses, BooksAgentWallets, BooksHumanWallets}

// booksBalanceConcurrency bounds the balance reads in flight per chain.
const booksBalanceConcurrency = 8

// booksBalanceTimeout bounds one balance read.
const booksBalanceTimeout = 20 * time.Second

// Books is what the chains hold next to what the records say, for every
// configured chain and mode.
type Books struct {
	Chains []ChainBooks
}

// ChainBooks are the books of one chain in one mode.
type ChainBooks struct {
	Chain    chains.Name
	Mode     Mode
	Decimals int32
	// Lines are one per holder class, in BooksHolderClasses' order (wallets
	// only in the agents' mode).
	Lines []BooksLine
}

// BooksLine is one holder class on one chain and mode: the sum of what its
// addresses hold on chain and of what the records say they hold, in base
// units.
type BooksLine struct {
	Holder    BooksHolder
	Addresses int
	OnChain   *big.Int
	Records   *big.Int
	// Differences are the addresses whose balance differs from their
	// records, each with the record that explains it.
	Differences []BooksDifference
	// InFlight are the records in flight touching the class's addresses.
	InFlight []BooksRecord
}

// Difference is OnChain - Records.
func (l BooksLine) Difference() *big.Int { return new(big.Int).Sub(l.OnChain, l.Records) }

// BooksDifference is one address whose balance differs from its records.
type BooksDifference struct {
	Address string
	// Owner names who the address is for ("agent <id>", "session <id>"),
	// "" for the treasury.
	Owner   string
	OnChain *big.Int
	Records *big.Int
	// Explained is the record that explains it; nil when none does.
	Explained *BooksRecord
}

// BooksRecord is one record that moved (or is moving) a holder's USDC.
type BooksRecord struct {
	// Kind: payment, dust, sweep (of a payment, or of an address's dust:
	// its sweep id), transfer, payout, refund, card_return, funding.
	Kind string
	ID   string
	// Amount is what it moves, in base units.
	Amount int64
	// Status is the record's state ("completed", "submitted"...).
	Status   string
	InFlight bool
}

func (r BooksRecord) String() string {
	s := fmt.Sprintf("%s %s (%d, %s)", r.Kind, r.ID, r.Amount, r.Status)
	if r.InFlight {
		s = "in flight: " + s
	}
	return s
}

// Balanced reports whether every line of every chain is equal.
func (b *Books) Balanced() bool { return b.Err() == nil }

// Err is nil when every holder on every chain and mode holds exactly what
// its records say; otherwise it names the first difference and the record
// that explains it.
func (b *Books) Err() error {
	for _, c := range b.Chains {
		for _, l := range c.Lines {
			if len(l.Differences) == 0 {
				continue
			}
			d := l.Differences[0]
			diff := new(big.Int).Sub(d.OnChain, d.Records)
			more := "more"
			if diff.Sign() < 0 {
				more = "less"
			}
			why := "no record explains it: USDC moved outside the service's records"
			if d.Explained != nil {
				why = d.Explained.String()
			}
			who := holderNoun(l.Holder) + " " + d.Address
			if d.Owner != "" {
				who += " (" + d.Owner + ")"
			}
			return fmt.Errorf("books: %s %s: %s holds %s %s than recorded (chain %s, records %s): %s",
				c.Chain, c.Mode, who, new(big.Int).Abs(diff), more, d.OnChain, d.Records, why)
		}
	}
	return nil
}

func holderNoun(h BooksHolder) string {
	switch h {
	case BooksTreasury:
		return "treasury"
	case BooksDepositAddresses:
		return "deposit address"
	case BooksAgentWallets:
		return "agent wallet"
	case BooksHumanWallets:
		return "human wallet"
	}
	return string(h)
}

// Books reads every holder's balance on every configured chain and mode
// and sets it next to what the records say it holds.
func (s *Service) Books(ctx context.Context) (*Books, error) {
	out := &Books{}
	for _, mode := range []Mode{ModeLive, ModeTest} {
		nets := s.networks(mode)
		for _, chain := range chains.All {
			n, ok := nets[chain]
			if !ok {
				continue
			}
			book, err := s.chainBook(ctx, chain, mode)
			if err != nil {
				return nil, fmt.Errorf("books: %s %s: %w", chain, mode, err)
			}
			if err := s.readBalances(ctx, n.Ledger, book); err != nil {
				return nil, fmt.Errorf("books: %s %s: %w", chain, mode, err)
			}
			out.Chains = append(out.Chains, book.lines(mode == s.cfg.AgentMode, n.Ledger.Decimals()))
		}
	}
	return out, nil
}
