package agentpay

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/internal/testenv"
)

// signInLink is the token of the newest sign-in link mailed to an address.
func (h *humansEnv) signInLink(t *testing.T, to string) string {
	t.Helper()
	return h.mailedLink(t, to, "/signin/")
}

func TestSignInByEmailLink(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	known := h.user(t, "ann")

	// The same answer with or without an account.
	require.NoError(t, h.svc.RequestSignIn(ctx, strings.ToUpper(known.Email), "192.0.2.1"))
	require.NoError(t, h.svc.RequestSignIn(ctx, "new.person@example.com", "192.0.2.1"))
	require.True(t, IsValidation(h.svc.RequestSignIn(ctx, "nope", "192.0.2.1")))

	// The page (GET) reads the link without spending it.
	token := h.signInLink(t, known.Email)
	link, err := h.svc.CheckSignInLink(ctx, token)
	require.NoError(t, err)
	require.False(t, link.NewAccount)
	link, err = h.svc.CheckSignInLink(ctx, token)
	require.NoError(t, err, "reading twice spends nothing")
	require.Equal(t, known.Email, link.Email)

	in, err := h.svc.CompleteSignIn(ctx, token, nil, "Mozilla/5.0 "+strings.Repeat("x", 300))
	require.NoError(t, err)
	require.Equal(t, known.ID, in.User.ID)
	require.Len(t, []rune(in.Session.UserAgent), UserAgentMaxLen)
	require.NotContains(t, string(in.Session.TokenHash), in.SessionToken, "stored hashed")
	_, err = h.svc.CompleteSignIn(ctx, token, nil, "")
	require.ErrorIs(t, err, ErrSignInLinkInvalid, "a link is used once")
	_, err = h.svc.CheckSignInLink(ctx, token)
	require.ErrorIs(t, err, ErrSignInLinkInvalid)

	// A new address: the account is made with the username picked, and
	// without one the link stays unspent.
	fresh := h.signInLink(t, "new.person@example.com")
	link, err = h.svc.CheckSignInLink(ctx, fresh)
	require.NoError(t, err)
	require.True(t, link.NewAccount)
	_, err = h.svc.CompleteSignIn(ctx, fresh, nil, "")
	require.True(t, IsValidation(err), "%v", err)
	_, err = h.svc.CompleteSignIn(ctx, fresh, &NewUser{Username: known.Username}, "")
	require.ErrorIs(t, err, ErrConflict, "a taken username")
	name := randomName(t, "newp")
	in, err = h.svc.CompleteSignIn(ctx, fresh, &NewUser{Username: name, DisplayName: "New Person"}, "")
	require.NoError(t, err)
	require.Equal(t, "new.person@example.com", in.User.Email)
	require.Equal(t, name, in.User.Username)

	// Expired after 15 minutes; unknown and malformed tokens say the same.
	h.env.Clock.Set(h.env.Clock.Now().Add(time.Second))
	require.NoError(t, h.svc.RequestSignIn(ctx, known.Email, "192.0.2.1"))
	late := h.signInLink(t, known.Email)
	h.env.Clock.Set(h.env.Clock.Now().Add(SignInLinkTTL))
	_, err = h.svc.CompleteSignIn(ctx, late, nil, "")
	require.ErrorIs(t, err, ErrSignInLinkInvalid)
	for _, bad := range []string{"", "sil_x", "sil_" + strings.Repeat("A", 43), strings.Repeat("a", 5000)} {
		_, err = h.svc.CheckSignInLink(ctx, bad)
		require.ErrorIs(t, err, ErrSignInLinkInvalid)
	}
}

// TestSignInLinkUsedOnceUnderRace: one link spent by several requests at
// once signs in once.
func TestSignInLinkUsedOnceUnderRace(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	u := h.user(t, "ann")
	require.NoError(t, h.svc.RequestSignIn(ctx, u.Email, "192.0.2.1"))
	token := h.signInLink(t, u.Email)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ins int
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.svc.CompleteSignIn(ctx, token, nil, "")
			if err == nil {
				mu.Lock()
				ins++
				mu.Unlock()
			} else {
				require.ErrorIs(t, err, ErrSignInLinkInvalid)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, ins)
}

