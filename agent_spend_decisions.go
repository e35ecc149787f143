package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/pairing"
	"agentpay/ent/spendapproval"
	"agentpay/internal/store"
)

// A held operation's decision (agent_spend_approvals.go has the states and who
// decides): a decider denies, or approves with a step-up (human_stepups.go); the
// last yes runs the operation as the agent asked it, in the transaction
// that records its transfer.

// userApproval reads a held operation of an agent the user is paired with.
func (s *Service) userApproval(ctx context.Context, u *ent.User, id string) (*ent.SpendApproval, error) {
	rid, err := parseApprovalID(id)
	if err != nil {
		return nil, err
	}
	r, err := s.cfg.DB.Ent.SpendApproval.Get(ctx, rid)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: no approval %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading approval: %w", err)
	}
	paired, err := pairedWith(ctx, s.cfg.DB.Ent, r.AgentID, u.ID)
	if err != nil {
		return nil, err
	}
	if !paired {
		return nil, fmt.Errorf("%w: no approval %s", ErrNotFound, id)
	}
	return r, nil
}

func errApprovalState(r *ent.SpendApproval, now time.Time) error {
	if r.Status == spendapproval.StatusAwaitingApproval && !now.Before(r.ExpiresAt) {
		return fmt.Errorf("%w: this operation's approval expired", ErrConflict)
	}
	return fmt.Errorf("%w: this operation is %s, no longer awaiting approval", ErrConflict, r.Status)
}

// DenySpendApproval is a paired human's no.
func (s *Service) DenySpendApproval(ctx context.Context, v *Viewer, id string) (*SpendApprovalView, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	r, err := s.userApproval(ctx, v.User, id)
	if err != nil {
		return nil, err
	}
	if err := s.requireDecider(ctx, r.Deciders, v.User); err != nil {
		return nil, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		return s.moveApproval(ctx, tx, sqlTx, r, spendapproval.StatusDenied, EventApprovalDenied, now, func(u *ent.SpendApprovalUpdate) {
			u.SetDecidedAt(now).SetDecidedBy(v.User.ID)
		})
	})
	if errors.Is(err, errApprovalNotPending) {
		cur, rerr := s.cfg.DB.Ent.SpendApproval.Get(ctx, r.ID)
		if rerr == nil {
			return nil, errApprovalState(cur, now)
		}
	}
	if err != nil {
		return nil, err
	}
	return s.approvalView(ctx, r)
}

// failApproval records that the approved operation was refused when it
// ran (reason: the refusal's text).
func (s *Service) failApproval(ctx context.Context, r *ent.SpendApproval, userID uuid.UUID, reason string) error {
	now := s.now().UTC().Truncate(time.Microsecond)
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		return s.moveApproval(ctx, tx, sqlTx, r, spendapproval.StatusFailed, EventApprovalFailed, now, func(u *ent.SpendApprovalUpdate) {
			u.SetDecidedAt(now).SetDecidedBy(userID).SetError(truncate(reason, 500))
		})
	})
}

// SpendApprovalStart is what approving a held operation needs from the
// app (ApprovalStart).
type SpendApprovalStart = ApprovalStart

// requireDecider refuses a paired human who is not one of deciders.
func (s *Service) requireDecider(ctx context.Context, deciders []uuid.UUID, u *ent.User) error {
	if slices.Contains(deciders, u.ID) {
		return nil
	}
	names, err := s.UsernamesOf(ctx, deciders)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		names = []string{"another human"}
	}
	return errNotDecider(names)
}

