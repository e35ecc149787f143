package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/pairing"
	"agentpay/ent/spendapproval"
	"agentpay/ent/user"
)

// Operations held for approval (agent_policies.go decides which).
//
// States: awaiting_approval -> approved (the operation ran: its transfer
// is recorded in the same transaction) | denied | expired | failed (the
// human approved but the operation was refused at that moment: a limit,
// a cap, the balance). Every move is a conditional update from
// awaiting_approval before the expiry, so of an approval, a denial and the
// expiry racing exactly one wins; each writes its account events (to the
// agent and to its paired humans) in its own transaction.
//
// Who decides: the humans whose policies held it (its deciders, kept when
// it is held). Each of them still paired must approve (their yeses are
// kept under the row's lock, so two last yeses racing run it once), any
// one of them may deny; every other paired human sees it and is told of
// it, but deciding it is ErrForbidden and changes nothing. A decider who
// unpairs stops counting; with none left it waits until it expires.

// DefaultSpendApprovalTTL is how long a held operation waits for a human.
const DefaultSpendApprovalTTL = time.Hour

// Events of held operations, to the agent and its approved paired humans.
const (
	EventApprovalRequested = "approval.requested"
	EventApprovalApproved  = "approval.approved"
	EventApprovalDenied    = "approval.denied"
	EventApprovalExpired   = "approval.expired"
	EventApprovalFailed    = "approval.failed"
)

// errApprovalNotPending: the approval was decided, or lapsed, first.
var errApprovalNotPending = fmt.Errorf("%w: this operation is no longer awaiting approval", ErrConflict)

func (s *Service) spendApprovalTTL() time.Duration {
	if s.cfg.SpendApprovalTTL > 0 {
		return s.cfg.SpendApprovalTTL
	}
	return DefaultSpendApprovalTTL
}

// heldSend is a send's request as kept for its approval.
type heldSend struct {
	ToUsername string `json:"to_username"`
	ToUser     bool   `json:"to_user,omitempty"`
	AmountUSD  string `json:"amount_usd"`
	Memo       string `json:"memo,omitempty"`
	Chain      string `json:"chain,omitempty"`
}

// errNotDecider: a paired human whose policy did not hold the operation.
func errNotDecider(names []string) error {
	return fmt.Errorf("%w: this operation was held by the spending policy of %s: only they can approve or deny it",
		ErrForbidden, strings.Join(names, " and "))
}

// heldCheckout is a checkout payment's request as kept.
type heldCheckout struct {
	ExternalID string `json:"external_id"`
	Chain      string `json:"chain,omitempty"`
}

// SpendApprovalView is a held operation with its agent's name and, once
// approved, its transfer as it is now.
type SpendApprovalView struct {
	Approval      *ent.SpendApproval
	AgentUsername string
	Transfer      *ent.Transfer
	// Deciders and ApprovedBy name the humans whose decision it waits for
	// and those of them who approved.
	Deciders, ApprovedBy []string
}

// Status is the approval's state.
func (v *SpendApprovalView) Status() string { return string(v.Approval.Status) }

// Amount in USD.
func (v *SpendApprovalView) Amount() decimal.Decimal { return USDCAmount(v.Approval.Amount) }

type approvalEventData struct {
	ApprovalID    uuid.UUID   `json:"approval_id"`
	Operation     string      `json:"operation"`
	Status        string      `json:"status"`
	AgentUsername string      `json:"agent_username"`
	AmountUSD     json.Number `json:"amount_usd"`
	Recipient     string      `json:"recipient"`
	Reason        string      `json:"reason"`
	ExpiresAt     time.Time   `json:"expires_at"`
	TransactionID *uuid.UUID  `json:"transaction_id,omitempty"`
	Error         string      `json:"error,omitempty"`
}

