package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"html"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/pairing"
	"agentpay/ent/predicate"
	"agentpay/ent/user"
)

// Pairings link an agent with a human user (design.md section 6):
//
//	pending -> approved | awaiting_consent | denied | expired
//	                              (the user decides; a request lapses after
//	                              PairingRequestTTL)
//	awaiting_consent -> approved | denied | expired
//	                              (one of the agent's humans decides)
//	approved, pending, awaiting_consent -> revoked
//	                              (the user revokes an approved one; the
//	                              agent any of its own, at any time)
//
// An agent requests (RequestPairing); accepting an agent's invitation
// approves at once (AcceptInvitation). Consent: a pairing that would make
// a second human of an agent that has one waits for the consent of one of
// the humans it has (any one: each of them could already do anything the
// newcomer could), so a stranger holding the agent's invite code or a
// forwarded invitation cannot join and, with a policy of their own,
// freeze the agent (a per-payment cap of 0.000001). A newcomer let in can
// neither loosen another's policy (the strictest outcome wins) nor decide
// what another's policy holds (agent_spend_approvals.go). Each move happens at
// most once (a conditional update decides races; approvals of one agent's
// pairings are serialised, so two newcomers at once cannot both be its
// first human), and each tells the other parties (an account event, and
// an e-mail for a request or a consent). "expired" is never stored: a
// pending or awaiting_consent pairing past its expires_at reads as
// expired (pairingStatus), so no job must run for it. An agent has at
// most one pending, awaiting_consent or approved pairing with a user.

// PairingRequestTTL is how long a pairing request waits for the user.
const PairingRequestTTL = 7 * 24 * time.Hour

// PairingMessageMaxLen bounds a pairing request's message (characters).
const PairingMessageMaxLen = 500

// MaxPairingsListed is the most pairings a list answers (newest first).
const MaxPairingsListed = 500

// Pairing statuses as shown.
const (
	PairingPending         = "pending"
	PairingApproved        = "approved"
	PairingDenied          = "denied"
	PairingRevoked         = "revoked"
	PairingExpired         = "expired"
	PairingAwaitingConsent = "awaiting_consent"
)

// pairingStatus is a pairing's status at now: a pending or
// awaiting_consent one past its expires_at is expired. (Times are written at microsecond precision, as
// PostgreSQL keeps them: it rounds, so a nanosecond deadline could read back
// later than it was.)
func pairingStatus(p *ent.Pairing, now time.Time) string {
	if (p.Status == pairing.StatusPending || p.Status == pairing.StatusAwaitingConsent) && p.ExpiresAt != nil && !now.Before(*p.ExpiresAt) {
		return PairingExpired
	}
	return string(p.Status)
}

// PairingView is a pairing with both parties, as either side reads it.
type PairingView struct {
	Pairing *ent.Pairing
	// Status is the pairing's status now (pairingStatus).
	Status string
	User   *ent.User
	Agent  *ent.Agent
}

// KYCVerified reports whether the paired user completed identity
// verification.
func (v *PairingView) KYCVerified() bool {
	return v.User.IdentityStatus == user.IdentityStatusVerified
}

// PairingRequest is an agent's request to pair with a user.
type PairingRequest struct {
	UserID  string
	Message string
}