// spendApprovalTarget is the step-up target of approving a held operation:
// one of the user's to decide (a decider, ErrForbidden otherwise), still
// awaiting approval.
func (s *Service) spendApprovalTarget(ctx context.Context, u *ent.User, id string) (stepUpTarget, error) {
	r, err := s.userApproval(ctx, u, id)
	if err != nil {
		return stepUpTarget{}, err
	}
	if err := s.requireDecider(ctx, r.Deciders, u); err != nil {
		return stepUpTarget{}, err
	}
	if now := s.now(); r.Status != spendapproval.StatusAwaitingApproval || !now.Before(r.ExpiresAt) {
		return stepUpTarget{}, errApprovalState(r, now)
	}
	name, _, err := s.AgentNameAndTier(ctx, r.AgentID)
	if err != nil {
		return stepUpTarget{}, err
	}
	return stepUpTarget{action: StepUpApproveSpend, subject: r.ID.String(),
		summary: fmt.Sprintf("approve %s's %s of %s USDC to %s", name, strings.ReplaceAll(string(r.Operation), "_", " "),
			usd(USDCAmount(r.Amount)), r.Recipient)}, nil
}

// BeginSpendApproval starts the step-up approving needs (human_stepups.go): a
// passkey assertion bound to this approval when the human has passkeys,
// none otherwise.
func (s *Service) BeginSpendApproval(ctx context.Context, v *Viewer, id string) (*SpendApprovalStart, error) {
	return s.beginApproval(ctx, v, s.spendApprovalTarget, id)
}

// ApproveSpendApproval is a decider's yes, with a fresh passkey assertion
// begun for this approval when the human has passkeys (ceremonyID: the
// step-up's id, human_stepups.go). Until every decider still paired has said
// yes it only records this one's (the approval still waits); the last yes
// runs the operation as it would have run, its limits, caps (not the
// threshold nor the allow-list: the humans approved it) and balance
// checked now, and the approval moves to approved in the transaction that
// records its transfer. A refusal at that moment moves it to failed, with
// the refusal's text. It waits for inclusion at most ApprovalWait. A
// paired human who is not a decider is ErrForbidden.
func (s *Service) ApproveSpendApproval(ctx context.Context, v *Viewer, id, ceremonyID string, assertion []byte) (*SpendApprovalView, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	t, err := s.spendApprovalTarget(ctx, v.User, id)
	if err != nil {
		return nil, err
	}
	if err := s.proveApproval(ctx, v.User, t, ceremonyID, assertion); err != nil {
		return nil, err
	}
	r, complete, err := s.castSpendApproval(ctx, t.subject, v.User)
	if err != nil {
		return nil, err
	}
	if !complete {
		return s.approvalView(ctx, r)
	}
	a, err := s.cfg.DB.Ent.Agent.Get(ctx, r.AgentID)
	if err != nil {
		return nil, fmt.Errorf("reading agent: %w", err)
	}
	approved := &approvedRun{approval: r, userID: v.User.ID}
	switch r.Operation {
	case spendapproval.OperationSend, spendapproval.OperationSendToUser:
		var h heldSend
		if err := json.Unmarshal([]byte(r.Request), &h); err != nil {
			return nil, fmt.Errorf("approval %s: request: %w", r.ID, err)
		}
		amount, err := decimal.NewFromString(h.AmountUSD)
		if err != nil {
			return nil, fmt.Errorf("approval %s: amount: %w", r.ID, err)
		}
		_, err = s.send(ctx, a, SendRequest{ToUsername: h.ToUsername, ToUser: h.ToUser, AmountUSD: amount, Memo: h.Memo,
			Chain: h.Chain, Wait: ApprovalWait, approved: approved})
		if err = s.settleApproval(ctx, r, v.User.ID, err); err != nil {
			return nil, err
		}
	case spendapproval.OperationPayCheckout:
		var h heldCheckout
		if err := json.Unmarshal([]byte(r.Request), &h); err != nil {
			return nil, fmt.Errorf("approval %s: request: %w", r.ID, err)
		}
		_, err = s.payCheckout(ctx, a, PayCheckoutRequest{ExternalID: h.ExternalID, Chain: h.Chain, Wait: ApprovalWait, approved: approved})
		if err = s.settleApproval(ctx, r, v.User.ID, err); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("approval %s: unknown operation %s", r.ID, r.Operation)
	}
	cur, err := s.cfg.DB.Ent.SpendApproval.Get(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("reading approval: %w", err)
	}
	return s.approvalView(ctx, cur)
}

