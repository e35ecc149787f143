package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"html"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/invitation"
	"agentpay/ent/pairing"
	"agentpay/internal/vault"
)

// Invitations bring a person to the app already paired with an agent. An
// agent invites an address (InviteHuman): the e-mail carries
// {app_url}/invite/<token>, where the person signs up (the token proves
// the address: SignUpByInvitation) or signs in, and accepts
// (AcceptInvitation), which makes an approved pairing in the same visit.
// The agent's own invite code (invite_url at registration) is accepted the
// same way, without an address; it is single-use: accepting it gives the
// agent a new one (GET /agents/me shows it) in the same transaction, so a
// code that leaked pairs one account at most, and the agent's owner sees
// their own attempt fail. Either way, when the agent has a human already
// the pairing waits for that human's consent (pairings.go).
//
// The token is a bearer credential (it signs its holder up with the
// address), so it is 256 random bits, stored hashed, shown only in the
// e-mail and to the inviting agent. An agent invites an address at most
// once per UTC day (a unique index decides races, so two concurrent
// invitations send one e-mail, written to the outbox in the invitation's
// own transaction); an invitation lapses after InvitationTTL.

// InvitationTTL is how long an invitation's link can be accepted.
const InvitationTTL = 7 * 24 * time.Hour

// InvitationView is an invitation as the inviting agent sees it once.
type InvitationView struct {
	Invitation *ent.Invitation
	// URL is the link the e-mail carries ({app_url}/invite/<token>).
	URL     string
	Message string
}

// InviteHuman e-mails an invitation to pair with the agent. An invalid
// address is a ValidationError; a second invitation of the address by the
// agent on the same UTC day is ErrConflict (also when two race).
func (s *Service) InviteHuman(ctx context.Context, a *ent.Agent, rawEmail string) (*InvitationView, error) {
	email, err := NormalizeEmail(rawEmail)
	if err != nil {
		return nil, err
	}
	token := vault.InvitationToken.New()
	now := s.now().UTC().Truncate(time.Microsecond)
	day := now.Format(time.DateOnly)
	var inv *ent.Invitation
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		// Looked up first so that a joined transaction is not aborted by
		// the failed insert; the unique index decides races.
		sent, err := tx.Invitation.Query().
			Where(invitation.AgentID(a.ID), invitation.Email(email), invitation.Day(day)).Exist(ctx)
		if err != nil {
			return fmt.Errorf("reading invitations: %w", err)
		}
		if sent {
			return alreadyInvited(email, now)
		}
		inv, err = tx.Invitation.Create().
			SetAgentID(a.ID).
			SetEmail(email).
			SetDay(day).
			SetTokenHash(vault.HashSecret(token)).
			SetExpiresAt(now.Add(InvitationTTL)).
			SetCreatedAt(now).
			SetUpdatedAt(now).
			Save(ctx)
		if err != nil {
			return err
		}
		_, err = s.queueMail(ctx, tx, sqlTx, s.invitationMail(a, email, s.invitationURL(token)))
		return err
	})
	if isUniqueViolation(err, "invitation_agent_id_email_day", "invitations.agent_id, invitations.email, invitations.day") {
		return nil, alreadyInvited(email, now)
	}
	if err != nil {
		return nil, fmt.Errorf("inviting: %w", err)
	}
	return &InvitationView{
		Invitation: inv,
		URL:        s.invitationURL(token),
		Message: fmt.Sprintf("Invitation sent to %s. When they accept, they are paired with %s; the link works for 7 days.",
			email, a.Username),
	}, nil
}

func alreadyInvited(email string, now time.Time) error {
	next := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	return fmt.Errorf("%w: %s was already invited today; an address can be invited again from %s",
		ErrConflict, email, next.Format(time.RFC3339))
}

func (s *Service) invitationURL(token string) string {
	return s.appURL("/invite/" + token)
}