// RequestPairing asks a user to pair with the agent: a pending pairing
// that expires after PairingRequestTTL, the user told by an account event
// and, within the limits on mail from agents (agent_mail.go: the address's
// day's cap, its opt-outs, a request of this agent it denied), an e-mail,
// in the same transaction. A malformed user id or a message
// over PairingMessageMaxLen characters is a ValidationError; an unknown
// user ErrNotFound; a pending or approved pairing with the user already
// ErrConflict, also when two requests race.
func (s *Service) RequestPairing(ctx context.Context, a *ent.Agent, in PairingRequest) (*PairingView, error) {
	if strings.TrimSpace(in.UserID) == "" {
		return nil, Invalid("user_id", "is required")
	}
	userID, err := uuid.Parse(in.UserID)
	if err != nil {
		return nil, Invalid("user_id", "must be a uuid")
	}
	if !utf8.ValidString(in.Message) || utf8.RuneCountInString(in.Message) > PairingMessageMaxLen {
		return nil, Invalid("message", "must be at most %d characters of valid UTF-8", PairingMessageMaxLen)
	}
	u, err := s.cfg.DB.Ent.User.Get(ctx, userID)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: no user with id %s", ErrNotFound, userID)
	}
	if err != nil {
		return nil, fmt.Errorf("reading user: %w", err)
	}
	mailIt, err := s.mayMailPairingRequest(ctx, a, u)
	if err != nil {
		return nil, err
	}
	var p *ent.Pairing
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		if err := s.lockPairingsOf(ctx, sqlTx, a.ID, u.ID); err != nil {
			return err
		}
		if live, err := s.livePairing(ctx, tx.Client(), a.ID, u.ID, now); err != nil {
			return err
		} else if live != nil {
			return fmt.Errorf("%w: a %s pairing with %s exists (pairing_id %s)",
				ErrConflict, pairingStatus(live, now), u.Username, live.ID)
		}
		expires := now.Add(PairingRequestTTL)
		p, err = tx.Pairing.Create().
			SetAgentID(a.ID).
			SetUserID(u.ID).
			SetStatus(pairing.StatusPending).
			SetMessage(in.Message).
			SetExpiresAt(expires).
			SetCreatedAt(now).
			SetUpdatedAt(now).
			Save(ctx)
		if err != nil {
			return fmt.Errorf("recording pairing: %w", err)
		}
		if err := s.recordAccountEvent(ctx, tx, sqlTx, UserParty(u.ID), EventPairingRequested, pairingEventData{
			PairingID: p.ID, AgentID: a.ID, AgentUsername: a.Username, Message: in.Message, ExpiresAt: &expires,
		}); err != nil {
			return err
		}
		if !mailIt {
			return nil
		}
		return s.queueAgentMail(ctx, tx, sqlTx, s.pairingRequestMail(u, a, in.Message))
	})
	if err != nil {
		return nil, err
	}
	return &PairingView{Pairing: p, Status: PairingPending, User: u, Agent: a}, nil
}

