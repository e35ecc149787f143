package agentpay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/testenv"
)

// viewerOf signs a user in by an e-mailed link and answers the session.
func (h *humansEnv) viewerOf(t *testing.T, u *ent.User, userAgent string) *Viewer {
	t.Helper()
	ctx := context.Background()
	h.env.Clock.Set(h.env.Clock.Now().Add(time.Millisecond)) // the newest link is this one
	require.NoError(t, h.svc.RequestSignIn(ctx, u.Email, "192.0.2.10"))
	in, err := h.svc.CompleteSignIn(ctx, h.signInLink(t, u.Email), nil, userAgent)
	require.NoError(t, err)
	v, err := h.svc.AuthenticateBrowser(ctx, in.SessionToken)
	require.NoError(t, err)
	return v
}

// registerPasskey registers a passkey of a for u, its counter starting at
// signCount.
func (h *humansEnv) registerPasskey(t *testing.T, a *testenv.Authenticator, u *ent.User, signCount uint32) (*ent.Passkey, *testenv.SoftPasskey) {
	t.Helper()
	ctx := context.Background()
	c, err := h.svc.BeginPasskeyRegistration(ctx, u, h.stepUp(t, a, u, StepUpRequest{Action: StepUpAddPasskey}))
	require.NoError(t, err)
	pk, err := h.svc.FinishPasskeyRegistration(ctx, u, c.ID.String(), " Phone ", a.Register(t, c.Options, signCount))
	require.NoError(t, err)
	return pk, a.Passkeys[len(a.Passkeys)-1]
}

// passkeySignIn begins a sign-in and answers it with pk.
func (h *humansEnv) passkeySignIn(t *testing.T, a *testenv.Authenticator, pk *testenv.SoftPasskey) (*SignIn, error) {
	t.Helper()
	ctx := context.Background()
	c, err := h.svc.BeginPasskeySignIn(ctx, "192.0.2.20")
	require.NoError(t, err)
	return h.svc.FinishPasskeySignIn(ctx, c.ID.String(), a.Assert(t, c.Options, pk), "Passkey browser")
}

func TestPasskeyRegistrationAndSignIn(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	u := h.user(t, "pk")
	a := testenv.NewAuthenticator(testenv.AppURL)

	c, err := h.svc.BeginPasskeyRegistration(ctx, u, StepUpProof{}) // the first passkey: the session is enough
	require.NoError(t, err)
	var opts struct {
		PublicKey struct {
			RP   struct{ ID, Name string }
			User struct {
				ID, Name, DisplayName string
			}
			Timeout                int
			AuthenticatorSelection struct{ ResidentKey, UserVerification string }
		}
	}
	require.NoError(t, json.Unmarshal(c.Options, &opts))
	require.Equal(t, "app.test", opts.PublicKey.RP.ID)
	require.Equal(t, "agentpay", opts.PublicKey.RP.Name)
	require.Equal(t, u.Username, opts.PublicKey.User.Name)
	require.Equal(t, int(PasskeyCeremonyTTL.Milliseconds()), opts.PublicKey.Timeout)
	require.Equal(t, "required", opts.PublicKey.AuthenticatorSelection.ResidentKey, "usernameless sign-in needs a discoverable passkey")
	require.Equal(t, "required", opts.PublicKey.AuthenticatorSelection.UserVerification)
	require.Equal(t, c.ExpiresAt, h.env.Clock.Now().UTC().Truncate(time.Microsecond).Add(PasskeyCeremonyTTL))

	pk, err := h.svc.FinishPasskeyRegistration(ctx, u, c.ID.String(), "  Phone ", a.Register(t, c.Options, 1))
	require.NoError(t, err)
	require.Equal(t, "Phone", pk.Name)
	require.Equal(t, []string{"internal"}, pk.Transports)
	require.EqualValues(t, 1, pk.SignCount)
	require.Equal(t, a.Passkeys[0].ID, pk.CredentialID)
	require.Nil(t, pk.LastUsedAt)
	list, err := h.svc.UserPasskeys(ctx, u)
	require.NoError(t, err)
	require.Len(t, list, 1)

	// A second registration excludes the first passkey.
	c2, err := h.svc.BeginPasskeyRegistration(ctx, u, h.stepUp(t, a, u, StepUpRequest{Action: StepUpAddPasskey}))
	require.NoError(t, err)
	require.Contains(t, string(c2.Options), `"excludeCredentials":[{"type":"public-key","id":"`)

	// Signing in with it opens a session as an e-mailed link does, raising
	// the stored counter.
	h.env.Clock.Set(h.env.Clock.Now().Add(time.Minute))
	in, err := h.passkeySignIn(t, a, a.Passkeys[0])
	require.NoError(t, err)
	require.Equal(t, u.ID, in.User.ID)
	require.Equal(t, "Passkey browser", in.Session.UserAgent)
	require.Equal(t, in.Session.ExpiresAt, h.env.Clock.Now().UTC().Truncate(time.Microsecond).Add(BrowserSessionTTL))
	v, err := h.svc.AuthenticateBrowser(ctx, in.SessionToken)
	require.NoError(t, err)
	require.Equal(t, u.ID, v.User.ID)
	stored := h.env.DB.Ent.Passkey.GetX(ctx, pk.ID)
	require.EqualValues(t, 3, stored.SignCount, "1 at registration, 2 at the second registration's step-up, 3 now")
	require.NotNil(t, stored.LastUsedAt)

	// Counterless passkeys (synced ones report 0 always) sign in again and
	// again.
	_, zero := h.registerPasskey(t, a, u, 0)
	for range 2 {
		_, err = h.passkeySignIn(t, a, zero)
		require.NoError(t, err)
	}
}

