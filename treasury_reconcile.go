package agentpay

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/transfer"
)

// reconcileOptions tunes ReconcileTransfers; the zero value means the
// defaults.
type reconcileOptions struct {
	// MinAge: only transfers not updated for this long are looked at, so a
	// send still being broadcast by its request is left alone. Default 15s;
	// negative means 0.
	MinAge time.Duration
	// SolanaResendAfter is how long after a Solana leg may last have been
	// broadcast (the row's updated_at, written before every broadcast) it
	// is sent again when no transaction carrying its reference landed. A
	// transaction can land until its blockhash expires, 150 blocks after
	// it was fetched (about a minute at 400 ms slots); the default, 3
	// minutes, leaves room for skipped slots and clock skew. EVM legs need
	// no wait: the EIP-3009 nonce lets the same authorization move funds
	// once, however often it is relayed. Negative means 0.
	SolanaResendAfter time.Duration
	// Limit bounds the transfers looked at in one run (oldest first).
	// Default 100.
	Limit int
}

const (
	defaultReconcileMinAge   = 15 * time.Second
	defaultSolanaResendAfter = 3 * time.Minute
	defaultReconcileLimit    = 100
)

func (o reconcileOptions) withDefaults() reconcileOptions {
	switch {
	case o.MinAge == 0:
		o.MinAge = defaultReconcileMinAge
	case o.MinAge < 0:
		o.MinAge = 0
	}
	switch {
	case o.SolanaResendAfter == 0:
		o.SolanaResendAfter = defaultSolanaResendAfter
	case o.SolanaResendAfter < 0:
		o.SolanaResendAfter = 0
	}
	if o.Limit <= 0 {
		o.Limit = defaultReconcileLimit
	}
	return o
}

// ReconcileStats counts what one reconciliation run did.
type ReconcileStats struct {
	Checked, Completed, Failed, Waiting int
}

// ReconcileTransfers resumes sends left in flight (pending or submitted),
// whether a request timed out waiting for inclusion or the process died
// between recording a transfer and broadcasting it, or between broadcasting
// and recording the hash. The worker runs it periodically.
func (s *Service) ReconcileTransfers(ctx context.Context) (ReconcileStats, error) {
	return s.reconcileTransfersWith(ctx, reconcileOptions{})
}

// reconcileTransfersWith is ReconcileTransfers with explicit options.
//
// For each leg of each transfer (to the recipient, fee to the treasury):
//   - no hash recorded: FindTransfer(ref) asks the chain whether it was
//     broadcast and landed; if so its hash is recorded, otherwise the leg is
//     sent again with the same ref (EVM at once: the EIP-3009 nonce makes
//     it idempotent; Solana only once any earlier blockhash has expired);
//   - a hash recorded: its receipt decides. Included: done. Failed: on EVM
//     another relay of the same ref may have succeeded (FindTransfer),
//     otherwise the transfer fails with the reason. Unknown (dropped): as
//     for no hash.
//   - a leg failed or refused while the other leg moved money (the
//     recipient was paid, the fee was not): the transfer cannot fail; it
//     keeps the reason in error and the leg is sent again on the next run.
//
// The legs are those of the transfer's kind (transfer_kinds.go: a fee leg
// or not). Once both legs are included the transfer completes (counters,
// trust, its kind's completed hook); a leg that cannot go while no other
// moved fails it (its kind's failed hook).
// Errors of one transfer are logged and do not stop the others.
func (s *Service) reconcileTransfersWith(ctx context.Context, opts reconcileOptions) (ReconcileStats, error) {
	opts = opts.withDefaults()
	var st ReconcileStats
	list, err := s.cfg.DB.Ent.Transfer.Query().
		Where(
			transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted),
			transfer.UpdatedAtLTE(s.now().UTC().Add(-opts.MinAge)),
		).
		Order(ent.Asc(transfer.FieldUpdatedAt)).
		Limit(opts.Limit).
		All(ctx)
	if err != nil {
		return st, fmt.Errorf("reconcile: listing transfers: %w", err)
	}
	var errs []error
	for _, t := range list {
		st.Checked++
		out, err := s.reconcileTransfer(ctx, t, opts)
		if err != nil {
			s.logger.WarnContext(ctx, "reconcile transfer", "transfer", t.ID, "err", err)
			errs = append(errs, err)
			continue
		}
		switch out.Status {
		case transfer.StatusCompleted:
			st.Completed++
		case transfer.StatusFailed:
			st.Failed++
		default:
			st.Waiting++
		}
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	if len(errs) == len(list) && len(errs) > 0 {
		// Every one failed: likely the chain or the database, worth a retry.
		return st, errors.Join(errs...)
	}
	return st, nil
}