// pairingEventData is the data of the pairing events.
type pairingEventData struct {
	PairingID     uuid.UUID  `json:"pairing_id"`
	AgentID       uuid.UUID  `json:"agent_id"`
	AgentUsername string     `json:"agent_username,omitempty"`
	UserID        *uuid.UUID `json:"user_id,omitempty"`
	Username      string     `json:"username,omitempty"`
	Status        string     `json:"status,omitempty"`
	Message       string     `json:"message,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
}

func (s *Service) pairingRequestMail(u *ent.User, a *ent.Agent, message string) Mail {
	// The home page's pairing requests (a page of its own never existed:
	// every mail's links are followed by TestEveryMailLinkOpensAPage).
	link := s.appURL("/#pairings")
	text := fmt.Sprintf("The agent %s asks to pair with your account %s.\n", a.Username, u.Username)
	if message != "" {
		text += fmt.Sprintf("\nIts message: %s\n", message)
	}
	text += fmt.Sprintf("\nApprove or deny it within 7 days: %s\n\nIf you do nothing, nothing changes.\n", link)
	return Mail{
		To:      u.Email,
		Subject: fmt.Sprintf("%s asks to pair with you", a.Username),
		Text:    text,
		HTML: fmt.Sprintf(`<p>The agent <b>%s</b> asks to pair with your account <b>%s</b>.</p>%s<p><a href="%s">Approve or deny it</a> within 7 days.</p><p>If you do nothing, nothing changes.</p>`,
			html.EscapeString(a.Username), html.EscapeString(u.Username), quoteHTML(message), html.EscapeString(link)),
	}
}

func quoteHTML(message string) string {
	if message == "" {
		return ""
	}
	return "<blockquote>" + html.EscapeString(message) + "</blockquote>"
}

// appURL is a page of the human app.
func (s *Service) appURL(path string) string {
	return strings.TrimRight(s.cfg.AppURL, "/") + path
}

// lockPairingsOf serialises the pairing changes of one agent and user (a
// transaction advisory lock on PostgreSQL; SQLite's single writer), so the
// "at most one pending or approved" check and the insert are one step.
func (s *Service) lockPairingsOf(ctx context.Context, sqlTx *sql.Tx, agentID, userID uuid.UUID) error {
	if !s.cfg.DB.IsPostgres() {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte("agentpay pairing "))
	h.Write(agentID[:])
	h.Write(userID[:])
	if _, err := sqlTx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		return fmt.Errorf("locking pairings: %w", err)
	}
	return nil
}

// pairedWith reports whether the user has an approved pairing with the
// agent: the one test of "this human speaks for this agent" that approvals,
// card requests, consent and spending policies ask (db: the transaction's
// client where the answer must hold for the rest of it).
func pairedWith(ctx context.Context, db *ent.Client, agentID, userID uuid.UUID) (bool, error) {
	ok, err := db.Pairing.Query().Where(pairing.AgentID(agentID), pairing.UserID(userID),
		pairing.StatusEQ(pairing.StatusApproved)).Exist(ctx)
	if err != nil {
		return false, fmt.Errorf("reading pairing: %w", err)
	}
	return ok, nil
}

// livePairing is the agent's pending or awaiting_consent (not expired) or
// approved pairing with the user, or nil.
func (s *Service) livePairing(ctx context.Context, db *ent.Client, agentID, userID uuid.UUID, now time.Time) (*ent.Pairing, error) {
	p, err := db.Pairing.Query().
		Where(pairing.AgentID(agentID), pairing.UserID(userID), pairing.Or(
			pairing.StatusEQ(pairing.StatusApproved),
			pairing.And(pairing.StatusIn(pairing.StatusPending, pairing.StatusAwaitingConsent), pairing.ExpiresAtGT(now)),
		)).
		Order(ent.Desc(pairing.FieldCreatedAt)).
		First(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading pairings: %w", err)
	}
	return p, nil
}

// AgentPairings lists the agent's pairings, newest first (at most
// MaxPairingsListed), with their users.
func (s *Service) AgentPairings(ctx context.Context, a *ent.Agent) ([]*PairingView, error) {
	withUser := func(q *ent.PairingQuery) *ent.PairingQuery { return q.WithUser() }
	return s.listPairings(ctx, pairing.AgentID(a.ID), withUser, func(p *ent.Pairing) (*ent.User, *ent.Agent) {
		return p.Edges.User, a
	})
}

// UserPairings lists the user's pairings, newest first (at most
// MaxPairingsListed), with their agents.
func (s *Service) UserPairings(ctx context.Context, u *ent.User) ([]*PairingView, error) {
	withAgent := func(q *ent.PairingQuery) *ent.PairingQuery { return q.WithAgent() }
	return s.listPairings(ctx, pairing.UserID(u.ID), withAgent, func(p *ent.Pairing) (*ent.User, *ent.Agent) {
		return u, p.Edges.Agent
	})
}

// listPairings reads one party's pairings with the other party's edge
// (with) and makes their views (parties names both sides of each).
func (s *Service) listPairings(ctx context.Context, of predicate.Pairing,
	with func(*ent.PairingQuery) *ent.PairingQuery,
	parties func(*ent.Pairing) (*ent.User, *ent.Agent),
) ([]*PairingView, error) {
	ps, err := with(s.cfg.DB.Ent.Pairing.Query().Where(of)).
		Order(ent.Desc(pairing.FieldCreatedAt), ent.Desc(pairing.FieldID)).
		Limit(MaxPairingsListed).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading pairings: %w", err)
	}
	now := s.now()
	out := make([]*PairingView, len(ps))
	for i, p := range ps {
		u, a := parties(p)
		out[i] = &PairingView{Pairing: p, Status: pairingStatus(p, now), User: u, Agent: a}
	}
	return out, nil
}

// PairingDecision is what a user does with a pairing.
type PairingDecision string

// The user's moves.
const (
	ApprovePairing PairingDecision = "approve"
	DenyPairing    PairingDecision = "deny"
	RevokePairing  PairingDecision = "revoke"
)

// pairingMoves: from which stored status each move goes, to which status,
// and the event it tells the agent.
var pairingMoves = map[PairingDecision]struct {
	from, to pairing.Status
	event    string
}{
	ApprovePairing: {pairing.StatusPending, pairing.StatusApproved, EventPairingApproved},
	DenyPairing:    {pairing.StatusPending, pairing.StatusDenied, EventPairingDenied},
	RevokePairing:  {pairing.StatusApproved, pairing.StatusRevoked, EventPairingRevoked},
}

// DecidePairing moves one of the user's pairings: approve or deny a
// pending one (not expired), revoke an approved one. Approving makes it
// approved, or awaiting_consent when the agent has another human
// (joinAgent). Another user's pairing, or an unknown id, is ErrNotFound; a
// pairing not in the move's status (decided already, expired, revoked) is
// ErrConflict naming its status. The agent is told by an account event in
// the same transaction, and its trust follows at once (a pairing with an
// identity-verified user counts).
func (s *Service) DecidePairing(ctx context.Context, u *ent.User, pairingID string, decision PairingDecision) (*PairingView, error) {
	move, ok := pairingMoves[decision]
	if !ok {
		return nil, Invalid("decision", "must be approve, deny or revoke")
	}
	id, err := uuid.Parse(pairingID)
	if err != nil {
		return nil, fmt.Errorf("%w: no pairing with id %q", ErrNotFound, pairingID)
	}
	var p *ent.Pairing
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		cur, err := tx.Pairing.Query().Where(pairing.ID(id), pairing.UserID(u.ID)).Only(ctx)
		if ent.IsNotFound(err) {
			return fmt.Errorf("%w: no pairing with id %s", ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("reading pairing: %w", err)
		}
		to, event := move.to, move.event
		if decision == ApprovePairing {
			if err := s.lockAgentPairings(ctx, sqlTx, cur.AgentID); err != nil {
				return err
			}
			if to, err = s.joinStatus(ctx, tx.Client(), cur.AgentID, u.ID); err != nil {
				return err
			}
		}
		q := tx.Pairing.Update().
			Where(pairing.ID(id), pairing.UserID(u.ID), pairing.StatusEQ(move.from)).
			SetStatus(to).
			SetUpdatedAt(now)
		switch {
		case to == pairing.StatusAwaitingConsent:
			q = q.Where(pairing.ExpiresAtGT(now)).SetDecidedAt(now).SetExpiresAt(now.Add(PairingRequestTTL))
		case move.from == pairing.StatusPending:
			q = q.Where(pairing.ExpiresAtGT(now)).SetDecidedAt(now).ClearExpiresAt()
		default:
			q = q.SetDecidedAt(now)
		}
		n, err := q.Save(ctx)
		if err != nil {
			return fmt.Errorf("deciding pairing: %w", err)
		}
		if p, err = tx.Pairing.Get(ctx, id); err != nil {
			return fmt.Errorf("reading pairing: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: the pairing is %s; only a %s pairing can be %s",
				ErrConflict, pairingStatus(p, now), move.from, move.to)
		}
		if to == pairing.StatusAwaitingConsent {
			a, err := tx.Agent.Get(ctx, p.AgentID)
			if err != nil {
				return err
			}
			return s.askConsent(ctx, tx, sqlTx, p, a, u)
		}
		if err := s.refreshHumanVerified(ctx, tx, p.AgentID); err != nil {
			return err
		}
		uid := u.ID
		return s.recordAccountEvent(ctx, tx, sqlTx, AgentParty(p.AgentID), event, pairingEventData{
			PairingID: p.ID, AgentID: p.AgentID, UserID: &uid, Username: u.Username, Status: string(to),
		})
	})
	if err != nil {
		return nil, err
	}
	// The trust score after the commit, as after transfers (completeTransfer
	// says why); idempotent, and any profile read catches up after a crash.
	if err := s.RecomputeTrust(ctx, p.AgentID); err != nil {
		s.logger.WarnContext(ctx, "recompute trust after pairing", "agent", p.AgentID, "err", err)
	}
	a, err := s.cfg.DB.Ent.Agent.Get(ctx, p.AgentID)
	if err != nil {
		return nil, fmt.Errorf("reading agent: %w", err)
	}
	return &PairingView{Pairing: p, Status: pairingStatus(p, s.now()), User: u, Agent: a}, nil
}

// RevokeAgentPairing is the agent ending one of its pairings (approved,
// pending or awaiting consent): the human's policies stop applying and
// they stop deciding at once. Another agent's pairing, or an unknown id,
// is ErrNotFound; one already ended ErrConflict. The human is told (an
// account event) in the same transaction.
func (s *Service) RevokeAgentPairing(ctx context.Context, a *ent.Agent, pairingID string) (*PairingView, error) {
	notFound := fmt.Errorf("%w: no pairing with id %q", ErrNotFound, pairingID)
	id, err := uuid.Parse(pairingID)
	if err != nil {
		return nil, notFound
	}
	var p *ent.Pairing
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		n, err := tx.Pairing.Update().Where(pairing.ID(id), pairing.AgentID(a.ID), pairing.Or(
			pairing.StatusEQ(pairing.StatusApproved),
			pairing.And(pairing.StatusIn(pairing.StatusPending, pairing.StatusAwaitingConsent), pairing.ExpiresAtGT(now)),
		)).SetStatus(pairing.StatusRevoked).SetDecidedAt(now).ClearExpiresAt().SetUpdatedAt(now).Save(ctx)
		if err != nil {
			return fmt.Errorf("revoking pairing: %w", err)
		}
		p, err = tx.Pairing.Query().Where(pairing.ID(id), pairing.AgentID(a.ID)).WithUser().Only(ctx)
		if ent.IsNotFound(err) {
			return notFound
		}
		if err != nil {
			return fmt.Errorf("reading pairing: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: the pairing is %s; only an approved, pending or awaiting_consent pairing can be revoked",
				ErrConflict, pairingStatus(p, now))
		}
		if err := s.refreshHumanVerified(ctx, tx, a.ID); err != nil {
			return err
		}
		uid := p.UserID
		data := pairingEventData{PairingID: p.ID, AgentID: a.ID, AgentUsername: a.Username, UserID: &uid,
			Username: p.Edges.User.Username, Status: PairingRevoked}
		if err := s.recordAccountEvent(ctx, tx, sqlTx, AgentParty(a.ID), EventPairingRevoked, data); err != nil {
			return err
		}
		return s.recordAccountEvent(ctx, tx, sqlTx, UserParty(p.UserID), EventPairingRevoked, data)
	})
	if err != nil {
		return nil, err
	}
	if err := s.RecomputeTrust(ctx, a.ID); err != nil {
		s.logger.WarnContext(ctx, "recompute trust after revoke", "agent", a.ID, "err", err)
	}
	return &PairingView{Pairing: p, Status: PairingRevoked, User: p.Edges.User, Agent: a}, nil
}

// refreshHumanVerified sets the agent's human_verified trust input: it has
// an approved pairing with a user who completed identity verification.
func (s *Service) refreshHumanVerified(ctx context.Context, tx *ent.Tx, agentID uuid.UUID) error {
	verified, err := tx.Pairing.Query().
		Where(pairing.AgentID(agentID), pairing.StatusEQ(pairing.StatusApproved),
			pairing.HasUserWith(user.IdentityStatusEQ(user.IdentityStatusVerified))).
		Exist(ctx)
	if err != nil {
		return fmt.Errorf("reading verified pairings: %w", err)
	}
	if err := tx.Agent.Update().Where(agent.ID(agentID), agent.HumanVerified(!verified)).
		SetHumanVerified(verified).Exec(ctx); err != nil {
		return fmt.Errorf("storing human_verified: %w", err)
	}
	return nil
}
