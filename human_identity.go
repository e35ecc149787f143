package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/identitycallback"
	"agentpay/ent/identityverification"
	"agentpay/ent/pairing"
	"agentpay/ent/user"
	"agentpay/identity"
	"agentpay/internal/store"
)

// Identity verification of humans (docs/identity-and-cards.md).
//
// A person starts a verification from the app (StartIdentityVerification):
// the provider (Config.IdentityProvider, an identity.Provider) answers a
// reference and its hosted page, and the person's identity status becomes
// pending. The provider calls back (HandleIdentityCallback, behind POST
// /identity/callbacks/<provider>) with a signed result; the service checks
// the signature, refuses an event it applied before, and moves the
// verification and the person's identity status:
//
//	not_started -> pending -> verified | rejected
//	                 pending <-> requires_input
//
// verified is final; after rejected the person may start again. Whatever
// the person's status becomes, every agent paired with them (approved) has
// its human_verified trust input refreshed in the same transaction, and its
// trust score and tier recomputed after the commit, as a pairing decision
// does.

// MaxCallbackBytes bounds an identity callback's body.
const MaxCallbackBytes = 16 << 10

// Account event kinds of identity verification (to the user).
const (
	EventIdentityUpdated = "identity.updated"
)

// ErrIdentityNotConfigured: no identity provider is configured.
var ErrIdentityNotConfigured = fmt.Errorf("%w: identity verification is not configured on this service", ErrUnavailable)

// IdentityStart is a started verification: where to send the person.
type IdentityStart struct {
	VerificationID uuid.UUID
	// URL is the provider's hosted page.
	URL string
}

// StartIdentityVerification starts a verification of the signed-in
// person. A verified person is refused (409); a pending one may start
// again (the earlier flow was left unfinished), and so may a rejected one.
func (s *Service) StartIdentityVerification(ctx context.Context, v *Viewer) (*IdentityStart, error) {
	p := s.cfg.IdentityProvider
	if p == nil {
		return nil, ErrIdentityNotConfigured
	}
	u, err := s.cfg.DB.Ent.User.Get(ctx, v.User.ID)
	if err != nil {
		return nil, fmt.Errorf("identity: reading user: %w", err)
	}
	if u.IdentityStatus == user.IdentityStatusVerified {
		return nil, fmt.Errorf("%w: your identity is already verified", ErrConflict)
	}
	id := uuid.New()
	// The provider first (an outside call, never inside a transaction);
	// if recording fails after, its session is only an unused page.
	started, err := p.Start(ctx, identity.StartRequest{VerificationID: id.String(), ReturnURL: strings.TrimRight(s.cfg.AppURL, "/") + "/?identity=returned"})
	if err != nil {
		s.logger.WarnContext(ctx, "identity: provider start", "provider", p.Name(), "err", err)
		return nil, fmt.Errorf("%w: the identity provider did not answer; try again", ErrUnavailable)
	}
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		if _, err := tx.IdentityVerification.Create().SetID(id).SetUserID(u.ID).SetProvider(p.Name()).
			SetReference(started.Reference).Save(ctx); err != nil {
			return fmt.Errorf("identity: recording verification: %w", err)
		}
		n, err := tx.User.Update().Where(user.ID(u.ID), user.IdentityStatusNEQ(user.IdentityStatusVerified)).
			SetIdentityStatus(user.IdentityStatusPending).Save(ctx)
		if err != nil {
			return fmt.Errorf("identity: storing status: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: your identity is already verified", ErrConflict)
		}
		return s.recordAccountEvent(ctx, tx, sqlTx, UserParty(u.ID), EventIdentityUpdated, identityEventData{
			VerificationID: id, Status: string(user.IdentityStatusPending),
		})
	})
	if err != nil {
		return nil, err
	}
	return &IdentityStart{VerificationID: id, URL: started.URL}, nil
}

// identityEventData is the data of an identity.updated event.
type identityEventData struct {
	VerificationID uuid.UUID `json:"verification_id"`
	Status         string    `json:"status"`
}