// recordApprovalEvents tells the agent and every human paired with it.
func (s *Service) recordApprovalEvents(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, r *ent.SpendApproval, agentUsername, kind string) error {
	data := approvalEventData{ApprovalID: r.ID, Operation: string(r.Operation), Status: string(r.Status), AgentUsername: agentUsername,
		AmountUSD: json.Number(USDCAmount(r.Amount).String()), Recipient: r.Recipient, Reason: r.Reason,
		ExpiresAt: r.ExpiresAt, TransactionID: r.TransferID, Error: r.Error}
	if err := s.recordAccountEvent(ctx, tx, sqlTx, AgentParty(r.AgentID), kind, data); err != nil {
		return err
	}
	users, err := tx.Pairing.Query().Where(pairing.AgentID(r.AgentID), pairing.StatusEQ(pairing.StatusApproved)).
		Select(pairing.FieldUserID).Strings(ctx)
	if err != nil {
		return err
	}
	for _, id := range users {
		uid, err := uuid.Parse(id)
		if err != nil {
			return err
		}
		if err := s.recordAccountEvent(ctx, tx, sqlTx, UserParty(uid), kind, data); err != nil {
			return err
		}
	}
	return nil
}

// holdOperation records the operation as awaiting approval, with its
// events. With an idempotency key a second hold of the same request
// answers the first (the unique index decides a race).
func (s *Service) holdOperation(ctx context.Context, a *ent.Agent, operation spendapproval.Operation, request any, units int64,
	recipient string, policy SpendDecision, idemKey *string, fingerprint []byte) (*SpendApprovalView, error) {
	reason := policy.Reason
	body, err := json.Marshal(request)
	if err != nil {
		return nil, err
	}
	if idemKey != nil {
		if prior, err := s.approvalByKey(ctx, a, operation, *idemKey); prior != nil || err != nil {
			return prior, err
		}
	}
	// What the deciders are mailed names what is bought: read before the
	// transaction (a held checkout's session and merchant).
	what, err := s.SpendApprovalCheckout(ctx, &ent.SpendApproval{Operation: operation, Request: string(body)})
	if err != nil {
		return nil, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	var r *ent.SpendApproval
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		c := tx.SpendApproval.Create().SetAgentID(a.ID).SetOperation(operation).SetRequest(string(body)).
			SetAmount(units).SetRecipient(truncate(recipient, 100)).SetReason(truncate(reason, 500)).SetDeciders(policy.HeldBy).
			SetExpiresAt(now.Add(s.spendApprovalTTL())).SetCreatedAt(now).SetUpdatedAt(now)
		if idemKey != nil {
			c.SetIdempotencyKey(*idemKey).SetFingerprint(fingerprint)
		}
		if r, err = c.Save(ctx); err != nil {
			return err
		}
		if err := s.recordApprovalEvents(ctx, tx, sqlTx, r, a.Username, EventApprovalRequested); err != nil {
			return err
		}
		// Each decider is mailed: an approval nobody sees expires.
		deciders, err := tx.User.Query().Where(user.IDIn(policy.HeldBy...)).All(ctx)
		if err != nil {
			return err
		}
		for _, u := range deciders {
			if _, err := s.queueMail(ctx, tx, sqlTx, s.spendApprovalMail(u, a, r, what)); err != nil {
				return err
			}
		}
		return nil
	})
	if idemKey != nil && ent.IsConstraintError(err) {
		if prior, perr := s.approvalByKey(ctx, a, operation, *idemKey); prior != nil || perr != nil {
			return prior, perr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("holding operation for approval: %w", err)
	}
	return s.approvalView(ctx, r)
}

