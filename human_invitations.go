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
	"agentpay/ent/mailoptout"
	"agentpay/ent/pairing"
	"agentpay/ent/predicate"
	"agentpay/internal/vault"
)

// Invitations bring a person to the app already paired with an agent. An
// agent invites an address (InviteHuman): the e-mail carries
// {app_url}/invite/<token>, where the person signs up (the token proves
// the address: SignUpByInvitation) or signs in, and accepts
// (AcceptInvitation), which makes an approved pairing in the same visit,
// or declines (DeclineInvitation). The agent's own invite code (invite_url
// at registration) is accepted the same way, without an address; it is
// single-use: accepting it gives the agent a new one (GET /agents/me shows
// it) in the same transaction, so a code that leaked pairs one account at
// most, and the agent's owner sees their own attempt fail. Either way,
// when the agent has a human already the pairing waits for that human's
// consent (human_pairings.go).
//
// Only a link received at an address proves it (docs/security.md,
// Identity). The token is a bearer credential (it signs its holder up with
// the address verified, and an address's verified account owns the
// merchants whose confirmed contact e-mail it is), so it is 256 random
// bits, stored hashed, and exists only in the e-mail: the inviting agent
// is answered {app_url}/invite/<invitation id>, a reference that proves
// nothing. Opened, the reference tells the person to use the e-mailed link;
// an account already holding the invited address verified may accept
// through it; nobody signs up with it.
//
// An agent invites an address at most once per UTC day (a unique index
// decides races, so two concurrent invitations send one e-mail, written to
// the outbox in the invitation's own transaction), within the address's
// limits on mail from agents (agent_mail.go); an invitation lapses after
// InvitationTTL.

// InvitationTTL is how long an invitation's link can be accepted.
const InvitationTTL = 7 * 24 * time.Hour

// InvitationView is an invitation as the inviting agent sees it.
type InvitationView struct {
	Invitation *ent.Invitation
	// URL is the invitation's reference page ({app_url}/invite/<id>),
	// which the agent may show the person: it proves nothing, the link
	// that does is only in the e-mail.
	URL     string
	Message string
}

// InviteHuman e-mails an invitation to pair with the agent. An invalid
// address is a ValidationError; a second invitation of the address by the
// agent on the same UTC day is ErrConflict (also when two race); an address
// that opted out of the agent's mail is ErrForbidden, one past the day's
// cap of mail from agents a *RateLimitError (agent_mail.go), and neither
// records anything.
func (s *Service) InviteHuman(ctx context.Context, a *ent.Agent, rawEmail string) (*InvitationView, error) {
	email, err := NormalizeEmail(rawEmail)
	if err != nil {
		return nil, err
	}
	token := vault.InvitationToken.New()
	now := s.now().UTC().Truncate(time.Microsecond)
	day := now.Format(time.DateOnly)
	sentToday := func(ctx context.Context, db *ent.Client) error {
		sent, err := db.Invitation.Query().
			Where(invitation.AgentID(a.ID), invitation.Email(email), invitation.Day(day)).Exist(ctx)
		if err != nil {
			return fmt.Errorf("reading invitations: %w", err)
		}
		if sent {
			return alreadyInvited(email, now)
		}
		return nil
	}
	// The refusals that need no count come first, so a repeated refused
	// invitation does not use up the address's day of mail from agents.
	if err := sentToday(ctx, s.cfg.DB.Ent); err != nil {
		return nil, err
	}
	if out, err := s.agentMailOptedOut(ctx, s.cfg.DB.Ent, a.ID, email, nil); err != nil {
		return nil, err
	} else if out {
		return nil, errAgentMailRefused(email)
	}
	if err := s.allowAgentMail(ctx, email); err != nil {
		return nil, err
	}
	var inv *ent.Invitation
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		// Looked up again so that a joined transaction is not aborted by
		// the failed insert; the unique index decides races.
		if err := sentToday(ctx, tx.Client()); err != nil {
			return err
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
		m := s.invitationMail(a, email, s.invitationURL(token))
		m.ExpiresAt = inv.ExpiresAt
		return s.queueAgentMail(ctx, tx, sqlTx, m)
	})
	if isUniqueViolation(err, "invitation_agent_id_email_day", "invitations.agent_id, invitations.email, invitations.day") {
		return nil, alreadyInvited(email, now)
	}
	if err != nil {
		return nil, fmt.Errorf("inviting: %w", err)
	}
	return &InvitationView{
		Invitation: inv,
		URL:        s.invitationURL(inv.ID.String()),
		Message: fmt.Sprintf("Invitation sent to %s. When they accept from the link in that e-mail, they are paired with %s; the link works for 7 days.",
			email, a.Username),
	}, nil
}

