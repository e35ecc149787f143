package agentpay

import (
	"context"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
)

// A live watch (a subscription: agentEvents, viewerEvents, merchantEvents)
// outlives the request that opened it, so the credential it was opened
// with is read again while it lasts: after each read of what it is about
// to send (at the start and at every wake; ended), and every
// Config.CredentialRecheckInterval while nothing happens (wait). The first read
// that fails ends the watch, before it sends what it read: a key
// regenerated or rolled, a browser session signed out, revoked or
// expired, a dashboard session ended or its member removed, a merchant
// deactivated, ends every watch opened with it within the interval, and no
// event committed after the end is sent. A read that fails for another
// reason (the database away) ends the watch too: the client subscribes
// again, authenticating afresh.
//
// Each watch says what its credential is (agentKeyHolds, viewerHolds,
// merchantAuthHolds) and keeps one credentialRecheck; the rule of when it
// is read again lives here only.

// DefaultCredentialRecheckInterval is how often a live watch reads its
// credential again when no event wakes it: at most this long after the
// credential ended, the watch ends.
const DefaultCredentialRecheckInterval = 5 * time.Second

// credentialCheck reads again the credential a live watch was opened
// with: nil while it still holds, otherwise the error a request presenting
// it now would get.
type credentialCheck func(ctx context.Context) error

// credentialRecheck is one live watch's hold on its credential.
type credentialRecheck struct {
	s      *Service
	watch  string // names the watch in the log line of its end
	check  credentialCheck
	ticker *time.Ticker
}

// recheckCredential starts reading a watch's credential again every
// Config.CredentialRecheckInterval, until ctx (the watch's) ends.
func (s *Service) recheckCredential(ctx context.Context, watch string, check credentialCheck) *credentialRecheck {
	t := time.NewTicker(s.cfg.CredentialRecheckInterval)
	context.AfterFunc(ctx, t.Stop)
	return &credentialRecheck{s: s, watch: watch, check: check, ticker: t}
}

// wait blocks until the watch's next wake (a bus message or resync),
// reading the credential every interval meanwhile: false when the watch
// must end instead (the credential ended, the bus closed, ctx ended).
func (r *credentialRecheck) wait(ctx context.Context, wake <-chan string) bool {
	for {
		select {
		case _, ok := <-wake:
			return ok
		case <-r.ticker.C:
			if r.ended(ctx) {
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
}

// ended reads the credential again: true when it no longer holds, and the
// watch must end without sending anything more.
func (r *credentialRecheck) ended(ctx context.Context) bool {
	err := r.check(ctx)
	if err == nil {
		return false
	}
	if ctx.Err() == nil {
		r.s.logger.InfoContext(ctx, "live watch: its credential ended", "watch", r.watch, "err", err)
	}
	return true
}

// agentKeyHolds: the API key an agent authenticated with (a.APIKeyHash)
// still authenticates it, as a request's would (through the
// authentication cache, so no later than AuthCacheTTL after a
// regeneration on another process; at once on this one).
func (s *Service) agentKeyHolds(a *ent.Agent) credentialCheck {
	hash, id := a.APIKeyHash, a.ID
	return func(ctx context.Context) error {
		now, err := s.authenticateAgent(ctx, hash)
		if err != nil {
			return err
		}
		if now.ID != id {
			return ErrUnauthorized // hashes are unique: cannot happen
		}
		return nil
	}
}

// viewerHolds: the browser session a viewer signed in with is neither
// signed out, revoked nor expired.
func (s *Service) viewerHolds(v *Viewer) credentialCheck {
	id := v.Session.ID
	return func(ctx context.Context) error {
		_, err := s.liveBrowserSession(ctx, id)
		return err
	}
}

// merchantAuthHolds: a dashboard session still holds (CheckDashboard), or
// the secret key is still unrolled and its merchant active.
func (s *Service) merchantAuthHolds(auth *MerchantAuth) credentialCheck {
	return func(ctx context.Context) error {
		if auth.Dashboard != nil {
			return s.CheckDashboard(ctx, auth)
		}
		if auth.keyMatch == nil {
			return ErrUnauthorized // neither a key nor a dashboard session: cannot watch
		}
		_, err := s.merchantByKey(ctx, auth.Mode, auth.keyMatch)
		return err
	}
}

// liveBrowserSession reads a browser session by id: ErrNotSignedIn once
// it is revoked (signed out) or expired, or gone.
func (s *Service) liveBrowserSession(ctx context.Context, id uuid.UUID) (*ent.BrowserSession, error) {
	bs, err := s.cfg.DB.Ent.BrowserSession.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, ErrNotSignedIn
	}
	if err != nil {
		return nil, err
	}
	if !s.browserSessionLive(bs) {
		return nil, ErrNotSignedIn
	}
	return bs, nil
}

// browserSessionLive: a browser session is neither revoked nor expired.
func (s *Service) browserSessionLive(bs *ent.BrowserSession) bool {
	return bs.RevokedAt == nil && s.now().Before(bs.ExpiresAt)
}
