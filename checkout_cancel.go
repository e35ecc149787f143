package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/store"
)

// CancelSession cancels a session of the caller when cancellable allows it
// (design.md section 3: from pending and detecting, before expires_at, while
// no payment has been seen); cancelling a cancelled session changes
// nothing; anything else is ErrConflict. The session row is locked for the
// decision, so a payment recorded concurrently (under the
// same lock) either comes first and refuses the cancel, or comes after and
// finds the session cancelled (a late payment).
func (s *Service) CancelSession(ctx context.Context, auth *MerchantAuth, externalID string) (*ent.CheckoutSession, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, err
	}
	var out *ent.CheckoutSession
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		sess, err := store.ForUpdate(s.cfg.DB, tx.CheckoutSession.Query().Where(ownSession(auth, externalID))).Only(ctx)
		if ent.IsNotFound(err) {
			return errNoSuchSession
		}
		if err != nil {
			return fmt.Errorf("reading session: %w", err)
		}
		already, err := cancellable(sess, s.now(), func() (bool, error) { return hasLivePayment(ctx, tx.Payment, sess.ID) })
		if err != nil {
			return err
		}
		if already {
			out = sess
			return nil
		}
		out, err = tx.CheckoutSession.UpdateOne(sess).
			SetStatus(checkoutsession.StatusCancelled).
			SetCancelledAt(s.now().UTC().Truncate(time.Microsecond)).
			Save(ctx)
		if err != nil {
			return fmt.Errorf("cancelling session: %w", err)
		}
		return s.publishSessionStatus(ctx, sqlTx, out.ExternalID, string(checkoutsession.StatusCancelled))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ExpireSessions expires the sessions past expires_at that are still
// pending or detecting and whose seen payments do not cover the amount
// (design.md section 3): with nothing paid it sends session.expired; with
// an underpayment payment.failed (reason underpaid, amounts paid and
// expected) and then session.expired. A session whose seen payments cover
// the amount is left waiting for its confirmations. Each session is decided
// in its own transaction under its row lock. It answers how many sessions
// it expired.
func (s *Service) ExpireSessions(ctx context.Context) (int, error) {
	now := s.now().UTC()
	ids, err := s.cfg.DB.Ent.CheckoutSession.Query().
		Where(expiryDueAt(now)).
		Order(ent.Asc(checkoutsession.FieldExpiresAt)).
		Limit(1000).
		IDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing expired sessions: %w", err)
	}
	n := 0
	for _, id := range ids {
		expired, err := s.expireSession(ctx, id)
		if err != nil {
			return n, err
		}
		if expired {
			n++
		}
	}
	return n, nil
}

func (s *Service) expireSession(ctx context.Context, id uuid.UUID) (bool, error) {
	expired := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		sess, err := store.ForUpdate(s.cfg.DB, tx.CheckoutSession.Query().Where(checkoutsession.ID(id))).Only(ctx)
		if err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if !expiryDue(sess, now) {
			return nil
		}
		decimals := int32(USDCDecimals)
		if sess.Chain != "" {
			if l, err := s.ledger(sessionMode(sess), chains.Name(sess.Chain)); err == nil {
				decimals = l.Decimals()
			}
		}
		seen, err := sessionPaid(ctx, tx, sess.ID, false)
		if err != nil {
			return err
		}
		due, err := ToBaseUnits("amount_usd", sess.AmountUsd, decimals)
		if err != nil {
			return err
		}
		if covers(seen, due) {
			return nil // paid in time: it waits for its confirmations
		}
		if _, err := tx.CheckoutSession.UpdateOne(sess).
			SetStatus(checkoutsession.StatusExpired).
			SetExpiredAt(now).
			Save(ctx); err != nil {
			return err
		}
		if err := s.publishSessionStatus(ctx, sqlTx, sess.ExternalID, string(checkoutsession.StatusExpired)); err != nil {
			return err
		}
		base := EventData{SessionExternalID: sess.ExternalID, Chain: sess.Chain, Token: sess.Token, Metadata: sess.Metadata}
		if seen.Sign() > 0 {
			paid := FromBaseUnits(seen, decimals)
			data := base
			data.AmountUSD = &paid
			data.Extra = map[string]any{
				"reason":              FailReasonUnderpaid,
				"amount_paid_usd":     paid,
				"amount_expected_usd": sess.AmountUsd,
				"amount_due_usd":      sess.AmountUsd.Sub(paid),
			}
			if err := recordSessionEvent(ctx, s, tx, sqlTx, sess, EventPaymentFailed, data); err != nil {
				return err
			}
		}
		expiredData := base
		amount := sess.AmountUsd
		expiredData.AmountUSD = &amount
		if err := recordSessionEvent(ctx, s, tx, sqlTx, sess, EventSessionExpired, expiredData); err != nil {
			return err
		}
		expired = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("expiring session %s: %w", id, err)
	}
	return expired, nil
}
