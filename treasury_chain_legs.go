package agentpay

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"agentpay/chains"
)

// chainLeg is one on-chain transfer the service makes on its own account
// (a settlement's sweep or payout, a refund), driven to inclusion by
// driveLeg across as many runs as it takes.
//
// Nothing is sent twice, whatever crashes: every leg has a fixed 32-byte
// ref. On EVM it is the EIP-3009 nonce, so however often a leg is relayed
// it moves funds once; on Solana a leg without a recorded hash that may
// have been broadcast (its row's updated_at is written before every
// broadcast) is looked up by its reference (FindTransfer) and sent again
// only after any earlier blockhash has expired.
type chainLeg struct {
	name   string
	ledger chains.Ledger
	from   string
	to     string
	amount *big.Int
	ref    [32]byte
	// hash is the recorded transaction hash, "" if none yet.
	hash string
	// mayBeSent: a broadcast may have happened without its hash recorded.
	mayBeSent bool
	key       func() ([]byte, error)
	row       legRow
}

// legRow is where a leg's progress is written: the row that owns it.
type legRow struct {
	// submit marks the row submitted, with whatever must be fixed before
	// the first broadcast, and touches its updated_at.
	submit func(ctx context.Context) error
	// record writes the leg's transaction hash.
	record func(ctx context.Context, hash string) error
	// touched is the row's updated_at as last read or written.
	touched func() time.Time
}

// driveLeg drives one leg to inclusion: answers done once it is included,
// or what it waits for.
func (s *Service) driveLeg(ctx context.Context, opts SettlementOptions, l *chainLeg) (bool, string, error) {
	mayLand := l.mayBeSent
	if l.hash != "" {
		r, err := l.ledger.Receipt(ctx, l.hash)
		if err != nil {
			return false, "", fmt.Errorf("%s receipt: %w", l.name, err)
		}
		switch r.State {
		case chains.TxIncluded:
			return true, "", nil
		case chains.TxPending:
			return waitLeg(ctx, opts, l)
		case chains.TxFailed:
			mayLand = false // it moved nothing and never will
		default:
			mayLand = true // unknown: dropped, or not yet seen
		}
		// As if never sent, but another relay of the same ref may have
		// landed.
	}
	h, found, err := l.ledger.FindTransfer(ctx, chains.TransferQuery{From: l.from, To: l.to, Amount: l.amount, Ref: l.ref})
	if err != nil {
		return false, "", fmt.Errorf("%s lookup: %w", l.name, err)
	}
	if found {
		if h != l.hash {
			l.hash = h
			if err := l.row.record(ctx, h); err != nil {
				return false, "", err
			}
		}
		return waitLeg(ctx, opts, l)
	}
	if mayLand && l.ledger.Chain() == chains.Solana &&
		s.now().Sub(l.row.touched()) < opts.SolanaResendAfter {
		return false, fmt.Sprintf("%s: an earlier broadcast may still land (resend after %s)", l.name, opts.SolanaResendAfter), nil
	}

	// Written before broadcasting: status submitted, the leg's fixed
	// destination, and updated_at, which the Solana rule above counts from.
	if err := l.row.submit(ctx); err != nil {
		return false, "", err
	}
	key, err := l.key()
	if err != nil {
		return false, "", err
	}
	defer clear(key)
	sub, err := l.ledger.Transfer(ctx, chains.TransferRequest{Key: key, To: l.to, Amount: l.amount, Ref: l.ref})
	switch {
	case sub.TxHash != "":
		l.hash = sub.TxHash
		if err := l.row.record(context.WithoutCancel(ctx), sub.TxHash); err != nil {
			return false, "", err
		}
		return waitLeg(ctx, opts, l)
	case errors.Is(err, chains.ErrAlreadyUsed):
		return false, l.name + ": landed meanwhile, found on the next run", nil
	case err != nil && errors.Is(err, chains.ErrInsufficientFunds):
		return false, fmt.Sprintf("%s: %s short of USDC on %s", l.name, l.from, l.ledger.Chain()), nil
	case err != nil:
		return false, "", fmt.Errorf("%s: %w", l.name, err)
	}
	return false, "", fmt.Errorf("%s: no transaction hash", l.name)
}

// waitLeg waits (bounded by opts.Wait) for a broadcast leg's inclusion.
func waitLeg(ctx context.Context, opts SettlementOptions, l *chainLeg) (bool, string, error) {
	wctx, cancel := context.WithTimeout(ctx, opts.Wait)
	defer cancel()
	r, err := l.ledger.Wait(wctx, l.hash)
	switch {
	case err != nil && wctx.Err() != nil && ctx.Err() == nil:
		return false, l.name + ": waiting for inclusion of " + l.hash, nil
	case err != nil:
		return false, "", fmt.Errorf("%s: waiting for %s: %w", l.name, l.hash, err)
	case r.State == chains.TxIncluded:
		return true, "", nil
	case r.State == chains.TxFailed:
		// Nothing moved; the next run sends it again.
		return false, fmt.Sprintf("%s: %s failed on %s: %s", l.name, l.hash, l.ledger.Chain(), r.Err), nil
	}
	return false, l.name + ": waiting for inclusion of " + l.hash, nil
}
