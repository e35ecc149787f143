package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"html"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/pairing"
)

// lockAgentPairings serialises the approvals of one agent's pairings (a
// transaction advisory lock on PostgreSQL; SQLite's single writer), so
// whether the agent has a human already is read and acted on in one step.
func (s *Service) lockAgentPairings(ctx context.Context, sqlTx *sql.Tx, agentID uuid.UUID) error {
	if !s.cfg.DB.IsPostgres() {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte("agentpay agent pairings "))
	h.Write(agentID[:])
	if _, err := sqlTx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		return fmt.Errorf("locking pairings: %w", err)
	}
	return nil
}

// joinStatus is what a pairing of userID with the agent becomes when the
// user says yes: approved when the agent has no other human, else
// awaiting_consent. Run under lockAgentPairings.
func (s *Service) joinStatus(ctx context.Context, db *ent.Client, agentID, userID uuid.UUID) (pairing.Status, error) {
	others, err := db.Pairing.Query().Where(pairing.AgentID(agentID), pairing.StatusEQ(pairing.StatusApproved),
		pairing.UserIDNEQ(userID)).Exist(ctx)
	if err != nil {
		return "", fmt.Errorf("reading pairings: %w", err)
	}
	if others {
		return pairing.StatusAwaitingConsent, nil
	}
	return pairing.StatusApproved, nil
}