// spendApprovalMail asks a decider to approve or deny a held operation:
// who asks, what for, how much, and the rule that held it.
func (s *Service) spendApprovalMail(u *ent.User, a *ent.Agent, r *ent.SpendApproval, what *ApprovalCheckout) Mail {
	link := s.appURL("/#spend-approvals")
	amount := usd(USDCAmount(r.Amount))
	ask := fmt.Sprintf("send %s USD to %s", amount, r.Recipient)
	if what != nil {
		verified := "not verified"
		if what.MerchantVerified {
			verified = "verified"
		}
		ask = fmt.Sprintf("pay %s USD to %s (merchant %s)", amount, what.MerchantName, verified)
	}
	text := fmt.Sprintf("The agent %s asks you to approve: %s.\n", a.Username, ask)
	description := ""
	if what != nil && what.Description != "" {
		description = what.Description
		text += fmt.Sprintf("\nWhat for: %s\n", description)
	}
	until := r.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")
	text += fmt.Sprintf("\nYour spending policy held it: %s.\n\nApprove or deny it before %s: %s\n\nIf you do nothing, it expires and nothing is spent.\n", r.Reason, until, link)
	return Mail{
		To:      u.Email,
		Subject: fmt.Sprintf("%s asks you to approve a payment of %s USD", a.Username, amount),
		Text:    text,
		HTML: fmt.Sprintf(`<p>The agent <b>%s</b> asks you to approve: %s.</p>%s<p>Your spending policy held it: %s.</p><p><a href="%s">Approve or deny it</a> before %s.</p><p>If you do nothing, it expires and nothing is spent.</p>`,
			html.EscapeString(a.Username), html.EscapeString(ask), quoteHTML(description), html.EscapeString(r.Reason), html.EscapeString(link), until),
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func (s *Service) approvalByKey(ctx context.Context, a *ent.Agent, operation spendapproval.Operation, key string) (*SpendApprovalView, error) {
	r, err := s.cfg.DB.Ent.SpendApproval.Query().Where(spendapproval.AgentID(a.ID),
		spendapproval.OperationEQ(operation), spendapproval.IdempotencyKey(key)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading approval: %w", err)
	}
	return s.approvalView(ctx, r)
}

func (s *Service) approvalView(ctx context.Context, r *ent.SpendApproval) (*SpendApprovalView, error) {
	a, err := s.cfg.DB.Ent.Agent.Get(ctx, r.AgentID)
	if err != nil {
		return nil, fmt.Errorf("approval %s: agent: %w", r.ID, err)
	}
	v := &SpendApprovalView{Approval: r, AgentUsername: a.Username}
	if v.Deciders, err = s.UsernamesOf(ctx, r.Deciders); err != nil {
		return nil, err
	}
	if v.ApprovedBy, err = s.UsernamesOf(ctx, r.ApprovedBy); err != nil {
		return nil, err
	}
	if r.TransferID != nil {
		if v.Transfer, err = s.cfg.DB.Ent.Transfer.Get(ctx, *r.TransferID); err != nil {
			return nil, fmt.Errorf("approval %s: transfer: %w", r.ID, err)
		}
	}
	return v, nil
}

func parseApprovalID(id string) (uuid.UUID, error) {
	rid, err := uuid.Parse(id)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: no approval %q", ErrNotFound, id)
	}
	return rid, nil
}

// AgentSpendApproval is one of the agent's held operations.
func (s *Service) AgentSpendApproval(ctx context.Context, a *ent.Agent, id string) (*SpendApprovalView, error) {
	rid, err := parseApprovalID(id)
	if err != nil {
		return nil, err
	}
	r, err := s.cfg.DB.Ent.SpendApproval.Query().Where(spendapproval.ID(rid), spendapproval.AgentID(a.ID)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: no approval %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading approval: %w", err)
	}
	return s.approvalView(ctx, r)
}

// MaxSpendApprovalsListed is the most approvals a list answers.
const MaxSpendApprovalsListed = 100

// UserSpendApprovals lists the held operations of the agents the user is
// paired with (approved pairings), newest first.
func (s *Service) UserSpendApprovals(ctx context.Context, u *ent.User) ([]*SpendApprovalView, error) {
	ps, err := s.cfg.DB.Ent.Pairing.Query().Where(pairing.UserID(u.ID), pairing.StatusEQ(pairing.StatusApproved)).
		WithAgent().All(ctx)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	names := map[uuid.UUID]string{}
	var ids []uuid.UUID
	for _, p := range ps {
		names[p.AgentID] = p.Edges.Agent.Username
		ids = append(ids, p.AgentID)
	}
	rs, err := s.cfg.DB.Ent.SpendApproval.Query().Where(spendapproval.AgentIDIn(ids...)).
		Order(ent.Desc(spendapproval.FieldCreatedAt), ent.Desc(spendapproval.FieldID)).
		Limit(MaxSpendApprovalsListed).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading approvals: %w", err)
	}
	out := make([]*SpendApprovalView, len(rs))
	for i, r := range rs {
		out[i] = &SpendApprovalView{Approval: r, AgentUsername: names[r.AgentID]}
	}
	return out, nil
}

