package agentpay

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/browsersession"
	"agentpay/ent/logintoken"
	"agentpay/ent/passkey"
	"agentpay/ent/user"
	"agentpay/internal/ratelimit"
	"agentpay/internal/vault"
)

// Signing in to the human app without a password (docs/humans.md):
//
//   - An e-mailed link: RequestSignIn mails {app_url}/signin/<token> to an
//     address, the same answer whether or not it has an account (an
//     account is made when the link is used, with a username the person
//     picks). The token is 256 random bits, stored hashed, valid for
//     SignInLinkTTL and used once. Opening the link (GET) only shows a
//     page; the app's POST spends it (CompleteSignIn), so mail scanners
//     that open links cannot. Requests are limited per client IP
//     (RateSignIn) and per address (Config.SignInEmailRateLimit).
//   - A browser session: CompleteSignIn answers a session token for an
//     HttpOnly cookie; only its SHA-256 is stored. It expires after
//     BrowserSessionTTL, is revoked by signing out (one browser or all).
//   - CSRF: every state change made with the cookie also carries the
//     session's CSRF token (CSRFToken, derived from the session token, so
//     nothing more is stored), which a page of another site cannot read.

// SignInLinkTTL is how long an e-mailed sign-in link works.
const SignInLinkTTL = 15 * time.Minute

// BrowserSessionTTL is how long a browser stays signed in.
const BrowserSessionTTL = 30 * 24 * time.Hour

// UserAgentMaxLen bounds what a session keeps of the browser's name.
const UserAgentMaxLen = 200

// RequestSignIn e-mails a sign-in link to an address, whether or not it
// has an account (the answer never says). An invalid address is a
// ValidationError; over the client IP's or the address's hourly limit a
// *RateLimitError.
func (s *Service) RequestSignIn(ctx context.Context, rawEmail, ip string) error {
	email, err := NormalizeEmail(rawEmail)
	if err != nil {
		return err
	}
	if _, err := s.AllowIP(ctx, ip, RateSignIn); err != nil {
		return err
	}
	if s.cfg.SignInEmailRateLimit > 0 {
		sum := sha256.Sum256([]byte(email))
		dec, err := s.rates.signInEmails.Allow(ctx, ratelimit.Subject[string]{ID: hex.EncodeToString(sum[:])})
		if err := rateRefusal(dec, err, "sign-in e-mails", " to this address"); err != nil {
			return err
		}
	}
	token := vault.SignInToken.New()
	now := s.now().UTC().Truncate(time.Microsecond)
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		if err := tx.LoginToken.Create().
			SetEmail(email).
			SetTokenHash(vault.HashSecret(token)).
			SetExpiresAt(now.Add(SignInLinkTTL)).
			SetCreatedAt(now).
			SetUpdatedAt(now).
			Exec(ctx); err != nil {
			return fmt.Errorf("recording sign-in link: %w", err)
		}
		link := s.appURL("/signin/" + token)
		_, err := s.queueMail(ctx, tx, sqlTx, Mail{
			ExpiresAt: now.Add(SignInLinkTTL),
			To:        email,
			Subject:   "Your agentpay sign-in link",
			Text: fmt.Sprintf("Sign in to agentpay: %s\n\nThe link works once, for 15 minutes. "+
				"If you did not ask for it, ignore this e-mail: nobody can sign in without it.\n", link),
			HTML: fmt.Sprintf(`<p><a href="%s">Sign in to agentpay</a></p><p>The link works once, for 15 minutes. `+
				`If you did not ask for it, ignore this e-mail: nobody can sign in without it.</p>`, html.EscapeString(link)),
		})
		return err
	})
}

// SignInLink is what a sign-in link's page shows before it is used.
type SignInLink struct {
	Email string
	// NewAccount: the address has no account yet; completing the sign-in
	// needs a username.
	NewAccount bool
}

// ErrSignInLinkInvalid is a sign-in link that is unknown, used or expired:
// one answer for all three, so the page tells nothing more.
var ErrSignInLinkInvalid = fmt.Errorf("%w: this sign-in link is invalid, used or expired; ask for a new one", ErrNotFound)

// CheckSignInLink reads a sign-in link without spending it (the GET page).
func (s *Service) CheckSignInLink(ctx context.Context, token string) (*SignInLink, error) {
	lt, err := s.liveLoginToken(ctx, s.cfg.DB.Ent, token)
	if err != nil {
		return nil, err
	}
	exists, err := s.cfg.DB.Ent.User.Query().Where(user.Email(lt.Email)).Exist(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading account: %w", err)
	}
	return &SignInLink{Email: lt.Email, NewAccount: !exists}, nil
}