// askConsent tells the agent its pairing p with newcomer waits for
// consent, and asks each of the agent's humans for it (an account event
// and an e-mail), in tx.
func (s *Service) askConsent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, p *ent.Pairing, a *ent.Agent, newcomer *ent.User) error {
	uid := newcomer.ID
	if err := s.recordAccountEvent(ctx, tx, sqlTx, AgentParty(a.ID), EventPairingAwaitingConsent, pairingEventData{
		PairingID: p.ID, AgentID: a.ID, UserID: &uid, Username: newcomer.Username, Status: PairingAwaitingConsent, ExpiresAt: p.ExpiresAt,
	}); err != nil {
		return err
	}
	humans, err := tx.Pairing.Query().Where(pairing.AgentID(a.ID), pairing.StatusEQ(pairing.StatusApproved),
		pairing.UserIDNEQ(newcomer.ID)).WithUser().All(ctx)
	if err != nil {
		return fmt.Errorf("reading pairings: %w", err)
	}
	for _, h := range humans {
		if err := s.recordAccountEvent(ctx, tx, sqlTx, UserParty(h.UserID), EventPairingConsentRequested, pairingEventData{
			PairingID: p.ID, AgentID: a.ID, AgentUsername: a.Username, UserID: &uid, Username: newcomer.Username,
			Status: PairingAwaitingConsent, ExpiresAt: p.ExpiresAt,
		}); err != nil {
			return err
		}
		if _, err := s.queueMail(ctx, tx, sqlTx, s.consentMail(h.Edges.User, a, newcomer)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) consentMail(to *ent.User, a *ent.Agent, newcomer *ent.User) Mail {
	link := s.appURL("/#consents")
	return Mail{
		To:      to.Email,
		Subject: fmt.Sprintf("%s asks to pair with your agent %s", newcomer.Username, a.Username),
		Text: fmt.Sprintf("The account %s asks to pair with the agent %s, which you are paired with.\n\n"+
			"Paired, they could set a spending policy of their own on it (a stricter one binds) and decide what their policy holds.\n\n"+
			"Allow or refuse it within 7 days: %s\n\nIf you do nothing, it lapses and nothing changes.\n",
			newcomer.Username, a.Username, link),
		HTML: fmt.Sprintf(`<p>The account <b>%s</b> asks to pair with the agent <b>%s</b>, which you are paired with.</p>`+
			`<p>Paired, they could set a spending policy of their own on it (a stricter one binds) and decide what their policy holds.</p>`+
			`<p><a href="%s">Allow or refuse it</a> within 7 days.</p><p>If you do nothing, it lapses and nothing changes.</p>`,
			html.EscapeString(newcomer.Username), html.EscapeString(a.Username), html.EscapeString(link)),
	}
}

// PairingConsentRequests lists the pairings awaiting the user's consent:
// newcomers to agents the user is paired with (not expired), newest first.
func (s *Service) PairingConsentRequests(ctx context.Context, u *ent.User) ([]*PairingView, error) {
	agents, err := s.cfg.DB.Ent.Pairing.Query().Where(pairing.UserID(u.ID), pairing.StatusEQ(pairing.StatusApproved)).
		Select(pairing.FieldAgentID).Strings(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading pairings: %w", err)
	}
	if len(agents) == 0 {
		return []*PairingView{}, nil
	}
	ids := make([]uuid.UUID, len(agents))
	for i, a := range agents {
		ids[i] = uuid.MustParse(a)
	}
	now := s.now().UTC()
	ps, err := s.cfg.DB.Ent.Pairing.Query().Where(pairing.AgentIDIn(ids...), pairing.UserIDNEQ(u.ID),
		pairing.StatusEQ(pairing.StatusAwaitingConsent), pairing.ExpiresAtGT(now)).
		WithAgent().WithUser().Order(ent.Desc(pairing.FieldCreatedAt), ent.Desc(pairing.FieldID)).
		Limit(MaxPairingsListed).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading pairings: %w", err)
	}
	out := make([]*PairingView, len(ps))
	for i, p := range ps {
		out[i] = &PairingView{Pairing: p, Status: PairingAwaitingConsent, User: p.Edges.User, Agent: p.Edges.Agent}
	}
	return out, nil
}

// DecidePairingConsent is one of the agent's humans allowing (approve) or
// refusing (deny) a newcomer's pairing that awaits consent. Only a human
// with an approved pairing with the agent decides (anyone else, the
// newcomer included, ErrNotFound); a pairing no longer awaiting consent
// (decided, revoked, expired) is ErrConflict. The agent and the newcomer
// are told in the same transaction.
func (s *Service) DecidePairingConsent(ctx context.Context, u *ent.User, pairingID string, decision PairingDecision) (*PairingView, error) {
	if decision != ApprovePairing && decision != DenyPairing {
		return nil, Invalid("decision", "must be approve or deny")
	}
	notFound := fmt.Errorf("%w: no pairing awaiting your consent with id %q", ErrNotFound, pairingID)
	id, err := uuid.Parse(pairingID)
	if err != nil {
		return nil, notFound
	}
	to, event := pairing.StatusApproved, EventPairingApproved
	if decision == DenyPairing {
		to, event = pairing.StatusDenied, EventPairingDenied
	}
	var (
		p        *ent.Pairing
		newcomer *ent.User
	)
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		cur, err := tx.Pairing.Query().Where(pairing.ID(id), pairing.UserIDNEQ(u.ID)).WithUser().Only(ctx)
		if ent.IsNotFound(err) {
			return notFound
		}
		if err != nil {
			return fmt.Errorf("reading pairing: %w", err)
		}
		if err := s.lockAgentPairings(ctx, sqlTx, cur.AgentID); err != nil {
			return err
		}
		standing, err := pairedWith(ctx, tx.Client(), cur.AgentID, u.ID)
		if err != nil {
			return err
		}
		if !standing {
			return notFound
		}
		n, err := tx.Pairing.Update().Where(pairing.ID(id), pairing.StatusEQ(pairing.StatusAwaitingConsent), pairing.ExpiresAtGT(now)).
			SetStatus(to).SetDecidedAt(now).ClearExpiresAt().SetUpdatedAt(now).Save(ctx)
		if err != nil {
			return fmt.Errorf("deciding consent: %w", err)
		}
		if p, err = tx.Pairing.Get(ctx, id); err != nil {
			return fmt.Errorf("reading pairing: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: the pairing is %s; only a pairing awaiting consent can be %s",
				ErrConflict, pairingStatus(p, now), to)
		}
		newcomer = cur.Edges.User
		if err := s.refreshHumanVerified(ctx, tx, p.AgentID); err != nil {
			return err
		}
		uid := newcomer.ID
		data := pairingEventData{PairingID: p.ID, AgentID: p.AgentID, UserID: &uid, Username: newcomer.Username, Status: string(to)}
		if err := s.recordAccountEvent(ctx, tx, sqlTx, AgentParty(p.AgentID), event, data); err != nil {
			return err
		}
		a, err := tx.Agent.Get(ctx, p.AgentID)
		if err != nil {
			return err
		}
		data.AgentUsername = a.Username
		return s.recordAccountEvent(ctx, tx, sqlTx, UserParty(newcomer.ID), event, data)
	})
	if err != nil {
		return nil, err
	}
	if err := s.RecomputeTrust(ctx, p.AgentID); err != nil {
		s.logger.WarnContext(ctx, "recompute trust after consent", "agent", p.AgentID, "err", err)
	}
	a, err := s.cfg.DB.Ent.Agent.Get(ctx, p.AgentID)
	if err != nil {
		return nil, fmt.Errorf("reading agent: %w", err)
	}
	return &PairingView{Pairing: p, Status: pairingStatus(p, s.now()), User: newcomer, Agent: a}, nil
}