// moveApproval moves an awaiting approval to status in tx (conditional:
// exactly one mover wins), sets what set does, and records its events.
func (s *Service) moveApproval(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, r *ent.SpendApproval, status spendapproval.Status,
	kind string, now time.Time, set func(*ent.SpendApprovalUpdate)) error {
	u := tx.SpendApproval.Update().Where(spendapproval.ID(r.ID), spendapproval.StatusEQ(spendapproval.StatusAwaitingApproval))
	if status == spendapproval.StatusExpired {
		u.Where(spendapproval.ExpiresAtLTE(now))
	} else {
		u.Where(spendapproval.ExpiresAtGT(now))
	}
	u.SetStatus(status).SetUpdatedAt(now)
	if set != nil {
		set(u)
	}
	n, err := u.Save(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		return errApprovalNotPending
	}
	cur, err := tx.SpendApproval.Get(ctx, r.ID)
	if err != nil {
		return err
	}
	*r = *cur
	a, err := tx.Agent.Get(ctx, r.AgentID)
	if err != nil {
		return err
	}
	return s.recordApprovalEvents(ctx, tx, sqlTx, r, a.Username, kind)
}

// approvedBy is the recorded hook of an approved operation's transfer: the
// approval moves to approved, linked to t, in t's transaction.
func (s *Service) approvedBy(r *ent.SpendApproval, userID uuid.UUID) func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer) error {
	return func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		return s.moveApproval(ctx, tx, sqlTx, r, spendapproval.StatusApproved, EventApprovalApproved, now, func(u *ent.SpendApprovalUpdate) {
			u.SetDecidedAt(now).SetDecidedBy(userID).SetTransferID(t.ID)
		})
	}
}

// AwaitsDecisionOf reports whether the held operation waits for u's
// decision: u is one of its deciders, has not approved it, and it still
// awaits approval.
func AwaitsDecisionOf(r *ent.SpendApproval, u uuid.UUID) bool {
	return r.Status == spendapproval.StatusAwaitingApproval && slices.Contains(r.Deciders, u) && !slices.Contains(r.ApprovedBy, u)
}

// UsernamesOf names the users of ids, in their order (a user who no
// longer exists is left out).
func (s *Service) UsernamesOf(ctx context.Context, ids []uuid.UUID) ([]string, error) {
	if len(ids) == 0 {
		return []string{}, nil
	}
	us, err := s.cfg.DB.Ent.User.Query().Where(user.IDIn(ids...)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading users: %w", err)
	}
	byID := make(map[uuid.UUID]string, len(us))
	for _, u := range us {
		byID[u.ID] = u.Username
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if name, ok := byID[id]; ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// ExpireSpendApprovals ends the held operations past their deadline
// (expired, nothing moved); run by the worker's cards job. Conditional
// updates: running it twice, on two workers, or racing a decision, each
// approval ends once.
func (s *Service) ExpireSpendApprovals(ctx context.Context) (int, error) {
	now := s.now().UTC().Truncate(time.Microsecond)
	rs, err := s.cfg.DB.Ent.SpendApproval.Query().
		Where(spendapproval.StatusEQ(spendapproval.StatusAwaitingApproval), spendapproval.ExpiresAtLTE(now)).
		Limit(cardsTickBatch).All(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading approvals: %w", err)
	}
	n := 0
	for _, r := range rs {
		err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
			return s.moveApproval(ctx, tx, sqlTx, r, spendapproval.StatusExpired, EventApprovalExpired, now, nil)
		})
		if errors.Is(err, errApprovalNotPending) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("expiring approval %s: %w", r.ID, err)
		}
		n++
	}
	return n, nil
}

