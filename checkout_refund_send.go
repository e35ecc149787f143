package agentpay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/refund"
)

// PendingRefunds lists refunds not yet completed or failed and untouched
// for at least minAge (oldest first, at most limit), for the periodic job
// to try again.
func (s *Service) PendingRefunds(ctx context.Context, minAge time.Duration, limit int) ([]uuid.UUID, error) {
	return s.cfg.DB.Ent.Refund.Query().
		Where(
			refund.StatusIn(refund.StatusPending, refund.StatusSubmitted),
			refund.UpdatedAtLTE(s.now().UTC().Add(-minAge)),
		).
		Order(ent.Asc(refund.FieldUpdatedAt)).
		Limit(limit).
		IDs(ctx)
}

// SendRefund advances one refund's transfer as far as it can: done once
// it is completed or failed (now or before).
func (s *Service) SendRefund(ctx context.Context, id uuid.UUID) (SettleResult, error) {
	opts := s.cfg.Settlement.withDefaults()
	r, err := s.cfg.DB.Ent.Refund.Query().
		Where(refund.ID(id)).
		WithPayment().
		Only(ctx)
	if ent.IsNotFound(err) {
		return SettleResult{}, fmt.Errorf("%w: refund %s", ErrNotFound, id)
	}
	if err != nil {
		return SettleResult{}, err
	}
	if r.Status != refund.StatusPending && r.Status != refund.StatusSubmitted {
		return SettleResult{Done: true}, nil
	}
	mode := sessionModeOf(r.Livemode)
	chain := chains.Name(r.Chain)
	ledger, err := s.ledger(mode, chain)
	if err != nil {
		return SettleResult{}, fmt.Errorf("refund: %w", err)
	}
	if r.TxHash != "" {
		rc, err := ledger.Receipt(ctx, r.TxHash)
		if err != nil {
			return SettleResult{}, fmt.Errorf("refund receipt: %w", err)
		}
		if rc.State == chains.TxFailed {
			if r, err = s.refundReverted(ctx, r, rc.Err); err != nil || r.Status == refund.StatusFailed {
				return SettleResult{Done: err == nil}, err
			}
		}
	}
	rr := &refundRun{s: s, r: r}
	leg := &chainLeg{
		name:      "refund",
		ledger:    ledger,
		from:      s.cfg.Treasury.Address(chain),
		to:        r.ToAddress,
		amount:    big.NewInt(r.AmountToken),
		ref:       refundRef(r.ID),
		hash:      r.TxHash,
		mayBeSent: r.Status == refund.StatusSubmitted,
		key: func() ([]byte, error) {
			return append([]byte(nil), s.cfg.Treasury.Key(chain)...), nil
		},
		row: legRow{
			submit: func(ctx context.Context) error {
				return rr.save(ctx, func(u *ent.RefundUpdateOne) *ent.RefundUpdateOne { return u.SetStatus(refund.StatusSubmitted) })
			},
			record: func(ctx context.Context, hash string) error {
				return rr.save(ctx, func(u *ent.RefundUpdateOne) *ent.RefundUpdateOne { return u.SetTxHash(hash) })
			},
			touched: func() time.Time { return rr.r.UpdatedAt },
		},
	}
	done, waiting, err := s.driveLeg(ctx, opts, leg)
	if errors.Is(err, errRefundClosed) {
		return SettleResult{Done: true}, nil
	}
	if err != nil || !done {
		note := waiting
		if err != nil {
			note = err.Error()
		}
		if note = truncateUTF8(note, 500); note != rr.r.Error {
			_ = rr.save(context.WithoutCancel(ctx), func(u *ent.RefundUpdateOne) *ent.RefundUpdateOne { return u.SetError(note) })
		}
		return SettleResult{Waiting: waiting}, err
	}
	return SettleResult{Done: true}, s.completeRefund(ctx, rr.r, ledger)
}

// refundRef is a refund's idempotency reference (chainLeg.ref).
func refundRef(id uuid.UUID) [32]byte {
	return sha256.Sum256(append([]byte("agentpay/refund/"), id[:]...))
}

// refundRun is one run over one refund.
type refundRun struct {
	s *Service
	r *ent.Refund
}

var errRefundClosed = errors.New("refund closed by another run")

// save updates the refund row while it is still open.
func (rr *refundRun) save(ctx context.Context, set func(*ent.RefundUpdateOne) *ent.RefundUpdateOne) error {
	r, err := set(rr.s.cfg.DB.Ent.Refund.UpdateOne(rr.r).
		Where(refund.StatusIn(refund.StatusPending, refund.StatusSubmitted)).
		SetUpdatedAt(rr.s.now().UTC())).
		Save(ctx)
	if ent.IsNotFound(err) {
		return errRefundClosed
	}
	if err != nil {
		return fmt.Errorf("refund: saving: %w", err)
	}
	r.Edges = rr.r.Edges
	rr.r = r
	return nil
}

// completeRefund records the refund's inclusion and refund.completed once,
// and reports it (amount, gas) to the observer after the commit.
func (s *Service) completeRefund(ctx context.Context, r *ent.Refund, ledger chains.Ledger) error {
	completed := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.Refund.Update().
			Where(refund.ID(r.ID), refund.StatusIn(refund.StatusPending, refund.StatusSubmitted)).
			SetStatus(refund.StatusCompleted).
			SetError("").
			SetCompletedAt(s.now().UTC().Truncate(time.Microsecond)).
			Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		completed = true
		if err := s.refundEvent(ctx, tx, sqlTx, r.ID, EventRefundCompleted, nil); err != nil {
			return err
		}
		return s.tellRefundedAgent(ctx, tx, sqlTx, r)
	})
	if err != nil || !completed {
		return err
	}
	mode := sessionModeOf(r.Livemode)
	s.observer().Refunded(string(mode), r.Chain, r.AmountUsd)
	s.observeGas(ctx, mode, ledger, r.TxHash)
	return nil
}

// refundReverted counts a reverted transfer; at MaxRefundReverts the
// refund fails: refund.failed, and its amount is refundable again (and
// back in a pending settlement's net).
func (s *Service) refundReverted(ctx context.Context, r *ent.Refund, why string) (*ent.Refund, error) {
	var out *ent.Refund
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		upd := tx.Refund.Update().
			Where(refund.ID(r.ID), refund.StatusIn(refund.StatusPending, refund.StatusSubmitted), refund.TxHash(r.TxHash)).
			AddReverts(1).
			SetTxHash("").
			SetError(truncateUTF8("reverted: "+why, 500)).
			SetUpdatedAt(s.now().UTC())
		failing := r.Reverts+1 >= MaxRefundReverts
		if failing {
			upd.SetStatus(refund.StatusFailed)
		}
		n, err := upd.Save(ctx)
		if err != nil {
			return fmt.Errorf("refund: counting a revert: %w", err)
		}
		if out, err = tx.Refund.Query().Where(refund.ID(r.ID)).WithPayment().Only(ctx); err != nil {
			return err
		}
		if n == 0 || !failing {
			return nil
		}
		if _, err := tx.Payment.UpdateOneID(r.PaymentID).AddRefundedToken(-r.AmountToken).Save(ctx); err != nil {
			return fmt.Errorf("refund: releasing payment: %w", err)
		}
		p, err := tx.Payment.Get(ctx, r.PaymentID)
		if err != nil {
			return err
		}
		if err := resettle(ctx, tx, p); err != nil {
			return err
		}
		return s.refundEvent(ctx, tx, sqlTx, r.ID, EventRefundFailed, map[string]any{"failure_reason": why})
	})
	return out, err
}