// castSpendApproval records u's yes on the held operation under its row's
// lock, and answers it as it is then and whether every decider still
// paired with the agent has said yes (the caller then runs it). Decided or
// lapsed meanwhile: its state's ErrConflict.
func (s *Service) castSpendApproval(ctx context.Context, id string, u *ent.User) (*ent.SpendApproval, bool, error) {
	var (
		r        *ent.SpendApproval
		complete bool
	)
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		cur, err := store.ForUpdate(s.cfg.DB, tx.SpendApproval.Query().Where(spendapproval.ID(uuid.MustParse(id)))).Only(ctx)
		if err != nil {
			return fmt.Errorf("reading approval: %w", err)
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if cur.Status != spendapproval.StatusAwaitingApproval || !now.Before(cur.ExpiresAt) {
			return errApprovalState(cur, now)
		}
		var changed bool
		cur.ApprovedBy, changed = addVoter(cur.ApprovedBy, u.ID)
		if complete, err = s.allDecidersApproved(ctx, tx.Client(), cur.AgentID, cur.Deciders, cur.ApprovedBy); err != nil {
			return err
		}
		if changed {
			if err := tx.SpendApproval.UpdateOneID(cur.ID).SetApprovedBy(cur.ApprovedBy).SetUpdatedAt(now).Exec(ctx); err != nil {
				return fmt.Errorf("recording approval: %w", err)
			}
		}
		r = cur
		return nil
	})
	return r, complete, err
}

// addVoter adds id to voters once; changed reports whether it was new.
func addVoter(voters []uuid.UUID, id uuid.UUID) ([]uuid.UUID, bool) {
	if slices.Contains(voters, id) {
		return voters, false
	}
	return append(slices.Clone(voters), id), true
}

// allDecidersApproved reports whether every decider still paired with the
// agent (an approved pairing) is among approvedBy; with none still paired,
// nobody can approve.
func (s *Service) allDecidersApproved(ctx context.Context, db *ent.Client, agentID uuid.UUID, deciders, approvedBy []uuid.UUID) (bool, error) {
	if len(deciders) == 0 {
		return false, nil
	}
	paired, err := db.Pairing.Query().Where(pairing.AgentID(agentID), pairing.StatusEQ(pairing.StatusApproved),
		pairing.UserIDIn(deciders...)).Select(pairing.FieldUserID).Strings(ctx)
	if err != nil {
		return false, fmt.Errorf("reading pairings: %w", err)
	}
	if len(paired) == 0 {
		return false, nil
	}
	for _, id := range paired {
		if !slices.Contains(approvedBy, uuid.MustParse(id)) {
			return false, nil
		}
	}
	return true, nil
}

// approvedRun marks an operation run on its human's approval.
type approvedRun struct {
	approval *ent.SpendApproval
	userID   uuid.UUID
}

// settleApproval handles the approved operation's error: nil (it ran),
// another decision first (ErrConflict), a refusal (the approval fails,
// nil), or a passing failure (returned; the approval still waits).
func (s *Service) settleApproval(ctx context.Context, r *ent.SpendApproval, userID uuid.UUID, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, errApprovalNotPending) {
		cur, rerr := s.cfg.DB.Ent.SpendApproval.Get(ctx, r.ID)
		if rerr != nil {
			return rerr
		}
		return errApprovalState(cur, s.now())
	}
	refusal, final := refusalOf(err)
	if !final {
		return err
	}
	if ferr := s.failApproval(ctx, r, userID, refusal.Message); ferr != nil {
		if errors.Is(ferr, errApprovalNotPending) {
			cur, rerr := s.cfg.DB.Ent.SpendApproval.Get(ctx, r.ID)
			if rerr != nil {
				return rerr
			}
			return errApprovalState(cur, s.now())
		}
		return ferr
	}
	return nil
}

// recorded is the hook the approved operation's transfer runs in its
// transaction (nil when the operation was not held).
func (r *approvedRun) recorded(s *Service) func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer) error {
	if r == nil {
		return nil
	}
	return s.approvedBy(r.approval, r.userID)
}