// recipientNames are the names an allow-list entry may give a send's
// recipient: its username, its id and its custodial wallets' addresses.
func (s *Service) recipientNames(ctx context.Context, to holder) ([]string, error) {
	names := []string{to.username}
	if to.agentID != nil {
		names = append(names, to.agentID.String())
	}
	if to.userID != nil {
		names = append(names, to.userID.String())
	}
	addrs, err := to.wallets(s.cfg.DB.Ent).Select("address").Strings(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading recipient wallets: %w", err)
	}
	return append(names, addrs...), nil
}

// heldSendResult is a held send as answered to the agent.
func (s *Service) heldSendResult(held *SpendApprovalView, from, to string) *SendResult {
	amount := held.Amount()
	return &SendResult{
		FromUsername: from, ToUsername: to, Amount: amount, Status: string(held.Approval.Status), Approval: held,
		Message: fmt.Sprintf("The send of %s USDC to %s waits for your paired human's approval (approval %s, until %s): %s.",
			usd(amount), to, held.Approval.ID, held.Approval.ExpiresAt.UTC().Format(time.RFC3339), held.Approval.Reason),
	}
}

// heldCheckoutPayment holds (or, refused, refuses) a checkout payment.
func (s *Service) heldCheckoutPayment(ctx context.Context, a *ent.Agent, req PayCheckoutRequest, sess *ent.CheckoutSession,
	units int64, policy SpendDecision) (*CheckoutPayment, error) {
	if policy.Outcome == SpendRefused {
		return nil, policy.Err()
	}
	held, err := s.holdOperation(ctx, a, spendapproval.OperationPayCheckout, heldCheckout{ExternalID: req.ExternalID, Chain: req.Chain},
		units, sess.ExternalID, policy, req.claim.Key(), req.claim.Fingerprint())
	if err != nil {
		return nil, err
	}
	return heldCheckoutOf(held), nil
}

func heldCheckoutOf(held *SpendApprovalView) *CheckoutPayment {
	amount := held.Amount()
	return &CheckoutPayment{Approval: held, AmountUSD: amount, Status: string(held.Approval.Status),
		Message: fmt.Sprintf("The payment of %s USDC to checkout %s waits for your paired human's approval (approval %s, until %s): %s.",
			usd(amount), held.Approval.Recipient, held.Approval.ID, held.Approval.ExpiresAt.UTC().Format(time.RFC3339), held.Approval.Reason)}
}

// replayHeldCheckout answers a held payment's Idempotency-Key again: the
// approval as it is now, or the payment once it ran.
func (s *Service) replayHeldCheckout(ctx context.Context, id uuid.UUID) (*CheckoutPayment, error) {
	r, err := s.cfg.DB.Ent.SpendApproval.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading approval: %w", err)
	}
	v, err := s.approvalView(ctx, r)
	if err != nil {
		return nil, err
	}
	if v.Transfer != nil {
		return s.checkoutPaymentOf(ctx, v.Transfer)
	}
	return heldCheckoutOf(v), nil
}

// replayHeldSend answers a held send's Idempotency-Key again: the approval
// as it is now, or the send once it ran.
func (s *Service) replayHeldSend(ctx context.Context, id uuid.UUID, from, to string) (*SendResult, error) {
	r, err := s.cfg.DB.Ent.SpendApproval.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading approval: %w", err)
	}
	v, err := s.approvalView(ctx, r)
	if err != nil {
		return nil, err
	}
	if v.Transfer != nil {
		return s.sendResult(v.Transfer, from, to), nil
	}
	return s.heldSendResult(v, from, to), nil
}