// HandleIdentityCallback applies a provider's callback: providerName is
// the callback path's, header and body the request's. Refusals change
// nothing: an unknown provider or verification (ErrNotFound), a signature
// or timestamp that does not verify or a malformed body
// (ValidationError), an event applied before (ErrConflict). A result
// older than the verification's state, or one for a verification that
// already ended, is recorded and changes nothing else.
func (s *Service) HandleIdentityCallback(ctx context.Context, providerName string, header http.Header, body []byte) error {
	p := s.cfg.IdentityProvider
	if p == nil || p.Name() != providerName {
		return fmt.Errorf("%w: no identity provider %q", ErrNotFound, providerName)
	}
	if len(body) > MaxCallbackBytes {
		return Invalid("body", "must be at most %d bytes", MaxCallbackBytes)
	}
	res, err := p.Callback(header, body, s.now())
	switch {
	case errors.Is(err, identity.ErrSignature):
		return Invalid("signature", "%s", strings.TrimPrefix(err.Error(), identity.ErrSignature.Error()+": "))
	case errors.Is(err, identity.ErrMalformed):
		return Invalid("body", "%s", strings.TrimPrefix(err.Error(), identity.ErrMalformed.Error()+": "))
	case err != nil:
		return fmt.Errorf("identity callback: %w", err)
	}

	var agents []uuid.UUID
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		// The event first: its unique index refuses a replay on every
		// instance, and two deliveries of one event racing apply it once.
		_, err := tx.IdentityCallback.Create().SetProvider(p.Name()).SetEventID(res.EventID).
			SetReference(res.Reference).SetState(string(res.State)).Save(ctx)
		if ent.IsConstraintError(err) {
			return fmt.Errorf("%w: callback event %s was already applied", ErrConflict, res.EventID)
		}
		if err != nil {
			return fmt.Errorf("identity callback: recording event: %w", err)
		}
		iv, err := store.ForUpdate(s.cfg.DB, tx.IdentityVerification.Query().
			Where(identityverification.Provider(p.Name()), identityverification.Reference(res.Reference))).Only(ctx)
		if ent.IsNotFound(err) {
			return fmt.Errorf("%w: no verification %s", ErrNotFound, res.Reference)
		}
		if err != nil {
			return fmt.Errorf("identity callback: reading verification: %w", err)
		}
		if identity.State(iv.State).Final() || (iv.StateAt != nil && res.OccurredAt.Before(*iv.StateAt)) {
			return nil // ended, or a newer result is applied: recorded only
		}
		upd := tx.IdentityVerification.UpdateOne(iv).
			SetState(identityverification.State(res.State)).SetStateAt(res.OccurredAt)
		if res.State.Final() {
			upd.SetCompletedAt(s.now().UTC())
		}
		if _, err := upd.Save(ctx); err != nil {
			return fmt.Errorf("identity callback: storing state: %w", err)
		}
		// The person's status follows their newest verification only: a
		// late result of an abandoned one does not move it.
		newest, err := tx.IdentityVerification.Query().Where(identityverification.UserID(iv.UserID)).
			Order(ent.Desc(identityverification.FieldCreatedAt), ent.Desc(identityverification.FieldID)).First(ctx)
		if err != nil {
			return fmt.Errorf("identity callback: reading newest verification: %w", err)
		}
		if newest.ID != iv.ID {
			return nil
		}
		n, err := tx.User.Update().Where(user.ID(iv.UserID), user.IdentityStatusNEQ(user.IdentityStatusVerified)).
			SetIdentityStatus(user.IdentityStatus(res.State)).Save(ctx)
		if err != nil {
			return fmt.Errorf("identity callback: storing status: %w", err)
		}
		if n == 0 {
			return nil
		}
		paired, err := tx.Pairing.Query().
			Where(pairing.UserID(iv.UserID), pairing.StatusEQ(pairing.StatusApproved)).All(ctx)
		if err != nil {
			return fmt.Errorf("identity callback: reading pairings: %w", err)
		}
		for _, pr := range paired {
			if err := s.refreshHumanVerified(ctx, tx, pr.AgentID); err != nil {
				return err
			}
			agents = append(agents, pr.AgentID)
		}
		return s.recordAccountEvent(ctx, tx, sqlTx, UserParty(iv.UserID), EventIdentityUpdated, identityEventData{
			VerificationID: iv.ID, Status: string(res.State),
		})
	})
	if err != nil {
		return err
	}
	// Trust after the commit, as after a pairing decision (human_pairings.go).
	for _, a := range agents {
		if err := s.RecomputeTrust(ctx, a); err != nil {
			s.logger.WarnContext(ctx, "recompute trust after identity verification", "agent", a, "err", err)
		}
	}
	return nil
}

// identityCallbackAge is how long applied callback events are kept: past
// the providers' signature tolerance a replay fails its signature anyway.
const identityCallbackAge = 7 * 24 * time.Hour

// PruneIdentityCallbacks deletes applied callback events older than a
// replay could be.
func (s *Service) PruneIdentityCallbacks(ctx context.Context) (int, error) {
	return s.cfg.DB.Ent.IdentityCallback.Delete().
		Where(identitycallback.CreatedAtLT(s.now().Add(-identityCallbackAge))).Exec(ctx)
}