func TestPasskeyRefusals(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	ann, bob := h.user(t, "ann"), h.user(t, "bob")
	a := testenv.NewAuthenticator(testenv.AppURL)
	_, annKey := h.registerPasskey(t, a, ann, 10)

	register := func(u *ent.User, c *PasskeyCeremony, a *testenv.Authenticator) error {
		_, err := h.svc.FinishPasskeyRegistration(ctx, u, c.ID.String(), "Key", a.Register(t, c.Options, 0))
		return err
	}
	for _, tc := range []struct {
		name string
		try  func(t *testing.T) error
		want error
	}{
		{"registration expired", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeyRegistration(ctx, ann, h.stepUp(t, a, ann, StepUpRequest{Action: StepUpAddPasskey}))
			require.NoError(t, err)
			h.env.Clock.Set(h.env.Clock.Now().Add(PasskeyCeremonyTTL))
			return register(ann, c, a)
		}, ErrPasskeyCeremonyInvalid},
		{"registration replayed", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeyRegistration(ctx, ann, h.stepUp(t, a, ann, StepUpRequest{Action: StepUpAddPasskey}))
			require.NoError(t, err)
			answer := a.Register(t, c.Options, 0)
			_, err = h.svc.FinishPasskeyRegistration(ctx, ann, c.ID.String(), "Key", answer)
			require.NoError(t, err)
			_, err = h.svc.FinishPasskeyRegistration(ctx, ann, c.ID.String(), "Key again", answer)
			return err
		}, ErrPasskeyCeremonyInvalid},
		{"registration another user began", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeyRegistration(ctx, ann, h.stepUp(t, a, ann, StepUpRequest{Action: StepUpAddPasskey}))
			require.NoError(t, err)
			return register(bob, c, a)
		}, ErrPasskeyCeremonyInvalid},
		{"a sign-in's ceremony finishing a registration", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeySignIn(ctx, "192.0.2.30")
			require.NoError(t, err)
			_, err = h.svc.FinishPasskeyRegistration(ctx, ann, c.ID.String(), "Key",
				a.Register(t, []byte(`{"publicKey":{"challenge":"AAAA","rp":{"id":"app.test"},"user":{"id":"AAAA"}}}`), 0))
			return err
		}, ErrPasskeyCeremonyInvalid},
		{"unknown ceremony", func(t *testing.T) error {
			_, err := h.svc.FinishPasskeyRegistration(ctx, ann, "not-a-uuid", "Key", []byte(`{}`))
			return err
		}, errInvalid}, // the answer is read first: nothing spent
		{"registration from another origin", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeyRegistration(ctx, ann, h.stepUp(t, a, ann, StepUpRequest{Action: StepUpAddPasskey}))
			require.NoError(t, err)
			return register(ann, c, testenv.NewAuthenticator("https://evil.test"))
		}, errInvalid},
		{"registration without user verification", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeyRegistration(ctx, ann, h.stepUp(t, a, ann, StepUpRequest{Action: StepUpAddPasskey}))
			require.NoError(t, err)
			return register(ann, c, &testenv.Authenticator{Origin: testenv.AppURL, NoUserVerification: true})
		}, errInvalid},
		{"name empty", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeyRegistration(ctx, ann, h.stepUp(t, a, ann, StepUpRequest{Action: StepUpAddPasskey}))
			require.NoError(t, err)
			_, err = h.svc.FinishPasskeyRegistration(ctx, ann, c.ID.String(), "  ", a.Register(t, c.Options, 0))
			return err
		}, errInvalid},
		{"name too long", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeyRegistration(ctx, ann, h.stepUp(t, a, ann, StepUpRequest{Action: StepUpAddPasskey}))
			require.NoError(t, err)
			_, err = h.svc.FinishPasskeyRegistration(ctx, ann, c.ID.String(), strings.Repeat("é", PasskeyNameMaxLen+1), a.Register(t, c.Options, 0))
			return err
		}, errInvalid},
		{"answer too large", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeyRegistration(ctx, ann, h.stepUp(t, a, ann, StepUpRequest{Action: StepUpAddPasskey}))
			require.NoError(t, err)
			_, err = h.svc.FinishPasskeyRegistration(ctx, ann, c.ID.String(), "Key", make([]byte, MaxPasskeyResponseBytes+1))
			return err
		}, errInvalid},
		{"sign-in expired", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeySignIn(ctx, "192.0.2.30")
			require.NoError(t, err)
			h.env.Clock.Set(h.env.Clock.Now().Add(PasskeyCeremonyTTL))
			_, err = h.svc.FinishPasskeySignIn(ctx, c.ID.String(), a.Assert(t, c.Options, annKey), "")
			return err
		}, ErrPasskeyCeremonyInvalid},
		{"sign-in replayed", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeySignIn(ctx, "192.0.2.30")
			require.NoError(t, err)
			answer := a.Assert(t, c.Options, annKey)
			_, err = h.svc.FinishPasskeySignIn(ctx, c.ID.String(), answer, "")
			require.NoError(t, err)
			_, err = h.svc.FinishPasskeySignIn(ctx, c.ID.String(), answer, "")
			return err
		}, ErrPasskeyCeremonyInvalid},
		{"a registration's ceremony finishing a sign-in", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeyRegistration(ctx, ann, h.stepUp(t, a, ann, StepUpRequest{Action: StepUpAddPasskey}))
			require.NoError(t, err)
			_, err = h.svc.FinishPasskeySignIn(ctx, c.ID.String(), a.Assert(t, c.Options, annKey), "")
			return err
		}, ErrPasskeyCeremonyInvalid},
		{"unknown passkey", func(t *testing.T) error {
			other := testenv.NewAuthenticator(testenv.AppURL)
			other.Register(t, []byte(`{"publicKey":{"challenge":"AAAA","rp":{"id":"app.test"},"user":{"id":"`+b64(ann.ID[:])+`"}}}`), 0)
			_, err := h.passkeySignIn(t, other, other.Passkeys[0])
			return err
		}, ErrPasskeyNotRecognized},
		{"passkey answering for another user", func(t *testing.T) error {
			forged := *annKey
			forged.UserHandle = bob.ID[:]
			_, err := h.passkeySignIn(t, a, &forged)
			return err
		}, ErrPasskeyNotRecognized},
		{"counter regression", func(t *testing.T) error {
			_, err := h.passkeySignIn(t, a, annKey)
			require.NoError(t, err)
			annKey.SignCount -= 2 // a copy, behind the original
			_, err = h.passkeySignIn(t, a, annKey)
			annKey.SignCount += 5
			return err
		}, ErrPasskeyCounter},
		{"counter stuck", func(t *testing.T) error {
			_, err := h.passkeySignIn(t, a, annKey)
			require.NoError(t, err)
			annKey.SignCount-- // Assert raises it back to the value seen
			_, err = h.passkeySignIn(t, a, annKey)
			annKey.SignCount += 5
			return err
		}, ErrPasskeyCounter},
		{"sign-in from another origin", func(t *testing.T) error {
			evil := &testenv.Authenticator{Origin: "https://evil.test"}
			_, err := h.passkeySignIn(t, evil, annKey)
			return err
		}, ErrPasskeyRefused},
		{"sign-in without user verification", func(t *testing.T) error {
			lazy := &testenv.Authenticator{Origin: testenv.AppURL, NoUserVerification: true}
			_, err := h.passkeySignIn(t, lazy, annKey)
			return err
		}, ErrPasskeyRefused},
		{"sign-in answer unreadable", func(t *testing.T) error {
			c, err := h.svc.BeginPasskeySignIn(ctx, "192.0.2.30")
			require.NoError(t, err)
			_, err = h.svc.FinishPasskeySignIn(ctx, c.ID.String(), []byte(`{"id":"x"}`), "")
			return err
		}, errInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.env.DB.Ent.BrowserSession.Query().CountX(ctx)
			passkeys := h.env.DB.Ent.Passkey.Query().CountX(ctx)
			err := tc.try(t)
			requireHumanRefusal(t, err, tc.want)
			// Nothing signed in and no passkey added by the refusal (a
			// replay's or a regression's first, accepted, use aside).
			sessions, added := 0, 0
			switch {
			case tc.name == "registration replayed":
				added = 1
			case tc.name == "sign-in replayed" || strings.HasPrefix(tc.name, "counter"):
				sessions = 1
			}
			require.Equal(t, before+sessions, h.env.DB.Ent.BrowserSession.Query().CountX(ctx))
			require.Equal(t, passkeys+added, h.env.DB.Ent.Passkey.Query().CountX(ctx))
		})
	}
	// The refusals left the genuine passkey working.
	_, err := h.passkeySignIn(t, a, annKey)
	require.NoError(t, err)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func TestDeletePasskey(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	ann, bob := h.user(t, "ann"), h.user(t, "bob")
	a := testenv.NewAuthenticator(testenv.AppURL)
	pk, key := h.registerPasskey(t, a, ann, 0)
	other, _ := h.registerPasskey(t, a, ann, 0)
	forOther := h.stepUp(t, a, ann, StepUpRequest{Action: StepUpRemovePasskey, ID: other.ID.String()})

	for _, tc := range []struct {
		name  string
		who   *ent.User
		id    string
		proof StepUpProof
		want  error
	}{
		{"another user's", bob, pk.ID.String(), StepUpProof{}, ErrNotFound},
		{"unknown", ann, "00000000-0000-0000-0000-000000000000", StepUpProof{}, ErrNotFound},
		{"malformed", ann, "nope", StepUpProof{}, ErrNotFound},
		// A stolen session alone cannot strip the account of its passkeys.
		{"without a step-up", ann, pk.ID.String(), StepUpProof{}, ErrForbidden},
		{"with the step-up begun for another passkey", ann, pk.ID.String(), forOther, ErrStepUpInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireHumanRefusal(t, h.svc.DeletePasskey(ctx, tc.who, tc.id, tc.proof), tc.want)
			require.Equal(t, 2, h.env.DB.Ent.Passkey.Query().CountX(ctx), "still there")
		})
	}
	require.NoError(t, h.svc.DeletePasskey(ctx, ann, other.ID.String(), forOther), "the other's step-up was not spent by the refusal")
	require.NoError(t, h.svc.DeletePasskey(ctx, ann, pk.ID.String(),
		h.stepUp(t, a, ann, StepUpRequest{Action: StepUpRemovePasskey, ID: pk.ID.String()})))
	list, err := h.svc.UserPasskeys(ctx, ann)
	require.NoError(t, err)
	require.Empty(t, list)
	_, err = h.passkeySignIn(t, a, key)
	require.ErrorIs(t, err, ErrPasskeyNotRecognized, "a deleted passkey signs nobody in")
}