func TestSignInRateLimits(t *testing.T) {
	env := testenv.New(t, testenv.Options{Jobs: true})
	h := &humansEnv{env: env, svc: newTestService(t, env, Config{SignInRateLimit: 3, SignInEmailRateLimit: 2})}
	ctx := context.Background()
	require.NoError(t, h.svc.RequestSignIn(ctx, "a@example.com", "192.0.2.1"))
	require.NoError(t, h.svc.RequestSignIn(ctx, "a@example.com", "192.0.2.2"))
	require.ErrorIs(t, h.svc.RequestSignIn(ctx, "A@example.com", "192.0.2.3"), ErrRateLimited, "per address, whatever the capitals")
	require.Len(t, h.outbox(t, "a@example.com"), 2)
	require.NoError(t, h.svc.RequestSignIn(ctx, "b@example.com", "192.0.2.1"))
	require.NoError(t, h.svc.RequestSignIn(ctx, "c@example.com", "192.0.2.1"))
	require.ErrorIs(t, h.svc.RequestSignIn(ctx, "d@example.com", "192.0.2.1"), ErrRateLimited, "per client IP")
	require.Empty(t, h.outbox(t, "d@example.com"))
}

func TestBrowserSessions(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	u := h.user(t, "ann")
	signIn := func() *SignIn {
		h.env.Clock.Set(h.env.Clock.Now().Add(time.Second)) // the newest link is this one
		require.NoError(t, h.svc.RequestSignIn(ctx, u.Email, "192.0.2.1"))
		in, err := h.svc.CompleteSignIn(ctx, h.signInLink(t, u.Email), nil, "test")
		require.NoError(t, err)
		return in
	}
	one, two := signIn(), signIn()
	v, err := h.svc.AuthenticateBrowser(ctx, one.SessionToken)
	require.NoError(t, err)
	require.Equal(t, u.ID, v.User.ID)

	// CSRF: the session's own token, never another's or none.
	require.NoError(t, v.CheckCSRF(v.CSRFToken()))
	v2, err := h.svc.AuthenticateBrowser(ctx, two.SessionToken)
	require.NoError(t, err)
	require.NotEqual(t, v.CSRFToken(), v2.CSRFToken())
	require.ErrorIs(t, v.CheckCSRF(v2.CSRFToken()), ErrCSRF)
	require.ErrorIs(t, v.CheckCSRF(""), ErrCSRF)

	for _, bad := range []string{"", "bs_nope", "bs_" + strings.Repeat("A", 43)} {
		_, err := h.svc.AuthenticateBrowser(ctx, bad)
		require.ErrorIs(t, err, ErrNotSignedIn)
	}

	// Signing out ends this browser's session; everywhere ends them all.
	require.NoError(t, h.svc.SignOut(ctx, v, false))
	_, err = h.svc.AuthenticateBrowser(ctx, one.SessionToken)
	require.ErrorIs(t, err, ErrNotSignedIn)
	_, err = h.svc.AuthenticateBrowser(ctx, two.SessionToken)
	require.NoError(t, err)
	three := signIn()
	require.NoError(t, h.svc.SignOut(ctx, v2, true))
	for _, in := range []*SignIn{two, three} {
		_, err = h.svc.AuthenticateBrowser(ctx, in.SessionToken)
		require.ErrorIs(t, err, ErrNotSignedIn)
	}

	// Sessions expire.
	four := signIn()
	h.env.Clock.Set(h.env.Clock.Now().Add(BrowserSessionTTL))
	_, err = h.svc.AuthenticateBrowser(ctx, four.SessionToken)
	require.ErrorIs(t, err, ErrNotSignedIn)
}