// invitationReference is the invitation id a reference link names (its
// canonical form only), or uuid.Nil.
func invitationReference(token string) uuid.UUID {
	id, err := uuid.Parse(token)
	if err != nil || id.String() != token {
		return uuid.Nil
	}
	return id
}

func alreadyInvited(email string, now time.Time) error {
	next := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	return fmt.Errorf("%w: %s was already invited today; an address can be invited again from %s",
		ErrConflict, email, next.Format(time.RFC3339))
}

// invitationURL is an invitation page: of the e-mailed token, an agent's
// invite code or an invitation's id (its reference).
func (s *Service) invitationURL(token string) string {
	return s.appURL("/invite/" + token)
}

func (s *Service) invitationMail(a *ent.Agent, email, link string) Mail {
	return Mail{
		To:      email,
		Subject: fmt.Sprintf("%s invites you to pair on agentpay", a.Username),
		Text: fmt.Sprintf("The agent %s invites you to agentpay, where you can approve what it does and receive USDC from it.\n\n"+
			"Accept (or decline) within 7 days: %s\n\nIf you were not expecting this, ignore this e-mail: nothing happens unless you accept.\n",
			a.Username, link),
		HTML: fmt.Sprintf(`<p>The agent <b>%s</b> invites you to agentpay, where you can approve what it does and receive USDC from it.</p>`+
			`<p><a href="%s">Accept or decline the invitation</a> within 7 days.</p><p>If you were not expecting this, ignore this e-mail: nothing happens unless you accept.</p>`,
			html.EscapeString(a.Username), html.EscapeString(link)),
	}
}

// InvitationInfo is what an invitation link shows before it is accepted.
type InvitationInfo struct {
	Agent *ent.Agent
	// Invitation is the e-mailed invitation; nil for an agent's invite
	// code.
	Invitation *ent.Invitation
	// Reference: the link is the invitation's reference page (its id, as
	// the agent was answered), not the e-mailed token: it proves nothing.
	Reference bool
}

// Email is the invited address ("" for an agent's invite code).
func (i *InvitationInfo) Email() string {
	if i.Invitation == nil {
		return ""
	}
	return i.Invitation.Email
}

// Invitation reads what a link's token names: an e-mailed invitation
// (inv_...), an invitation's reference (its id) or an agent's invite code.
// An unknown token is ErrNotFound; an expired or declined invitation
// ErrConflict.
func (s *Service) Invitation(ctx context.Context, token string) (*InvitationInfo, error) {
	return s.invitation(ctx, s.cfg.DB.Ent, token)
}