func TestPasskeyLimits(t *testing.T) {
	env := testenv.New(t, testenv.Options{Clock: time.Now(), Jobs: true})
	h := &humansEnv{env: env, svc: newTestService(t, env, Config{SignInRateLimit: 2})}
	ctx := context.Background()
	for range 2 {
		_, err := h.svc.BeginPasskeySignIn(ctx, "198.51.100.1")
		require.NoError(t, err)
	}
	_, err := h.svc.BeginPasskeySignIn(ctx, "198.51.100.1")
	require.ErrorIs(t, err, ErrRateLimited, "an unauthenticated begin is counted per client IP")
	_, err = h.svc.BeginPasskeySignIn(ctx, "198.51.100.2")
	require.NoError(t, err)

	// An account holds MaxPasskeysPerUser passkeys.
	u := h.user(t, "many")
	a := testenv.NewAuthenticator(testenv.AppURL)
	for range MaxPasskeysPerUser {
		h.registerPasskey(t, a, u, 0)
	}
	_, err = h.svc.BeginPasskeyRegistration(ctx, u, StepUpProof{})
	require.ErrorIs(t, err, ErrConflict, "checked before the step-up")

	// Expired ceremonies are pruned.
	h.env.Clock.Set(h.env.Clock.Now().Add(PasskeyCeremonyTTL + time.Second))
	n, err := h.svc.PrunePasskeyCeremonies(ctx)
	require.NoError(t, err)
	require.Equal(t, 2+1+MaxPasskeysPerUser, n)
}

