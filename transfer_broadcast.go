package agentpay

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
)

// transferLeg is one of a send's two on-chain transfers.
type transferLeg struct {
	fee    bool
	ref    [32]byte
	hash   string
	to     string
	amount int64
}

// query is what FindTransfer looks for to learn whether the leg of t landed.
func (l *transferLeg) query(t *ent.Transfer) chains.TransferQuery {
	return chains.TransferQuery{From: t.FromAddress, To: l.to, Amount: big.NewInt(l.amount), Ref: l.ref}
}

func (l *transferLeg) name() string {
	if l.fee {
		return "fee"
	}
	return "transfer"
}

// legs returns the transfer's legs: to the recipient, then, for a kind
// with a fee leg, the fee to the treasury (the minimum amount rules out a
// fee of 0).
func (s *Service) legs(t *ent.Transfer) ([]*transferLeg, error) {
	k, err := kindOf(t)
	if err != nil {
		return nil, err
	}
	net := &transferLeg{to: t.ToAddress, amount: t.Net, hash: t.TxHash}
	copy(net.ref[:], t.Ref)
	out := []*transferLeg{net}
	if k.fee {
		if t.Fee <= 0 {
			return nil, fmt.Errorf("transfer %s: a %s without its fee", t.ID, t.Kind)
		}
		to := s.cfg.Treasury.Address(chains.Name(t.Chain))
		if to == "" {
			return nil, fmt.Errorf("transfer %s: no treasury address for %s", t.ID, t.Chain)
		}
		if len(t.FeeRef) != 32 {
			return nil, fmt.Errorf("transfer %s: fee ref missing", t.ID)
		}
		fee := &transferLeg{fee: true, to: to, amount: t.Fee, hash: t.FeeTxHash}
		copy(fee.ref[:], t.FeeRef)
		out = append(out, fee)
	}
	return out, nil
}

// senderKey opens the custodial key of the wallet a transfer is sent from.
func (s *Service) senderKey(ctx context.Context, t *ent.Transfer) ([]byte, error) {
	from := holder{agentID: t.FromAgentID, userID: t.FromUserID}
	if from.none() {
		return nil, fmt.Errorf("transfer %s has no sender", t.ID)
	}
	w, err := from.wallets(s.cfg.DB.Ent).Where(
		wallet.Chain(t.Chain),
		wallet.Address(t.FromAddress),
	).Only(ctx)
	if err != nil {
		return nil, fmt.Errorf("transfer %s: sender wallet: %w", t.ID, err)
	}
	return s.walletKey(ctx, w)
}

// afterBroadcast calls Config.AfterBroadcast, when set (a test's crash
// point), after a broadcast the service has not yet recorded.
func (s *Service) afterBroadcast(what string) {
	if s.cfg.AfterBroadcast != nil {
		s.cfg.AfterBroadcast(what)
	}
}

// startTransfer broadcasts both legs of a freshly recorded transfer, records
// their hashes, and waits (at most wait) for both to be included.
func (s *Service) startTransfer(ctx context.Context, t *ent.Transfer, wait time.Duration) (*ent.Transfer, error) {
	ledger, err := s.agentLedger(chains.Name(t.Chain))
	if err != nil {
		return nil, err
	}
	legs, err := s.legs(t)
	if err != nil {
		return nil, err
	}
	key, err := s.senderKey(ctx, t)
	if err != nil {
		return nil, err
	}
	defer clear(key)

	for _, leg := range legs {
		sub, err := ledger.Transfer(ctx, chains.TransferRequest{Key: key, To: leg.to, Amount: big.NewInt(leg.amount), Ref: leg.ref})
		if sub.TxHash != "" {
			// Sent, or unknown whether the node got it: either way the hash
			// is what to follow.
			leg.hash = sub.TxHash
		}
		if err == nil || sub.TxHash != "" {
			s.afterBroadcast("send")
			continue
		}
		if errors.Is(err, chains.ErrRefused) && leg != legs[0] {
			// Nothing of this leg moved, but the payment before it went
			// out: the send cannot fail any more. It stays in flight with
			// the reason, and the reconciler sends this leg again until the
			// chain takes it.
			s.logger.WarnContext(ctx, "send: leg refused after the payment; left to the reconciler", "transfer", t.ID, "leg", leg.name(), "err", err)
			t2, rerr := s.recordHashes(context.WithoutCancel(ctx), t, legs)
			if rerr != nil {
				return nil, rerr
			}
			return s.noteLegRetry(context.WithoutCancel(ctx), t2, leg, fmt.Sprintf("%s refused by %s: %v", leg.name(), t.Chain, err))
		}
		if errors.Is(err, chains.ErrRefused) {
			// The first leg refused: nothing moved at all, the send fails.
			s.logger.WarnContext(ctx, "send refused by chain", "transfer", t.ID, "leg", leg.name(), "err", err)
			if t2, rerr := s.recordHashes(context.WithoutCancel(ctx), t, legs); rerr == nil {
				if ferr := s.failTransfer(context.WithoutCancel(ctx), t2, fmt.Sprintf("%s refused by %s: %v", leg.name(), t.Chain, err)); ferr != nil {
					return nil, ferr
				}
			}
			if errors.Is(err, chains.ErrInsufficientFunds) && !leg.fee {
				return nil, fmt.Errorf("%w: the chain refused the transfer for lack of USDC", ErrInsufficientFunds)
			}
			return nil, fmt.Errorf("%w: the %s refused the transfer", ErrUnavailable, t.Chain)
		}
		// Unknown outcome (RPC down, timeout): the row stays pending and the
		// reconciler finds out whether it was broadcast or sends it again
		// with the same ref.
		s.logger.WarnContext(ctx, "send: broadcast outcome unknown; left to the reconciler", "transfer", t.ID, "leg", leg.name(), "err", err)
		if t2, rerr := s.recordHashes(context.WithoutCancel(ctx), t, legs); rerr == nil {
			t = t2
		}
		return t, nil
	}
	t, err = s.recordHashes(context.WithoutCancel(ctx), t, legs)
	if err != nil {
		return nil, err
	}

	// Wait for both legs at once.
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	receipts := make([]chains.Receipt, len(legs))
	errs := make([]error, len(legs))
	var wg sync.WaitGroup
	for i, leg := range legs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			receipts[i], errs[i] = ledger.Wait(waitCtx, leg.hash)
		}()
	}
	wg.Wait()
	for i, leg := range legs {
		if errs[i] != nil || receipts[i].State != chains.TxIncluded {
			if errs[i] == nil && receipts[i].State == chains.TxFailed {
				// (The reconciler would look for another transaction with
				// the same ref first; a fresh send has no other.)
				reason := fmt.Sprintf("%s failed on %s: %s", leg.name(), t.Chain, receipts[i].Err)
				out, err := s.legDidNotGo(context.WithoutCancel(ctx), ledger, t, legs, leg, reason)
				if err != nil || out.Status != transfer.StatusFailed {
					return out, err
				}
				return nil, fmt.Errorf("%w: transfer %s failed on chain (%s)", ErrUnavailable, t.ID, reason)
			}
			// Not included within the wait: answered pending, finished by
			// the worker.
			return s.reload(context.WithoutCancel(ctx), t)
		}
	}
	return s.completeTransfer(context.WithoutCancel(ctx), t)
}