func (s *Service) invitationMail(a *ent.Agent, email, link string) Mail {
	return Mail{
		To:      email,
		Subject: fmt.Sprintf("%s invites you to pair on agentpay", a.Username),
		Text: fmt.Sprintf("The agent %s invites you to agentpay, where you can approve what it does and receive USDC from it.\n\n"+
			"Accept within 7 days: %s\n\nIf you were not expecting this, ignore this e-mail: nothing happens unless you accept.\n",
			a.Username, link),
		HTML: fmt.Sprintf(`<p>The agent <b>%s</b> invites you to agentpay, where you can approve what it does and receive USDC from it.</p>`+
			`<p><a href="%s">Accept the invitation</a> within 7 days.</p><p>If you were not expecting this, ignore this e-mail: nothing happens unless you accept.</p>`,
			html.EscapeString(a.Username), html.EscapeString(link)),
	}
}

// InvitationInfo is what an invitation link shows before it is accepted.
type InvitationInfo struct {
	Agent *ent.Agent
	// Invitation is the e-mailed invitation; nil for an agent's invite
	// code.
	Invitation *ent.Invitation
}

// Email is the invited address ("" for an agent's invite code).
func (i *InvitationInfo) Email() string {
	if i.Invitation == nil {
		return ""
	}
	return i.Invitation.Email
}

// Invitation reads what a link's token names: an e-mailed invitation
// (inv_...) or an agent's invite code. An unknown token is ErrNotFound;
// an expired invitation ErrConflict.
func (s *Service) Invitation(ctx context.Context, token string) (*InvitationInfo, error) {
	return s.invitation(ctx, s.cfg.DB.Ent, token)
}

func (s *Service) invitation(ctx context.Context, db *ent.Client, token string) (*InvitationInfo, error) {
	notFound := fmt.Errorf("%w: no such invitation", ErrNotFound)
	switch {
	case vault.InvitationToken.Valid(token):
		inv, err := db.Invitation.Query().
			Where(invitation.TokenHash(vault.HashSecret(token))).WithAgent().Only(ctx)
		if ent.IsNotFound(err) {
			return nil, notFound
		}
		if err != nil {
			return nil, fmt.Errorf("reading invitation: %w", err)
		}
		if inv.AcceptedAt == nil && !s.now().Before(inv.ExpiresAt) {
			return nil, fmt.Errorf("%w: this invitation expired; ask %s for a new one", ErrConflict, inv.Edges.Agent.Username)
		}
		return &InvitationInfo{Agent: inv.Edges.Agent, Invitation: inv}, nil
	case vault.InviteCode.Valid(token):
		a, err := db.Agent.Query().Where(agent.InviteCode(token)).Only(ctx)
		if ent.IsNotFound(err) {
			return nil, notFound
		}
		if err != nil {
			return nil, fmt.Errorf("reading agent: %w", err)
		}
		return &InvitationInfo{Agent: a}, nil
	}
	return nil, notFound
}

// SignUpByInvitation creates the account of an e-mailed invitation's
// address (the token proves it), accepts the invitation and opens a browser
// session (for userAgent), in one transaction. An address that has an
// account already is ErrConflict (sign in and accept); an agent's invite
// code is ErrConflict (it has no address to prove: sign up by e-mail
// first).
func (s *Service) SignUpByInvitation(ctx context.Context, token string, in NewUser, userAgent string) (*SignIn, *PairingView, error) {
	var (
		out  SignIn
		view *PairingView
	)
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		info, err := s.invitation(ctx, tx.Client(), token)
		if err != nil {
			return err
		}
		if info.Invitation == nil {
			return fmt.Errorf("%w: this link has no e-mail address: sign up with your address first, then open it again", ErrConflict)
		}
		in.Email = info.Invitation.Email
		if out.User, err = s.CreateUser(ctx, in); err != nil {
			return err
		}
		if view, err = s.AcceptInvitation(ctx, out.User, token); err != nil {
			return err
		}
		out.Session, out.SessionToken, err = s.openBrowserSession(ctx, tx, out.User, userAgent, s.now().UTC().Truncate(time.Microsecond))
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return &out, view, nil
}