func TestPasskeysOff(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	var cfg Config
	cfg.PasskeyOrigins = []string{"http://127.0.0.1:8080"} // keeps Fill from setting a relying party
	svc := newTestService(t, env, cfg)
	ctx := context.Background()
	_, err := svc.BeginPasskeySignIn(ctx, "192.0.2.1")
	require.ErrorIs(t, err, ErrPasskeysOff)
	_, err = svc.FinishPasskeySignIn(ctx, "x", []byte(`{}`), "")
	require.ErrorIs(t, err, ErrPasskeysOff)

	// An IP address is no relying party id: the start fails rather than
	// every ceremony.
	cfg = Config{PasskeyRPID: "127.0.0.1", PasskeyOrigins: []string{"http://127.0.0.1:8080"}}
	env.Fill(&cfg)
	_, err = NewService(cfg)
	require.ErrorContains(t, err, "PasskeyRPID")
}

func TestUpdateDisplayName(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	u := h.user(t, "dn")
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{"  Ann Lee ", "Ann Lee", nil},
		{"Zoë 👋", "Zoë 👋", nil},
		{"", "", nil}, // the username stands in
		{strings.Repeat("é", DisplayNameMaxLen), strings.Repeat("é", DisplayNameMaxLen), nil},
		{strings.Repeat("é", DisplayNameMaxLen+1), "", errInvalid},
		{"Ann\nAdmin", "", errInvalid},
		{"Ann\x1b[31m", "", errInvalid},
		{"Ann\xff", "", errInvalid},
	} {
		t.Run(tc.in, func(t *testing.T) {
			before := h.env.DB.Ent.User.GetX(ctx, u.ID).DisplayName
			got, err := h.svc.UpdateDisplayName(ctx, u, tc.in)
			if tc.err != nil {
				requireHumanRefusal(t, err, tc.err)
				require.Equal(t, before, h.env.DB.Ent.User.GetX(ctx, u.ID).DisplayName, "unchanged")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got.DisplayName)
			require.Equal(t, tc.want, h.env.DB.Ent.User.GetX(ctx, u.ID).DisplayName)
		})
	}
}

