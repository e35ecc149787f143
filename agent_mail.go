package agentpay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/ent/mailoptout"
	"agentpay/ent/pairing"
	"agentpay/internal/ratelimit"
	"agentpay/internal/vault"
)

// Mail from agents: invitations (InviteHuman) and pairing requests
// (RequestPairing) reach people who did not ask for them, and anyone can
// register agents, so what agents together make the service mail one
// address is bounded, and the address can say no (docs/humans.md, E-mail
// from agents):
//
//   - A day's cap per recipient, across all agents: at most
//     Config.AgentMailDailyLimit such e-mails per UTC day to one address
//     (counted across instances, by the address's SHA-256: the counters
//     never hold an address). Past it an invitation is refused
//     (*RateLimitError); a pairing request is recorded, unmailed.
//   - Opt-outs (mail_opt_outs): every such mail carries an unsubscribe link
//     ({app_url}/unsubscribe/<token>; GET shows, POST unsubscribes), after
//     which no agent mails the address; declining an invitation (its
//     e-mailed link) stops its agent from mailing the address again; a
//     user who denied an agent's pairing request gets no more of that
//     agent's requests by mail. An invitation to such an address is
//     refused (ErrForbidden), a pairing request recorded, unmailed.

// errAgentMailRefused is an invitation to an address that opted out of the
// inviting agent's mail: one answer for every reason.
func errAgentMailRefused(email string) error {
	return fmt.Errorf("%w: %s does not accept invitations from you", ErrForbidden, email)
}

// agentMailOptedOut reports whether an address opted out of the agent's
// mail: unsubscribed from every agent, declined one of its invitations,
// or, for a user (userID not nil), denied one of its pairing requests.
func (s *Service) agentMailOptedOut(ctx context.Context, db *ent.Client, agentID uuid.UUID, email string, userID *uuid.UUID) (bool, error) {
	out, err := db.MailOptOut.Query().
		Where(mailoptout.Email(email), mailoptout.Or(mailoptout.AgentIDIsNil(), mailoptout.AgentID(agentID))).
		Exist(ctx)
	if err != nil {
		return false, fmt.Errorf("reading mail opt-outs: %w", err)
	}
	if out || userID == nil {
		return out, nil
	}
	denied, err := db.Pairing.Query().
		Where(pairing.AgentID(agentID), pairing.UserID(*userID), pairing.StatusEQ(pairing.StatusDenied)).
		Exist(ctx)
	if err != nil {
		return false, fmt.Errorf("reading pairings: %w", err)
	}
	return denied, nil
}