func (s *Service) liveLoginToken(ctx context.Context, db *ent.Client, token string) (*ent.LoginToken, error) {
	if !vault.SignInToken.Valid(token) {
		return nil, ErrSignInLinkInvalid
	}
	lt, err := db.LoginToken.Query().Where(logintoken.TokenHash(vault.HashSecret(token))).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, ErrSignInLinkInvalid
	}
	if err != nil {
		return nil, fmt.Errorf("reading sign-in link: %w", err)
	}
	if lt.UsedAt != nil || !s.now().Before(lt.ExpiresAt) {
		return nil, ErrSignInLinkInvalid
	}
	return lt, nil
}

// SignIn is a completed sign-in: the user and the browser session's token
// for its cookie (shown this once).
type SignIn struct {
	User         *ent.User
	Session      *ent.BrowserSession
	SessionToken string
}

// CompleteSignIn spends a sign-in link (the POST) and opens a browser
// session. An address without an account gets one here, verified, with
// newUser's username and display name (a missing username is a
// ValidationError, and the link stays unspent). An account whose address
// was not verified is verified now (proveAddress), and a merchant
// registered before contact e-mails were confirmed by link has its contact
// address confirmed by it (confirmMerchantEmailsOnSignIn). The link is
// spent by a conditional update, so two uses racing sign in once.
func (s *Service) CompleteSignIn(ctx context.Context, token string, newUser *NewUser, userAgent string) (*SignIn, error) {
	var out SignIn
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		lt, err := s.liveLoginToken(ctx, tx.Client(), token)
		if err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		n, err := tx.LoginToken.Update().
			Where(logintoken.ID(lt.ID), logintoken.UsedAtIsNil()).
			SetUsedAt(now).
			Save(ctx)
		if err != nil {
			return fmt.Errorf("spending sign-in link: %w", err)
		}
		if n == 0 {
			return ErrSignInLinkInvalid
		}
		u, err := tx.User.Query().Where(user.Email(lt.Email)).Only(ctx)
		switch {
		case ent.IsNotFound(err):
			if newUser == nil || newUser.Username == "" {
				return Invalid("username", "is required to create your account")
			}
			in := *newUser
			in.Email, in.EmailVerified = lt.Email, true
			if u, err = s.CreateUser(ctx, in); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("reading account: %w", err)
		case u.EmailVerifiedAt == nil:
			if u, err = s.proveAddress(ctx, tx, u, now); err != nil {
				return err
			}
		}
		if err := s.confirmMerchantEmailsOnSignIn(ctx, tx, lt.Email, now); err != nil {
			return err
		}
		out.User = u
		out.Session, out.SessionToken, err = s.openBrowserSession(ctx, tx, u, userAgent, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// proveAddress verifies an account's address, which has just signed in by
// a link e-mailed to it. Whatever was set up on the account before the
// address was proved may be someone else's (an account made from an
// invitation link the inviting agent also held, before such links stayed
// in the e-mail only): its browser sessions are revoked and its passkeys
// removed, so only the mailbox's holder goes on.
func (s *Service) proveAddress(ctx context.Context, tx *ent.Tx, u *ent.User, now time.Time) (*ent.User, error) {
	if err := tx.BrowserSession.Update().
		Where(browsersession.UserID(u.ID), browsersession.RevokedAtIsNil()).
		SetRevokedAt(now).Exec(ctx); err != nil {
		return nil, fmt.Errorf("revoking browser sessions: %w", err)
	}
	if _, err := tx.Passkey.Delete().Where(passkey.UserID(u.ID)).Exec(ctx); err != nil {
		return nil, fmt.Errorf("removing passkeys: %w", err)
	}
	u, err := tx.User.UpdateOneID(u.ID).SetEmailVerifiedAt(now).SetUpdatedAt(now).Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("verifying address: %w", err)
	}
	return u, nil
}

// openBrowserSession records a new session of the user in tx.
func (s *Service) openBrowserSession(ctx context.Context, tx *ent.Tx, u *ent.User, userAgent string, now time.Time) (*ent.BrowserSession, string, error) {
	token := vault.BrowserSessionToken.New()
	bs, err := tx.BrowserSession.Create().
		SetUserID(u.ID).
		SetTokenHash(vault.HashSecret(token)).
		SetExpiresAt(now.Add(BrowserSessionTTL)).
		SetUserAgent(truncateRunes(strings.ToValidUTF8(userAgent, ""), UserAgentMaxLen)).
		SetCreatedAt(now).
		SetUpdatedAt(now).
		Save(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("opening browser session: %w", err)
	}
	return bs, token, nil
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Viewer is the signed-in human behind a browser session.
type Viewer struct {
	User    *ent.User
	Session *ent.BrowserSession
	// token is the session's token, from which its CSRF token derives.
	token string
}

// ErrNotSignedIn is a missing, unknown, expired or revoked browser session.
var ErrNotSignedIn = fmt.Errorf("%w: not signed in", ErrUnauthorized)

// AuthenticateBrowser reads the browser session of a cookie's token.
func (s *Service) AuthenticateBrowser(ctx context.Context, token string) (*Viewer, error) {
	if !vault.BrowserSessionToken.Valid(token) {
		return nil, ErrNotSignedIn
	}
	bs, err := s.cfg.DB.Ent.BrowserSession.Query().
		Where(browsersession.TokenHash(vault.HashSecret(token))).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, ErrNotSignedIn
	}
	if err != nil {
		return nil, fmt.Errorf("reading browser session: %w", err)
	}
	if !s.browserSessionLive(bs) {
		return nil, ErrNotSignedIn
	}
	u, err := s.cfg.DB.Ent.User.Get(ctx, bs.UserID)
	if err != nil {
		return nil, fmt.Errorf("reading user: %w", err)
	}
	return &Viewer{User: u, Session: bs, token: token}, nil
}

// CSRFToken is the session's CSRF token: state changes made with the
// session's cookie must carry it (CheckCSRF). Derived from the session
// token, which only the cookie holds, so another site cannot make it.
func (v *Viewer) CSRFToken() string {
	sum := sha256.Sum256([]byte("agentpay csrf " + v.token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// ErrCSRF is a state change made with a session's cookie without its
// CSRF token.
var ErrCSRF = fmt.Errorf("%w: missing or wrong CSRF token", ErrForbidden)

// CheckCSRF refuses a state change whose CSRF token is not the session's.
func (v *Viewer) CheckCSRF(token string) error {
	if subtle.ConstantTimeCompare([]byte(token), []byte(v.CSRFToken())) != 1 {
		return ErrCSRF
	}
	return nil
}

// SignOut revokes the viewer's browser session; everywhere revokes every
// session of the user.
func (s *Service) SignOut(ctx context.Context, v *Viewer, everywhere bool) error {
	now := s.now().UTC().Truncate(time.Microsecond)
	q := s.cfg.DB.Ent.BrowserSession.Update().Where(browsersession.RevokedAtIsNil())
	if everywhere {
		q = q.Where(browsersession.UserID(v.User.ID))
	} else {
		q = q.Where(browsersession.ID(v.Session.ID))
	}
	if err := q.SetRevokedAt(now).Exec(ctx); err != nil {
		return fmt.Errorf("signing out: %w", err)
	}
	return nil
}

// MaxBrowserSessionsListed bounds the sessions the settings page lists
// (the newest): every sign-in opens one, and they last 30 days.
const MaxBrowserSessionsListed = 100

// BrowserSessionView is a signed-in browser as the settings page lists it.
type BrowserSessionView struct {
	Session *ent.BrowserSession
	// Current is the session of the request asking.
	Current bool
}

// BrowserSessions are the viewer's live sessions (neither revoked nor
// expired), newest first, at most MaxBrowserSessionsListed.
func (s *Service) BrowserSessions(ctx context.Context, v *Viewer) ([]BrowserSessionView, error) {
	bss, err := s.cfg.DB.Ent.BrowserSession.Query().
		Where(browsersession.UserID(v.User.ID), browsersession.RevokedAtIsNil(),
			browsersession.ExpiresAtGT(s.now().UTC())).
		Order(ent.Desc(browsersession.FieldCreatedAt), ent.Desc(browsersession.FieldID)).
		Limit(MaxBrowserSessionsListed).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading browser sessions: %w", err)
	}
	out := make([]BrowserSessionView, len(bss))
	for i, bs := range bss {
		out[i] = BrowserSessionView{Session: bs, Current: bs.ID == v.Session.ID}
	}
	return out, nil
}

// RevokeBrowserSession signs one of the viewer's browsers out; revoking
// the viewer's own session signs this browser out. Another user's
// session, an unknown id or one already ended is ErrNotFound.
func (s *Service) RevokeBrowserSession(ctx context.Context, v *Viewer, id string) error {
	sid, err := uuid.Parse(id)
	if err != nil {
		return fmt.Errorf("%w: no session with id %q", ErrNotFound, id)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	n, err := s.cfg.DB.Ent.BrowserSession.Update().
		Where(browsersession.ID(sid), browsersession.UserID(v.User.ID),
			browsersession.RevokedAtIsNil(), browsersession.ExpiresAtGT(now)).
		SetRevokedAt(now).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("revoking browser session: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: no session with id %q", ErrNotFound, id)
	}
	return nil
}