func TestBrowserSessionsListAndRevoke(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	ann, bob := h.user(t, "ann"), h.user(t, "bob")
	phone := h.viewerOf(t, ann, "Phone browser")
	laptop := h.viewerOf(t, ann, "Laptop browser")
	bobs := h.viewerOf(t, bob, "Bob's browser")

	list, err := h.svc.BrowserSessions(ctx, laptop)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "Laptop browser", list[0].Session.UserAgent, "newest first")
	require.True(t, list[0].Current)
	require.False(t, list[1].Current)

	for _, tc := range []struct {
		name string
		id   string
	}{
		{"another user's", bobs.Session.ID.String()},
		{"unknown", "00000000-0000-0000-0000-000000000000"},
		{"malformed", "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, h.svc.RevokeBrowserSession(ctx, laptop, tc.id), ErrNotFound)
		})
	}
	_, err = h.svc.AuthenticateBrowser(ctx, bobs.token)
	require.NoError(t, err, "bob is still signed in")

	// Revoking another of one's sessions signs that browser out; revoking
	// the current one signs this one out.
	require.NoError(t, h.svc.RevokeBrowserSession(ctx, laptop, phone.Session.ID.String()))
	_, err = h.svc.AuthenticateBrowser(ctx, phone.token)
	require.ErrorIs(t, err, ErrNotSignedIn)
	require.ErrorIs(t, h.svc.RevokeBrowserSession(ctx, laptop, phone.Session.ID.String()), ErrNotFound, "once")
	list, err = h.svc.BrowserSessions(ctx, laptop)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NoError(t, h.svc.RevokeBrowserSession(ctx, laptop, laptop.Session.ID.String()))
	_, err = h.svc.AuthenticateBrowser(ctx, laptop.token)
	require.ErrorIs(t, err, ErrNotSignedIn)

	// Expired sessions are not listed.
	later := h.viewerOf(t, ann, "Later")
	h.env.Clock.Set(h.env.Clock.Now().Add(BrowserSessionTTL - time.Minute))
	fresh := h.viewerOf(t, ann, "Fresh")
	h.env.Clock.Set(h.env.Clock.Now().Add(time.Minute))
	list, err = h.svc.BrowserSessions(ctx, fresh)
	require.NoError(t, err)
	require.Len(t, list, 1, "only the fresh one: %v", later.Session.ID)
}
