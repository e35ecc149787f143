package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/ent/user"
	"agentpay/internal/store"
)

// A card request's decision (cards.go has the lifecycle): the human
// reads it, approves it with a step-up (human_stepups.go) or denies it; the last
// yes reserves the amount.

// userCardRequest reads a request the user decides. One of an agent the
// user is paired with but held by others is ErrForbidden; any other, or
// an unknown id, ErrNotFound.
func (s *Service) userCardRequest(ctx context.Context, u *ent.User, id string) (*ent.CardRequest, error) {
	rid, err := parseCardRequestID(id)
	if err != nil {
		return nil, err
	}
	notFound := fmt.Errorf("%w: no card request %s", ErrNotFound, id)
	r, err := s.cfg.DB.Ent.CardRequest.Get(ctx, rid)
	if ent.IsNotFound(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading card request: %w", err)
	}
	if slices.Contains(cardDeciders(r), u.ID) {
		return r, nil
	}
	paired, err := pairedWith(ctx, s.cfg.DB.Ent, r.AgentID, u.ID)
	if err != nil {
		return nil, err
	}
	if !paired {
		return nil, notFound
	}
	if err := s.requireDecider(ctx, cardDeciders(r), u); err != nil {
		return nil, err
	}
	return r, nil
}

// cardApprovalTarget is the step-up target of approving a card request:
// one the user decides, still pending.
func (s *Service) cardApprovalTarget(ctx context.Context, u *ent.User, id string) (stepUpTarget, error) {
	r, err := s.userCardRequest(ctx, u, id)
	if err != nil {
		return stepUpTarget{}, err
	}
	if now := s.now(); r.Status != cardrequest.StatusPendingApproval || !now.Before(r.ExpiresAt) {
		return stepUpTarget{}, errCardNotPending(r, now)
	}
	name, _, err := s.AgentNameAndTier(ctx, r.AgentID)
	if err != nil {
		return stepUpTarget{}, err
	}
	return stepUpTarget{action: StepUpApproveCard, subject: r.ID.String(),
		summary: fmt.Sprintf("approve %s's card purchase of %s USD at %s", name, usd(USDCAmount(r.Amount)), r.MerchantName)}, nil
}

// castCardApproval records u's yes on the request under its row's lock,
// and answers it as it is then and whether it is complete: every decider
// still paired said yes, the human asked (who must stay paired) among
// them.
func (s *Service) castCardApproval(ctx context.Context, id uuid.UUID, u *ent.User) (*ent.CardRequest, bool, error) {
	var (
		r        *ent.CardRequest
		complete bool
	)
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		cur, err := store.ForUpdate(s.cfg.DB, tx.CardRequest.Query().Where(cardrequest.ID(id))).Only(ctx)
		if err != nil {
			return fmt.Errorf("reading card request: %w", err)
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if cur.Status != cardrequest.StatusPendingApproval || !now.Before(cur.ExpiresAt) {
			return errCardNotPending(cur, now)
		}
		var changed bool
		cur.ApprovedBy, changed = addVoter(cur.ApprovedBy, u.ID)
		asked, err := pairedWith(ctx, tx.Client(), cur.AgentID, cur.UserID)
		if err != nil {
			return err
		}
		if complete, err = s.allDecidersApproved(ctx, tx.Client(), cur.AgentID, cardDeciders(cur), cur.ApprovedBy); err != nil {
			return err
		}
		complete = complete && asked && slices.Contains(cur.ApprovedBy, cur.UserID)
		if changed {
			if err := tx.CardRequest.UpdateOneID(cur.ID).SetApprovedBy(cur.ApprovedBy).Exec(ctx); err != nil {
				return fmt.Errorf("recording approval: %w", err)
			}
		}
		r = cur
		return nil
	})
	return r, complete, err
}

// errCardNotPending: the request was decided, or lapsed, before this move.
func errCardNotPending(r *ent.CardRequest, now time.Time) error {
	if r.Status == cardrequest.StatusPendingApproval && !now.Before(r.ExpiresAt) {
		return fmt.Errorf("%w: this card request expired", ErrConflict)
	}
	return fmt.Errorf("%w: this card request is %s, no longer pending approval", ErrConflict, r.Status)
}

// DenyCardRequest is the human's no.
func (s *Service) DenyCardRequest(ctx context.Context, v *Viewer, id string) (*CardRequestView, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	r, err := s.userCardRequest(ctx, v.User, id)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusPendingApproval), cardrequest.ExpiresAtGT(now)).
			SetStatus(cardrequest.StatusDenied).SetDecidedAt(now).Save(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return errCardNotPending(r, now)
		}
		r.Status, r.DecidedAt = cardrequest.StatusDenied, &now
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardDenied, cardEventDataOf(r, "", "The human denied the purchase; nothing was reserved."))
	})
	if err != nil {
		return nil, err
	}
	return s.cardView(ctx, r)
}

