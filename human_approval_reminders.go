package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"html"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/ent/spendapproval"
	"agentpay/ent/user"
)

// Reminders before an approval expires (issue 27): each decider of a held
// operation (agent_spend_approvals.go) or a card request (card_approvals.go) was
// mailed when it started waiting; one that still waits when a quarter of
// its time is left (15 minutes of the default hour for a held operation)
// is mailed once more, saying when it expires. Once: the reminder's
// reminded_at is set by a conditional update in the transaction that
// queues its mails, so two workers, or a job run twice, remind once, and a
// reminder is never lost to a crash between the two. A decided or expired
// one is not reminded.

// approvalReminderShare: a reminder goes when 1/approvalReminderShare of
// the time between the request and its expiry is left.
const approvalReminderShare = 4

// maxRemindersPerRun bounds one run's work; the next run takes the rest.
const maxRemindersPerRun = 100

// remindAt is when an approval made at created and expiring at expires is
// reminded.
func remindAt(created, expires time.Time) time.Time {
	return expires.Add(-expires.Sub(created) / approvalReminderShare)
}

// RemindApprovals mails the deciders of every held operation and card
// request still waiting whose reminder is due, once each; it answers how
// many were reminded.
func (s *Service) RemindApprovals(ctx context.Context) (int, error) {
	now := s.now().UTC().Truncate(time.Microsecond)
	held, err := s.cfg.DB.Ent.SpendApproval.Query().Where(
		spendapproval.StatusEQ(spendapproval.StatusAwaitingApproval),
		spendapproval.RemindedAtIsNil(), spendapproval.ExpiresAtGT(now),
	).Order(ent.Asc(spendapproval.FieldExpiresAt)).Limit(maxRemindersPerRun).All(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading held operations: %w", err)
	}
	n, err := remindDue(ctx, now, held, func(r *ent.SpendApproval) (time.Time, time.Time) { return r.CreatedAt, r.ExpiresAt }, s.remindSpendApproval)
	if err != nil {
		return n, err
	}
	cards, err := s.cfg.DB.Ent.CardRequest.Query().Where(
		cardrequest.StatusEQ(cardrequest.StatusPendingApproval),
		cardrequest.RemindedAtIsNil(), cardrequest.ExpiresAtGT(now),
	).Order(ent.Asc(cardrequest.FieldExpiresAt)).Limit(maxRemindersPerRun).All(ctx)
	if err != nil {
		return n, fmt.Errorf("reading card requests: %w", err)
	}
	m, err := remindDue(ctx, now, cards, func(r *ent.CardRequest) (time.Time, time.Time) { return r.CreatedAt, r.ExpiresAt }, s.remindCardRequest)
	return n + m, err
}

// remindDue reminds each of items whose reminder is due at now (remindAt
// of its times), answering how many were reminded.
func remindDue[T any](ctx context.Context, now time.Time, items []T, times func(T) (created, expires time.Time),
	remind func(context.Context, T, time.Time) (bool, error)) (int, error) {
	n := 0
	for _, r := range items {
		if now.Before(remindAt(times(r))) {
			continue
		}
		ok, err := remind(ctx, r, now)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// remindSpendApproval reminds a held operation's deciders; false when
// another run reminded it first or it was decided meanwhile.
func (s *Service) remindSpendApproval(ctx context.Context, r *ent.SpendApproval, now time.Time) (bool, error) {
	what, err := s.SpendApprovalCheckout(ctx, r)
	if err != nil {
		return false, err
	}
	reminded := false
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.SpendApproval.Update().Where(spendapproval.ID(r.ID), spendapproval.RemindedAtIsNil(),
			spendapproval.StatusEQ(spendapproval.StatusAwaitingApproval), spendapproval.ExpiresAtGT(now)).
			SetRemindedAt(now).SetUpdatedAt(now).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		reminded = true
		a, err := tx.Agent.Get(ctx, r.AgentID)
		if err != nil {
			return err
		}
		return s.mailDeciders(ctx, tx, sqlTx, r.Deciders, func(u *ent.User) Mail {
			return reminderMail(s.spendApprovalMail(u, a, r, what), r.ExpiresAt)
		})
	})
	if err != nil {
		return false, fmt.Errorf("reminding approval %s: %w", r.ID, err)
	}
	return reminded, nil
}

// remindCardRequest reminds a card request's deciders; false when another
// run reminded it first or it was decided meanwhile.
func (s *Service) remindCardRequest(ctx context.Context, r *ent.CardRequest, now time.Time) (bool, error) {
	reminded := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().Where(cardrequest.ID(r.ID), cardrequest.RemindedAtIsNil(),
			cardrequest.StatusEQ(cardrequest.StatusPendingApproval), cardrequest.ExpiresAtGT(now)).
			SetRemindedAt(now).SetUpdatedAt(now).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		reminded = true
		a, err := tx.Agent.Get(ctx, r.AgentID)
		if err != nil {
			return err
		}
		return s.mailDeciders(ctx, tx, sqlTx, cardDeciders(r), func(u *ent.User) Mail {
			return reminderMail(s.cardRequestMail(u, a, r), r.ExpiresAt)
		})
	})
	if err != nil {
		return false, fmt.Errorf("reminding card request %s: %w", r.ID, err)
	}
	return reminded, nil
}

// mailDeciders queues one mail to each decider, in tx.
func (s *Service) mailDeciders(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, deciders []uuid.UUID, mail func(*ent.User) Mail) error {
	users, err := tx.User.Query().Where(user.IDIn(deciders...)).All(ctx)
	if err != nil {
		return err
	}
	for _, u := range users {
		if _, err := s.queueMail(ctx, tx, sqlTx, mail(u)); err != nil {
			return err
		}
	}
	return nil
}

// reminderMail is the mail an approval started with, said again as a
// reminder with its deadline first.
func reminderMail(m Mail, expires time.Time) Mail {
	until := expires.UTC().Format("2006-01-02 15:04 UTC")
	m.Subject = "Reminder: " + m.Subject
	m.Text = fmt.Sprintf("Reminder: this still waits for your decision and expires at %s.\n\n", until) + m.Text
	m.HTML = fmt.Sprintf("<p><b>Reminder:</b> this still waits for your decision and expires at %s.</p>", html.EscapeString(until)) + m.HTML
	return m
}