func (s *Service) reconcileTransfer(ctx context.Context, t *ent.Transfer, opts reconcileOptions) (*ent.Transfer, error) {
	chain := chains.Name(t.Chain)
	ledger, err := s.agentLedger(chain)
	if err != nil {
		return nil, err
	}
	legs, err := s.legs(t)
	if err != nil {
		return nil, err
	}
	// Judged once, from the row as found: a leg this run sends touches
	// updated_at, which must not hold back the other leg of the same run.
	canResend := chain != chains.Solana || s.now().Sub(t.UpdatedAt) >= opts.SolanaResendAfter
	resendable := func() bool { return canResend }
	var key []byte
	defer func() { clear(key) }()

	included := 0
	for _, leg := range legs {
		if leg.hash != "" {
			r, err := ledger.Receipt(ctx, leg.hash)
			if err != nil {
				return nil, err
			}
			switch r.State {
			case chains.TxIncluded:
				included++
				continue
			case chains.TxPending:
				continue
			case chains.TxFailed:
				// Another transaction with the same ref may have done the
				// job (EVM: a second relay of the authorization).
				if h, found, err := ledger.FindTransfer(ctx, leg.query(t)); err == nil && found && h != leg.hash {
					leg.hash = h
					if t, err = s.recordHashes(ctx, t, legs); err != nil {
						return nil, err
					}
					continue // its receipt is read on the next run
				}
				return s.legDidNotGo(ctx, ledger, t, legs, leg, fmt.Sprintf("%s failed on %s: %s", leg.name(), t.Chain, r.Err))
			}
			// Unknown: dropped, never sent, or sent by a process that no
			// longer remembers it. Handled as a leg without a hash.
		}

		h, found, err := ledger.FindTransfer(ctx, leg.query(t))
		if err != nil {
			return nil, err
		}
		if found {
			if h != leg.hash {
				leg.hash = h
				if t, err = s.recordHashes(ctx, t, legs); err != nil {
					return nil, err
				}
			}
			if r, err := ledger.Receipt(ctx, h); err == nil && r.State == chains.TxIncluded {
				included++
			}
			continue
		}
		if !resendable() {
			continue
		}
		// Write updated_at before broadcasting: it is when this leg may
		// last have been sent, what the next run's Solana wait counts from.
		t, err = s.cfg.DB.Ent.Transfer.UpdateOneID(t.ID).
			Where(transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted)).
			SetUpdatedAt(s.now().UTC()).
			Save(ctx)
		if err != nil {
			if ent.IsNotFound(err) {
				return s.cfg.DB.Ent.Transfer.Get(ctx, t.ID)
			}
			return nil, err
		}
		if key == nil {
			if key, err = s.senderKey(ctx, t); err != nil {
				return nil, err
			}
		}
		sub, err := ledger.Transfer(ctx, chains.TransferRequest{Key: key, To: leg.to, Amount: big.NewInt(leg.amount), Ref: leg.ref})
		switch {
		case sub.TxHash != "":
			leg.hash = sub.TxHash
			if t, err = s.recordHashes(ctx, t, legs); err != nil {
				return nil, err
			}
		case errors.Is(err, chains.ErrAlreadyUsed):
			// Landed between FindTransfer and now: the next run finds it.
		case err != nil && errors.Is(err, chains.ErrRefused):
			return s.legDidNotGo(ctx, ledger, t, legs, leg, fmt.Sprintf("%s refused by %s on retry: %v", leg.name(), t.Chain, err))
		case err != nil:
			return nil, err
		}
	}
	if included == len(legs) {
		return s.completeTransfer(ctx, t)
	}
	return t, nil
}
