package agentpay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/dashboardsession"
	"agentpay/internal/vault"
)

// Dashboard sessions: the credential the merchant dashboard's pages call
// the public merchant GraphQL API with (X-Dashboard-Session), one more
// kind the API accepts beside a secret key (docs/dashboard.md).
//
// A signed-in member opens one for a merchant and a mode (OpenDashboard);
// its token is shown once and stored hashed. It authenticates as a
// MerchantAuth of that merchant and mode, exactly as a secret key of the
// mode would (a test-mode session reaches test state only), with the
// member's role on top: a read-only member's every change is refused
// (MerchantAuth.CheckMutate). It ends when it expires (DashboardSessionTTL,
// never after the browser session it was opened from), when that browser
// session is signed out, or when the membership is removed: every request
// reads all three again, with no cache, so each holds at once.

// DashboardSessionTTL is how long a dashboard session lasts at most (less
// when its browser session ends first).
const DashboardSessionTTL = 12 * time.Hour

// DashboardCaller is who is behind a MerchantAuth made by a dashboard
// session.
type DashboardCaller struct {
	SessionID uuid.UUID
	UserID    uuid.UUID
	Role      MemberRole
}

// OpenedDashboard is a dashboard session as opened: the token is shown
// this once.
type OpenedDashboard struct {
	Token     string
	ExpiresAt time.Time
	Merchant  *ent.Merchant
	Mode      Mode
	Role      MemberRole
}

// OpenDashboard opens a dashboard session of the viewer for a merchant it
// manages, in a mode. Not a member (or an unknown merchant) is
// ErrForbidden; a bad mode a ValidationError.
func (s *Service) OpenDashboard(ctx context.Context, v *Viewer, merchantID uuid.UUID, mode Mode) (*OpenedDashboard, error) {
	if mode != ModeLive && mode != ModeTest {
		return nil, Invalid("mode", "must be live or test")
	}
	me, err := s.MembershipOf(ctx, v, merchantID)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	expires := now.Add(DashboardSessionTTL)
	if v.Session.ExpiresAt.Before(expires) {
		expires = v.Session.ExpiresAt
	}
	token := vault.DashboardSessionToken.New()
	if err := s.cfg.DB.Ent.DashboardSession.Create().
		SetMerchantID(merchantID).
		SetUserID(v.User.ID).
		SetBrowserSessionID(v.Session.ID).
		SetMode(dashboardsession.Mode(mode)).
		SetTokenHash(vault.HashSecret(token)).
		SetExpiresAt(expires).
		SetCreatedAt(now).
		SetUpdatedAt(now).
		Exec(ctx); err != nil {
		return nil, fmt.Errorf("opening dashboard session: %w", err)
	}
	return &OpenedDashboard{Token: token, ExpiresAt: expires, Merchant: me.Merchant, Mode: mode, Role: me.Role}, nil
}

// PruneDashboardSessions deletes the dashboard sessions past their
// expiry, which no request accepts any more (a revoked one goes when it
// expires, at most DashboardSessionTTL later). The worker runs it
// periodically.
func (s *Service) PruneDashboardSessions(ctx context.Context) (int, error) {
	n, err := s.cfg.DB.Ent.DashboardSession.Delete().
		Where(dashboardsession.ExpiresAtLT(s.now().UTC())).
		Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("pruning dashboard sessions: %w", err)
	}
	return n, nil
}

// errDashboardSessionEnded is a dashboard session that is unknown,
// expired, revoked, or whose browser session or membership ended.
var errDashboardSessionEnded = fmt.Errorf("%w: dashboard session ended; open the dashboard again", ErrUnauthorized)

// AuthenticateDashboard resolves a dashboard session's token
// (X-Dashboard-Session) to the merchant and mode it was opened for, with
// its member's current role (MerchantAuth.Dashboard). An unknown, expired
// or revoked session, or one whose browser session was signed out or
// whose member was removed, is ErrUnauthorized; a deactivated merchant's
// ErrForbidden.
func (s *Service) AuthenticateDashboard(ctx context.Context, token string) (*MerchantAuth, error) {
	if !vault.DashboardSessionToken.Valid(token) {
		return nil, ErrUnauthorized
	}
	ds, err := s.cfg.DB.Ent.DashboardSession.Query().
		Where(dashboardsession.TokenHash(vault.HashSecret(token))).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, errDashboardSessionEnded
	}
	if err != nil {
		return nil, fmt.Errorf("reading dashboard session: %w", err)
	}
	return s.dashboardAuth(ctx, ds)
}

// CheckDashboard reads again a dashboard session a MerchantAuth was made
// from (nil for a secret key's): what outlives one request with it (a
// merchantEvents subscription, livecredentials.go) asks it now and then,
// so the session's end (expiry, sign-out, the member removed) holds there
// too.
func (s *Service) CheckDashboard(ctx context.Context, auth *MerchantAuth) error {
	if auth.Dashboard == nil {
		return nil
	}
	ds, err := s.cfg.DB.Ent.DashboardSession.Get(ctx, auth.Dashboard.SessionID)
	if ent.IsNotFound(err) {
		return errDashboardSessionEnded
	}
	if err != nil {
		return fmt.Errorf("reading dashboard session: %w", err)
	}
	_, err = s.dashboardAuth(ctx, ds)
	return err
}

// dashboardAuth is the MerchantAuth of a dashboard session while it lasts.
func (s *Service) dashboardAuth(ctx context.Context, ds *ent.DashboardSession) (*MerchantAuth, error) {
	now := s.now()
	if ds.RevokedAt != nil || !now.Before(ds.ExpiresAt) {
		return nil, errDashboardSessionEnded
	}
	switch _, err := s.liveBrowserSession(ctx, ds.BrowserSessionID); {
	case errors.Is(err, ErrNotSignedIn):
		return nil, errDashboardSessionEnded
	case err != nil:
		return nil, fmt.Errorf("reading browser session: %w", err)
	}
	me, err := s.acceptedMembership(ctx, ds.UserID, ds.MerchantID)
	switch {
	case err == errNotMember:
		return nil, errDashboardSessionEnded
	case err != nil:
		return nil, err
	}
	return &MerchantAuth{
		Merchant:  me.Merchant,
		Mode:      Mode(ds.Mode),
		Dashboard: &DashboardCaller{SessionID: ds.ID, UserID: ds.UserID, Role: me.Role},
	}, nil
}

// CheckMutate refuses a change by a caller whose role does not allow it
// (a read-only dashboard member): ErrReadOnlyMember, an ErrForbidden.
// Secret keys may change anything of their mode.
func (a *MerchantAuth) CheckMutate() error {
	if a.Dashboard != nil && !a.Dashboard.Role.May(ActionMutate) {
		return ErrReadOnlyMember
	}
	return nil
}