// AcceptInvitation pairs the user with the inviting agent: approved at
// once when the agent has no other human, else awaiting the consent of one
// of its humans (pairings.go); a pending request of that agent is moved
// the same way, an approved or awaiting pairing is answered as it is
// (accepting twice changes nothing). An e-mailed invitation is accepted
// once: by another user it is ErrConflict. An agent's invite code is
// spent: the agent gets a new one, and a code used meanwhile is
// ErrNotFound.
func (s *Service) AcceptInvitation(ctx context.Context, u *ent.User, token string) (*PairingView, error) {
	var view *PairingView
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		info, err := s.invitation(ctx, tx.Client(), token)
		if err != nil {
			return err
		}
		a := info.Agent
		now := s.now().UTC().Truncate(time.Microsecond)
		var invitationID *uuid.UUID
		if inv := info.Invitation; inv != nil {
			invitationID = &inv.ID
			// The conditional update decides two accepting at once.
			n, err := tx.Invitation.Update().
				Where(invitation.ID(inv.ID), invitation.Or(invitation.AcceptedByIsNil(), invitation.AcceptedBy(u.ID))).
				SetAcceptedAt(now).
				SetAcceptedBy(u.ID).
				SetUpdatedAt(now).
				Save(ctx)
			if err != nil {
				return fmt.Errorf("accepting invitation: %w", err)
			}
			if n == 0 {
				return fmt.Errorf("%w: this invitation was accepted by another account", ErrConflict)
			}
		}
		if err := s.lockAgentPairings(ctx, sqlTx, a.ID); err != nil {
			return err
		}
		if err := s.lockPairingsOf(ctx, sqlTx, a.ID, u.ID); err != nil {
			return err
		}
		live, err := s.livePairing(ctx, tx.Client(), a.ID, u.ID, now)
		if err != nil {
			return err
		}
		if live != nil && live.Status != pairing.StatusPending {
			// Approved, or awaiting consent: nothing changes.
			view = &PairingView{Pairing: live, Status: string(live.Status), User: u, Agent: a}
			return nil
		}
		if info.Invitation == nil {
			// The code is spent: the agent gets a new one. Conditional, so
			// of two accepting one code at once one pairs.
			n, err := tx.Agent.Update().Where(agent.ID(a.ID), agent.InviteCode(token)).
				SetInviteCode(vault.InviteCode.New()).SetUpdatedAt(now).Save(ctx)
			if err != nil {
				return fmt.Errorf("renewing invite code: %w", err)
			}
			if n == 0 {
				return fmt.Errorf("%w: no such invitation", ErrNotFound)
			}
		}
		status, err := s.joinStatus(ctx, tx.Client(), a.ID, u.ID)
		if err != nil {
			return err
		}
		var expires *time.Time
		if status == pairing.StatusAwaitingConsent {
			e := now.Add(PairingRequestTTL)
			expires = &e
		}
		var p *ent.Pairing
		if live != nil { // pending: accepting the invitation says yes to it
			up := live.Update().SetStatus(status).SetDecidedAt(now).SetUpdatedAt(now)
			if expires != nil {
				up.SetExpiresAt(*expires)
			} else {
				up.ClearExpiresAt()
			}
			p, err = up.Save(ctx)
		} else {
			p, err = tx.Pairing.Create().
				SetAgentID(a.ID).
				SetUserID(u.ID).
				SetStatus(status).
				SetDecidedAt(now).
				SetNillableExpiresAt(expires).
				SetNillableInvitationID(invitationID).
				SetMessage("").
				SetCreatedAt(now).
				SetUpdatedAt(now).
				Save(ctx)
		}
		if err != nil {
			return fmt.Errorf("recording pairing: %w", err)
		}
		view = &PairingView{Pairing: p, Status: string(status), User: u, Agent: a}
		if status == pairing.StatusAwaitingConsent {
			return s.askConsent(ctx, tx, sqlTx, p, a, u)
		}
		if err := s.refreshHumanVerified(ctx, tx, a.ID); err != nil {
			return err
		}
		uid := u.ID
		return s.recordAccountEvent(ctx, tx, sqlTx, AgentParty(a.ID), EventPairingApproved, pairingEventData{
			PairingID: p.ID, AgentID: a.ID, UserID: &uid, Username: u.Username, Status: PairingApproved,
		})
	})
	if err != nil {
		return nil, err
	}
	if err := s.RecomputeTrust(ctx, view.Agent.ID); err != nil {
		s.logger.WarnContext(ctx, "recompute trust after invitation", "agent", view.Agent.ID, "err", err)
	}
	return view, nil
}