// ApproveCardRequest is a decider's yes. When the human has passkeys it
// needs a fresh assertion begun for this request: ceremonyID, the
// step-up's id from BeginCardApproval or BeginStepUp, and the browser's
// answer. Until every decider still paired has said yes (the human asked
// among them) it only records this one's; the last yes reserves the
// amount (the transfer is recorded in the transaction that moves the
// request to approved, so of an approval racing another or the expiry
// exactly one reserves), waits for the transfer (at most ApprovalWait)
// and issues the card.
func (s *Service) ApproveCardRequest(ctx context.Context, v *Viewer, id, ceremonyID string, assertion []byte) (*CardRequestView, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	if !s.CardsOn() {
		return nil, ErrCardsOff
	}
	u := v.User
	target, err := s.cardApprovalTarget(ctx, u, id)
	if err != nil {
		return nil, err
	}
	if err := s.proveApproval(ctx, u, target, ceremonyID, assertion); err != nil {
		return nil, err
	}
	rid := uuid.MustParse(target.subject)
	// The pairing must still stand, and the human asked still be verified.
	r, err := s.cfg.DB.Ent.CardRequest.Get(ctx, rid)
	if err != nil {
		return nil, fmt.Errorf("reading card request: %w", err)
	}
	live, err := pairedWith(ctx, s.cfg.DB.Ent, r.AgentID, u.ID)
	if err != nil {
		return nil, err
	}
	if !live {
		return nil, fmt.Errorf("%w: you are no longer paired with this agent", ErrForbidden)
	}
	if r.UserID == u.ID && u.IdentityStatus != user.IdentityStatusVerified {
		return nil, fmt.Errorf("%w: approving a card purchase needs your identity verified", ErrForbidden)
	}
	r, complete, err := s.castCardApproval(ctx, rid, u)
	if err != nil {
		return nil, err
	}
	if !complete {
		return s.cardView(ctx, r)
	}
	a, err := s.cfg.DB.Ent.Agent.Get(ctx, r.AgentID)
	if err != nil {
		return nil, fmt.Errorf("reading agent: %w", err)
	}
	amount := USDCAmount(r.Amount)
	limits := LimitsFor(string(a.Tier))
	policy, err := s.decideSpend(ctx, a, cardSpend(r.Amount, r.MerchantName), true)
	if err != nil {
		return nil, err
	}
	if policy.Outcome == SpendRefused {
		return nil, policy.Err()
	}
	o := s.cardReservation(a, r.Amount, amount)
	o.underLock = func(ctx context.Context, tx *ent.Tx) error {
		sent, err := sentToday(ctx, tx.Transfer, agentHolder(a), s.now())
		if err != nil {
			return err
		}
		if USDCAmount(sent + r.Amount).GreaterThan(limits.Daily) {
			return fmt.Errorf("%w: %s USD exceeds the agent's daily limit of %s USD of tier %s (%s USD already sent today)",
				ErrForbidden, amount, limits.Daily, a.Tier, USDCAmount(sent))
		}
		return policy.checkDailyCap(sent, r.Amount)
	}
	o.recorded = func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusPendingApproval), cardrequest.ExpiresAtGT(now)).
			SetStatus(cardrequest.StatusApproved).SetDecidedAt(now).SetReserveTransferID(t.ID).
			SetRefundChain(t.Chain).SetRefundTo(t.FromAddress).
			Save(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			cur, err := tx.CardRequest.Get(ctx, r.ID)
			if err != nil {
				return err
			}
			return errCardNotPending(cur, now)
		}
		r.Status, r.DecidedAt, r.ReserveTransferID = cardrequest.StatusApproved, &now, &t.ID
		r.RefundChain, r.RefundTo = t.Chain, t.FromAddress
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardApproved, cardEventDataOf(r, a.Username,
			fmt.Sprintf("Approved: %s USDC reserved on %s; the card follows once the reservation is on chain.", usd(amount), t.Chain)))
	}
	t, err := s.recordTransfer(ctx, o)
	if err != nil {
		return nil, err
	}
	if _, err := s.startTransfer(ctx, t, ApprovalWait); err != nil {
		s.logger.WarnContext(ctx, "card reservation not through yet", "request", r.ID, "err", err)
	}
	if err := s.advanceCard(context.WithoutCancel(ctx), r.ID); err != nil {
		s.logger.WarnContext(ctx, "card after approval; left to the cards job", "request", r.ID, "err", err)
	}
	r, err = s.cfg.DB.Ent.CardRequest.Get(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("reading card request: %w", err)
	}
	return s.cardView(ctx, r)
}

// CardApproval is what approving a card request needs from the app
// (ApprovalStart).
type CardApproval = ApprovalStart

// BeginCardApproval starts the step-up approving a request needs
// (beginApproval): a passkey assertion bound to this request when the
// human has passkeys (their own passkeys only, user verification
// required); without passkeys it answers no ceremony.
func (s *Service) BeginCardApproval(ctx context.Context, v *Viewer, id string) (*CardApproval, error) {
	return s.beginApproval(ctx, v, s.cardApprovalTarget, id)
}