func (s *Service) invitation(ctx context.Context, db *ent.Client, token string) (*InvitationInfo, error) {
	notFound := fmt.Errorf("%w: no such invitation", ErrNotFound)
	emailed := func(where predicate.Invitation, reference bool) (*InvitationInfo, error) {
		inv, err := db.Invitation.Query().Where(where).WithAgent().Only(ctx)
		if ent.IsNotFound(err) {
			return nil, notFound
		}
		if err != nil {
			return nil, fmt.Errorf("reading invitation: %w", err)
		}
		if inv.DeclinedAt != nil {
			return nil, fmt.Errorf("%w: this invitation was declined", ErrConflict)
		}
		if inv.AcceptedAt == nil && !s.now().Before(inv.ExpiresAt) {
			return nil, fmt.Errorf("%w: this invitation expired; ask %s for a new one", ErrConflict, inv.Edges.Agent.Username)
		}
		return &InvitationInfo{Agent: inv.Edges.Agent, Invitation: inv, Reference: reference}, nil
	}
	switch {
	case vault.InvitationToken.Valid(token):
		return emailed(invitation.TokenHash(vault.HashSecret(token)), false)
	case invitationReference(token) != uuid.Nil:
		return emailed(invitation.ID(invitationReference(token)), true)
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
// address, verified (the e-mailed token proves it), accepts the invitation
// and opens a browser session (for userAgent), in one transaction. An
// address that has an account already is ErrConflict (sign in and accept);
// an agent's invite code, or an invitation's reference, is ErrConflict
// (neither proves an address: sign up by e-mail, or open the e-mailed
// link).
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
		if info.Reference {
			return errInvitationReference
		}
		in.Email, in.EmailVerified = info.Invitation.Email, true
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

// errInvitationReference: an invitation's reference page cannot sign
// anyone up.
var errInvitationReference = fmt.Errorf("%w: this page names the invitation but does not prove your address: open the link in the invitation e-mail", ErrConflict)

// AcceptInvitation pairs the user with the inviting agent: approved at
// once when the agent has no other human, else awaiting the consent of one
// of its humans (human_pairings.go); a pending request of that agent is moved
// the same way, an approved or awaiting pairing is answered as it is
// (accepting twice changes nothing). An e-mailed invitation is accepted
// once: by another user it is ErrConflict. Through its reference (the id
// the agent was answered) only an account whose verified address is the
// invited one accepts it; any other is ErrForbidden. An agent's invite
// code is spent: the agent gets a new one, and a code used meanwhile is
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
			if info.Reference && (u.EmailVerifiedAt == nil || u.Email != inv.Email) {
				return fmt.Errorf("%w: this invitation is for another address: open the link in the invitation e-mail", ErrForbidden)
			}
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

// DeclineInvitation declines an e-mailed invitation from its link (the
// token: only the address's mailbox holds it): it can no longer be
// accepted, and the inviting agent can no longer mail the address
// (agent_mail.go: a mail opt-out). Declining twice changes nothing more; an
// accepted invitation, an invitation's reference or an agent's invite code
// is ErrConflict; an unknown token ErrNotFound.
func (s *Service) DeclineInvitation(ctx context.Context, token string) (*InvitationInfo, error) {
	if !vault.InvitationToken.Valid(token) {
		if _, err := s.Invitation(ctx, token); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: only the link in the invitation e-mail declines it", ErrConflict)
	}
	var info *InvitationInfo
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		inv, err := tx.Invitation.Query().
			Where(invitation.TokenHash(vault.HashSecret(token))).WithAgent().Only(ctx)
		if ent.IsNotFound(err) {
			return fmt.Errorf("%w: no such invitation", ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("reading invitation: %w", err)
		}
		info = &InvitationInfo{Agent: inv.Edges.Agent, Invitation: inv}
		if inv.AcceptedAt != nil {
			return fmt.Errorf("%w: this invitation was accepted already", ErrConflict)
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if inv.DeclinedAt == nil {
			// Expired or not: declining says the address wants none of it.
			if err := tx.Invitation.UpdateOneID(inv.ID).SetDeclinedAt(now).SetUpdatedAt(now).Exec(ctx); err != nil {
				return fmt.Errorf("declining invitation: %w", err)
			}
		}
		return s.recordMailOptOut(ctx, tx, inv.Email, &inv.AgentID, mailoptout.ReasonDeclined)
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}
