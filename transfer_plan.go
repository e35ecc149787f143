package agentpay

import (
	"context"
	"fmt"
	"strings"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/transfer"
)

// sendPlan is what a send learnt before its transaction: the first
// candidate chain whose available balance covers the amount (nil when
// none), and the shortfall of each read that did not.
type sendPlan struct {
	chosen     *sendBalance
	shortfalls []string
	// noChain: no candidate had wallets of both agents and a ledger.
	noChain bool
}

// moved implements balancePlan: a plan that chose nothing has nothing to
// recheck (it is refused).
func (p *sendPlan) moved(ctx context.Context, tx *ent.Tx) (bool, error) {
	if p.chosen == nil {
		return false, nil
	}
	return p.chosen.moved(ctx, tx)
}

func (p *sendPlan) refusal(amount decimal.Decimal) error {
	if p.noChain || len(p.shortfalls) == 0 {
		return Invalid("chain", "no chain is available for this send")
	}
	return fmt.Errorf("%w: %s USDC needed, available: %s (sends in flight count as spent)",
		ErrInsufficientFunds, amount, strings.Join(p.shortfalls, ", "))
}

// sendBalance is a wallet's available balance on one chain as read before
// the send's transaction (transfer_available.go): the on-chain balance minus the
// sender's sends in flight from the wallet.
type sendBalance struct {
	available
	chain    chains.Name
	sender   holder
	from, to string // sender's wallet address, and where the send goes
}

// planSend reads, outside any transaction, the available balance of the
// sender's wallet on each candidate chain in order (the sender holding a
// wallet there, the recipient too or the withdrawal's address being of
// that chain, its ledger configured), until one covers units. Why reading
// it before the transaction that holds the wallet lock is safe:
// transfer_available.go.
//
// db reads the database: the plain client before the send's transaction,
// the transaction's under the lock.
func (s *Service) planSend(ctx context.Context, db *ent.Client, o *outgoing) (*sendPlan, error) {
	senderWallets, err := o.from.wallets(db).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("send: reading wallets: %w", err)
	}
	var recipientWallets []*ent.Wallet
	if !o.to.none() {
		if recipientWallets, err = o.to.wallets(db).All(ctx); err != nil {
			return nil, fmt.Errorf("send: reading recipient wallets: %w", err)
		}
	}
	explicit := len(o.candidates) == 1
	plan := &sendPlan{noChain: true}
	for _, c := range o.candidates {
		sw := walletOn(senderWallets, c)
		var to string
		if o.to.none() {
			to = o.external[c]
		} else if rw := walletOn(recipientWallets, c); rw != nil {
			to = rw.Address
		}
		if sw == nil || to == "" {
			if explicit && o.to.none() {
				return nil, Invalid("chain", "you hold no wallet on %s", c)
			}
			if explicit {
				return nil, Invalid("chain", "sender and recipient do not both hold a wallet on %s", c)
			}
			continue
		}
		ledger, err := s.agentLedger(c)
		if err != nil {
			if explicit {
				return nil, err
			}
			continue
		}
		plan.noChain = false
		b := &sendBalance{chain: c, sender: o.from, from: sw.Address, to: to}
		if b.available, err = s.readAvailable(ctx, db, ledger, sw.Address, walletSends{sender: o.from, chain: c, from: sw.Address}); err != nil {
			return nil, err
		}
		if b.units >= o.units {
			plan.chosen = b
			return plan, nil
		}
		plan.shortfalls = append(plan.shortfalls, fmt.Sprintf("%s USDC on %s", USDCAmount(b.units), c))
	}
	return plan, nil
}

// walletSends are the outflows of a custodial wallet (transfer_available.go): the
// transfers recorded from it, in flight while pending or submitted.
type walletSends struct {
	sender holder
	chain  chains.Name
	from   string
}

func (w walletSends) query(db *ent.Client) *ent.TransferQuery {
	return db.Transfer.Query().Where(w.sender.sent(), transfer.Chain(string(w.chain)), transfer.FromAddress(w.from))
}

func (w walletSends) recorded(ctx context.Context, db *ent.Client) (int, error) {
	n, err := w.query(db).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("send: counting sends: %w", err)
	}
	return n, nil
}

func (w walletSends) inFlight(ctx context.Context, db *ent.Client) (int64, error) {
	sent, err := sumAmounts(ctx, w.query(db).Where(transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted)))
	if err != nil {
		return 0, err
	}
	// Internal payments (settle_internal.go) leave the wallet's USDC in
	// it until their collection is included: spent all the same.
	uncollected, err := uncollectedInternal(ctx, db, w.chain, w.from)
	if err != nil {
		return 0, err
	}
	return sent + uncollected, nil
}

// sumAmounts sums the amount column of the selected transfers in SQL
// (integers: exact on both engines).
func sumAmounts(ctx context.Context, q *ent.TransferQuery) (int64, error) {
	n, err := q.Aggregate(func(sel *entsql.Selector) string {
		return "COALESCE(SUM(" + sel.C(transfer.FieldAmount) + "), 0)"
	}).Int(ctx)
	if err != nil {
		return 0, fmt.Errorf("summing transfers: %w", err)
	}
	return int64(n), nil
}