// mayMailPairingRequest decides, before the request's transaction (the
// counters are not in it), whether a pairing request of the agent is
// mailed to the user: not when the address opted out of the agent's mail,
// nor past its day's cap (the request is recorded all the same: the user
// sees it in the app).
func (s *Service) mayMailPairingRequest(ctx context.Context, a *ent.Agent, u *ent.User) (bool, error) {
	out, err := s.agentMailOptedOut(ctx, s.cfg.DB.Ent, a.ID, u.Email, &u.ID)
	if err != nil || out {
		return false, err
	}
	// A request the transaction will refuse (one is pending or approved)
	// does not use up the address's day.
	if live, err := s.livePairing(ctx, s.cfg.DB.Ent, a.ID, u.ID, s.now().UTC()); err != nil || live != nil {
		return false, err
	}
	switch err := s.allowAgentMail(ctx, u.Email); {
	case errors.Is(err, ErrRateLimited):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// allowAgentMail counts one e-mail from an agent to an address against the
// day's cap across agents; past it, a *RateLimitError.
func (s *Service) allowAgentMail(ctx context.Context, email string) error {
	if s.cfg.AgentMailDailyLimit <= 0 {
		return nil
	}
	sum := sha256.Sum256([]byte(email))
	dec, err := s.rates.agentMail.Allow(ctx, ratelimit.Subject[string]{ID: hex.EncodeToString(sum[:])})
	return rateRefusal(dec, err, "invitation and pairing e-mails", " to this address (all agents together)")
}

// agentMailScheme counts the e-mails from agents each address receives a
// UTC day (rateLimits.agentMail).
func agentMailScheme(cfg Config) ratelimit.Scheme {
	w := ratelimit.Window{Name: "day", Key: "agent_mail", Seconds: 24 * 3600, Limit: cfg.AgentMailDailyLimit}
	return ratelimit.Scheme{Name: "email", IDType: "text", Windows: func(string) []ratelimit.Window { return []ratelimit.Window{w} }}
}

// queueAgentMail queues a mail from an agent with its unsubscribe link
// (a fresh token, stored hashed on the outbox row) at the end of both
// parts.
func (s *Service) queueAgentMail(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, m Mail) error {
	token := vault.UnsubscribeToken.New()
	link := s.appURL("/unsubscribe/" + token)
	m.Text += fmt.Sprintf("\n--\nTo receive no more e-mail from agents on agentpay: %s\n", link)
	m.HTML += fmt.Sprintf(`<hr><p><small><a href="%s">Receive no more e-mail from agents on agentpay</a></small></p>`, html.EscapeString(link))
	m.unsubscribeHash = vault.HashSecret(token)
	_, err := s.queueMail(ctx, tx, sqlTx, m)
	return err
}

// ErrUnsubscribeLinkInvalid is an unsubscribe link that is unknown.
var ErrUnsubscribeLinkInvalid = fmt.Errorf("%w: this unsubscribe link is invalid", ErrNotFound)

// UnsubscribeLink is the address an unsubscribe link names (the GET page),
// and whether it is unsubscribed already.
type UnsubscribeLink struct {
	Email        string
	Unsubscribed bool
}

// CheckUnsubscribeLink reads an unsubscribe link without using it.
func (s *Service) CheckUnsubscribeLink(ctx context.Context, token string) (*UnsubscribeLink, error) {
	email, err := s.unsubscribeAddress(ctx, s.cfg.DB.Ent, token)
	if err != nil {
		return nil, err
	}
	done, err := s.cfg.DB.Ent.MailOptOut.Query().
		Where(mailoptout.Email(email), mailoptout.AgentIDIsNil()).Exist(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading mail opt-outs: %w", err)
	}
	return &UnsubscribeLink{Email: email, Unsubscribed: done}, nil
}

// Unsubscribe stops every agent's invitations and pairing-request mails to
// the address of an unsubscribe link (the page's POST). Unsubscribing
// twice changes nothing more.
func (s *Service) Unsubscribe(ctx context.Context, token string) (*UnsubscribeLink, error) {
	var email string
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		var err error
		if email, err = s.unsubscribeAddress(ctx, tx.Client(), token); err != nil {
			return err
		}
		return s.recordMailOptOut(ctx, tx, email, nil, mailoptout.ReasonUnsubscribed)
	})
	if err != nil {
		return nil, err
	}
	return &UnsubscribeLink{Email: email, Unsubscribed: true}, nil
}

// unsubscribeAddress is the address an unsubscribe token was mailed to.
func (s *Service) unsubscribeAddress(ctx context.Context, db *ent.Client, token string) (string, error) {
	if !vault.UnsubscribeToken.Valid(token) {
		return "", ErrUnsubscribeLinkInvalid
	}
	m, err := db.MailMessage.Query().
		Where(mailmessage.UnsubscribeTokenHash(vault.HashSecret(token))).Only(ctx)
	if ent.IsNotFound(err) {
		return "", ErrUnsubscribeLinkInvalid
	}
	if err != nil {
		return "", fmt.Errorf("reading unsubscribe link: %w", err)
	}
	email, err := NormalizeEmail(m.To)
	if err != nil {
		return "", ErrUnsubscribeLinkInvalid
	}
	return email, nil
}

// recordMailOptOut records an opt-out of an address (from one agent, or
// every agent when agentID is nil), unless it has one already.
func (s *Service) recordMailOptOut(ctx context.Context, tx *ent.Tx, email string, agentID *uuid.UUID, reason mailoptout.Reason) error {
	q := tx.MailOptOut.Query().Where(mailoptout.Email(email))
	if agentID == nil {
		q = q.Where(mailoptout.AgentIDIsNil())
	} else {
		q = q.Where(mailoptout.AgentID(*agentID))
	}
	exists, err := q.Exist(ctx)
	if err != nil {
		return fmt.Errorf("reading mail opt-outs: %w", err)
	}
	if exists {
		return nil
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	if err := tx.MailOptOut.Create().
		SetEmail(email).
		SetNillableAgentID(agentID).
		SetReason(reason).
		SetCreatedAt(now).
		SetUpdatedAt(now).
		Exec(ctx); err != nil {
		return fmt.Errorf("recording mail opt-out: %w", err)
	}
	return nil
}
