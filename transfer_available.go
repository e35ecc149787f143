package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"agentpay/chains"
	"agentpay/ent"
)

// The no-overdraft rule: what an address may still send is its balance on
// chain less what the service has recorded as sent from it and not final
// yet (in flight), and one more outflow is recorded only under the
// holder's lock, once that available balance covers it. Two holders use
// it: a custodial wallet's sends (transfer_agent_sends.go: the wallet's row lock), and
// a payer's authorizations the treasury relays (checkout_relays.go: a lock per
// payer and chain), so many sends, or many authorizations of one payer at
// once, can never all pass a balance that covers one of them.
//
// The balance is read from the chain before the transaction: an RPC call,
// however bounded, must not hold the lock (nor, on SQLite, every writer).
// Why that is safe is the order of the reads (readAvailable): the count of
// every outflow ever recorded from the address first, then the sum of
// those in flight, then the balance. An outflow is recorded only under the
// lock, so finding the count unchanged under it (available.moved) proves
// none was recorded since the count was read, and every outflow that may
// be missing from the balance read was subtracted: one that completed in
// between is subtracted although its debit is already on chain, which errs
// on the side of refusing. When outflows keep being recorded between the
// read and the lock (maxSendAttempts reads in a row), the last read is
// taken under the lock (recordWithinBalance).

// outflows are what one holder sends from one address on one chain, as
// the service records them before broadcasting.
type outflows interface {
	// recorded counts every outflow ever recorded from the address.
	recorded(ctx context.Context, db *ent.Client) (int, error)
	// inFlight sums, in base units, those that are not final yet.
	inFlight(ctx context.Context, db *ent.Client) (int64, error)
}

// available is an address's balance on one chain less its outflows in
// flight, as read before the transaction that records one more.
type available struct {
	outflows outflows
	// recordedN is outflows.recorded when it was read.
	recordedN int
	units     int64
}

// readAvailable reads address's available balance on ledger's chain: the
// count of its outflows, then the sum of those in flight, then the
// balance, in that order (see the note above). db reads the database: the
// plain client before the transaction, the transaction's under the lock.
func (s *Service) readAvailable(ctx context.Context, db *ent.Client, ledger chains.Ledger, address string, of outflows) (available, error) {
	n, err := of.recorded(ctx, db)
	if err != nil {
		return available{}, err
	}
	inFlight, err := of.inFlight(ctx, db)
	if err != nil {
		return available{}, err
	}
	bal, err := ledger.Balance(ctx, address)
	if err != nil {
		s.logger.WarnContext(ctx, "balance read", "chain", ledger.Chain(), "err", err)
		return available{}, fmt.Errorf("%w: cannot read the balance on %s", ErrUnavailable, ledger.Chain())
	}
	if !bal.IsInt64() {
		return available{}, fmt.Errorf("balance %s on %s out of range", bal, ledger.Chain())
	}
	return available{outflows: of, recordedN: n, units: bal.Int64() - inFlight}, nil
}

// moved reports, under the holder's lock, whether an outflow was recorded
// from the address since a was read: a no longer holds.
func (a available) moved(ctx context.Context, tx *ent.Tx) (bool, error) {
	n, err := a.outflows.recorded(ctx, tx.Client())
	if err != nil {
		return false, err
	}
	return n != a.recordedN, nil
}

// maxSendAttempts is how often the available balance is read before the
// transaction; when another outflow was recorded after each of those
// reads, the last read is taken under the lock.
const maxSendAttempts = 3

// errBalanceMoved: an outflow was recorded from the address after its
// balance was read; the read must be taken again.
var errBalanceMoved = errors.New("the address's outflows changed since its balance was read")

// balancePlan is what a holder read before its transaction: whether it
// still holds under the lock.
type balancePlan interface {
	moved(ctx context.Context, tx *ent.Tx) (bool, error)
}

// recordWithinBalance records one more outflow under the no-overdraft
// rule: plan reads the available balance before the transaction; the
// transaction takes the holder's lock (lock), and when an outflow was
// recorded since plan read, the read is taken again (after
// maxSendAttempts-1 such retries, under the lock); record then decides on
// the plan (refusing when it does not cover the outflow) and writes it,
// in that transaction.
func recordWithinBalance[P balancePlan](ctx context.Context, s *Service,
	plan func(ctx context.Context, db *ent.Client) (P, error),
	lock func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error,
	record func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, p P) error,
) error {
	for attempt := 1; ; attempt++ {
		p, err := plan(ctx, s.cfg.DB.Ent)
		if err != nil {
			return err
		}
		err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
			// Only tx is used in here: on SQLite the pool's one connection
			// is this transaction's.
			if err := lock(ctx, tx, sqlTx); err != nil {
				return err
			}
			moved, err := p.moved(ctx, tx)
			if err != nil {
				return err
			}
			if moved && attempt < maxSendAttempts {
				return errBalanceMoved
			}
			if moved {
				// Outflows keep being recorded between our read and our
				// lock: only the lock can stop them, so this time the
				// balance is read under it (the RPC deadline bounds the
				// wait).
				if p, err = plan(ctx, tx.Client()); err != nil {
					return err
				}
			}
			return record(ctx, tx, sqlTx, p)
		})
		if errors.Is(err, errBalanceMoved) {
			continue
		}
		return err
	}
}