// recordHashes writes the legs' hashes (those known) and marks the transfer
// submitted once they are all known.
func (s *Service) recordHashes(ctx context.Context, t *ent.Transfer, legs []*transferLeg) (*ent.Transfer, error) {
	upd := s.cfg.DB.Ent.Transfer.UpdateOneID(t.ID).
		Where(transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted))
	all := true
	for _, leg := range legs {
		if leg.hash == "" {
			all = false
			continue
		}
		if leg.fee {
			upd.SetFeeTxHash(leg.hash)
		} else {
			upd.SetTxHash(leg.hash)
		}
	}
	if all {
		upd.SetStatus(transfer.StatusSubmitted)
		if t.SubmittedAt == nil {
			upd.SetSubmittedAt(s.now().UTC())
		}
	}
	out, err := upd.Save(ctx)
	if ent.IsNotFound(err) {
		// Completed or failed meanwhile (by the reconciler): keep its state.
		return s.reload(ctx, t)
	}
	if err != nil {
		return nil, fmt.Errorf("transfer %s: recording hashes: %w", t.ID, err)
	}
	return out, nil
}

func (s *Service) reload(ctx context.Context, t *ent.Transfer) (*ent.Transfer, error) {
	out, err := s.cfg.DB.Ent.Transfer.Get(ctx, t.ID)
	if err != nil {
		return nil, fmt.Errorf("transfer %s: %w", t.ID, err)
	}
	return out, nil
}

// legDidNotGo settles a leg the chain refused or reverted: while another
// leg of t has moved money (or may still), t can only be completed, so it
// stays in flight and the leg is sent again (noteLegRetry); otherwise
// nothing moved and t fails with reason.
func (s *Service) legDidNotGo(ctx context.Context, ledger chains.Ledger, t *ent.Transfer, legs []*transferLeg, leg *transferLeg, reason string) (*ent.Transfer, error) {
	if moved, err := s.otherLegMoved(ctx, ledger, t, legs, leg); err != nil || moved {
		return s.noteLegRetry(ctx, t, leg, reason)
	}
	if err := s.failTransfer(ctx, t, reason); err != nil {
		return nil, err
	}
	return s.reload(ctx, t)
}

// otherLegMoved reports whether a leg of t other than leg has moved money
// or may still: its transaction is included or pending, or one carrying its
// ref is on chain. A transfer part of which moved can no longer fail: it
// must be completed.
func (s *Service) otherLegMoved(ctx context.Context, ledger chains.Ledger, t *ent.Transfer, legs []*transferLeg, leg *transferLeg) (bool, error) {
	for _, other := range legs {
		if other == leg {
			continue
		}
		if other.hash != "" {
			r, err := ledger.Receipt(ctx, other.hash)
			if err != nil {
				return false, err
			}
			if r.State == chains.TxIncluded || r.State == chains.TxPending {
				return true, nil
			}
		}
		if _, found, err := ledger.FindTransfer(ctx, other.query(t)); err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// noteLegRetry keeps t in flight with the reason its leg did not go
// through, and forgets the leg's hash (a reverted transaction's), so that
// the reconciler sends it again with the same ref: a refused or reverted
// transfer used nothing of it (on EVM the EIP-3009 nonce is spent only by a
// transfer that succeeds).
func (s *Service) noteLegRetry(ctx context.Context, t *ent.Transfer, leg *transferLeg, reason string) (*ent.Transfer, error) {
	s.logger.WarnContext(ctx, "transfer leg to retry", "transfer", t.ID, "chain", t.Chain, "leg", leg.name(), "reason", reason)
	upd := s.cfg.DB.Ent.Transfer.UpdateOneID(t.ID).
		Where(transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted)).
		SetError(reason)
	if leg.fee {
		upd.ClearFeeTxHash()
	} else {
		upd.ClearTxHash()
	}
	leg.hash = ""
	out, err := upd.Save(ctx)
	if ent.IsNotFound(err) {
		return s.reload(ctx, t)
	}
	if err != nil {
		return nil, fmt.Errorf("transfer %s: noting %s retry: %w", t.ID, leg.name(), err)
	}
	return out, nil
}
