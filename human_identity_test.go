package agentpay

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/identitycallback"
	"agentpay/ent/user"
	"agentpay/identity"
	"agentpay/identity/sandbox"
	"agentpay/internal/testenv"
)

// identityEnv is humansEnv with the sandbox identity provider.
type identityEnv struct {
	*humansEnv
	secret []byte
}

func startIdentityEnv(t *testing.T) *identityEnv {
	t.Helper()
	secret := []byte("sandbox-callback-secret-of-32-bytes!")
	sb, err := sandbox.New(sandbox.Config{Secret: secret})
	require.NoError(t, err)
	env := testenv.New(t, testenv.Options{Clock: time.Now(), Jobs: true})
	return &identityEnv{
		humansEnv: &humansEnv{env: env, svc: newTestService(t, env, Config{IdentityProvider: sb})},
		secret:    secret,
	}
}

// callback is a provider's callback as the sandbox signs it, sent at the
// service's now.
func (h *identityEnv) callback(t *testing.T, eventID, reference string, state identity.State, occurred time.Time) (http.Header, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"event_id": eventID, "reference": reference, "state": state, "occurred_at": occurred})
	require.NoError(t, err)
	header := http.Header{}
	header.Set(sandbox.SignatureHeader, sandbox.Sign(h.secret, body, h.svc.now()))
	return header, body
}

func (h *identityEnv) deliver(t *testing.T, eventID, reference string, state identity.State, occurred time.Time) error {
	t.Helper()
	header, body := h.callback(t, eventID, reference, state, occurred)
	return h.svc.HandleIdentityCallback(context.Background(), sandbox.Name, header, body)
}

func (h *identityEnv) status(t *testing.T, u *ent.User) user.IdentityStatus {
	t.Helper()
	got, err := h.env.DB.Ent.User.Get(context.Background(), u.ID)
	require.NoError(t, err)
	return got.IdentityStatus
}

// reference is the provider's reference of a started verification.
func (h *identityEnv) reference(t *testing.T, started *IdentityStart) string {
	t.Helper()
	iv, err := h.env.DB.Ent.IdentityVerification.Get(context.Background(), started.VerificationID)
	require.NoError(t, err)
	return iv.Reference
}

func TestIdentityVerificationNotConfigured(t *testing.T) {
	h := startHumansEnv(t)
	u := h.user(t, "ann")
	_, err := h.svc.StartIdentityVerification(context.Background(), &Viewer{User: u})
	require.ErrorIs(t, err, ErrUnavailable)
	err = h.svc.HandleIdentityCallback(context.Background(), sandbox.Name, http.Header{}, []byte(`{}`))
	require.ErrorIs(t, err, ErrNotFound)
}

// TestIdentityVerification takes a person from not_started through
// requires_input to verified, and checks each callback refusal changes
// nothing and the paired agent's trust follows at once.
func TestIdentityVerification(t *testing.T) {
	h := startIdentityEnv(t)
	ctx := context.Background()
	u := h.user(t, "ann")
	a := h.agent(t, "bot")
	p, err := h.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = h.svc.DecidePairing(ctx, u, p.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	require.Equal(t, user.IdentityStatusNotStarted, h.status(t, u))

	started, err := h.svc.StartIdentityVerification(ctx, &Viewer{User: u})
	require.NoError(t, err)
	ref := h.reference(t, started)
	require.Equal(t, "/dev/kyc/"+ref, started.URL)
	require.Equal(t, user.IdentityStatusPending, h.status(t, u))
	now := h.svc.now()

	// Refusals: nothing applied, nothing recorded.
	good, goodBody := h.callback(t, "evt_1", ref, identity.StateVerified, now)
	forged := http.Header{}
	forged.Set(sandbox.SignatureHeader, sandbox.Sign([]byte("another-secret-of-at-least-32-bytes"), goodBody, now))
	stale := http.Header{}
	stale.Set(sandbox.SignatureHeader, sandbox.Sign(h.secret, goodBody, now.Add(-sandbox.Tolerance-time.Second)))
	future := http.Header{}
	future.Set(sandbox.SignatureHeader, sandbox.Sign(h.secret, goodBody, now.Add(sandbox.Tolerance+time.Second)))
	unknownRef, unknownBody := h.callback(t, "evt_2", "sbx_unknown", identity.StateVerified, now)
	badState, badStateBody := h.callback(t, "evt_3", ref, "approved", now)
	for _, tc := range []struct {
		name     string
		provider string
		header   http.Header
		body     []byte
		want     error
	}{
		{"unknown provider", "acme", good, goodBody, ErrNotFound},
		{"no signature", sandbox.Name, http.Header{}, goodBody, errInvalid},
		{"forged signature", sandbox.Name, forged, goodBody, errInvalid},
		{"tampered body", sandbox.Name, good, []byte(string(goodBody[:len(goodBody)-1]) + " }"), errInvalid},
		{"signed too long ago", sandbox.Name, stale, goodBody, errInvalid},
		{"signed in the future", sandbox.Name, future, goodBody, errInvalid},
		{"unknown verification", sandbox.Name, unknownRef, unknownBody, ErrNotFound},
		{"unknown state", sandbox.Name, badState, badStateBody, errInvalid},
		{"oversize", sandbox.Name, good, make([]byte, MaxCallbackBytes+1), errInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.svc.HandleIdentityCallback(ctx, tc.provider, tc.header, tc.body)
			requireHumanRefusal(t, err, tc.want)
			require.Equal(t, user.IdentityStatusPending, h.status(t, u))
			n, err := h.env.DB.Ent.IdentityCallback.Query().Count(ctx)
			require.NoError(t, err)
			require.Zero(t, n)
		})
	}

	// The provider asks for more, then verifies.
	require.NoError(t, h.deliver(t, "evt_10", ref, identity.StateRequiresInput, now))
	require.Equal(t, user.IdentityStatusRequiresInput, h.status(t, u))
	before, err := h.env.DB.Ent.Agent.Get(ctx, a.ID)
	require.NoError(t, err)
	require.False(t, before.HumanVerified)

	h.env.Clock.Advance(time.Second)
	require.NoError(t, h.deliver(t, "evt_11", ref, identity.StateVerified, h.svc.now()))
	require.Equal(t, user.IdentityStatusVerified, h.status(t, u))
	after, err := h.env.DB.Ent.Agent.Get(ctx, a.ID)
	require.NoError(t, err)
	require.True(t, after.HumanVerified)
	require.Equal(t, before.TrustScore+TrustHumanPoints, after.TrustScore, "the paired agent's trust follows at once")
	require.Equal(t, TierFor(after.TrustScore), string(after.Tier))
	views, err := h.svc.AgentPairings(ctx, a)
	require.NoError(t, err)
	require.True(t, views[0].KYCVerified())

	// A replay is refused; a late, older result of the same verification
	// changes nothing.
	err = h.deliver(t, "evt_11", ref, identity.StateVerified, h.svc.now())
	require.ErrorIs(t, err, ErrConflict)
	require.NoError(t, h.deliver(t, "evt_9", ref, identity.StateRejected, now.Add(-time.Minute)))
	require.Equal(t, user.IdentityStatusVerified, h.status(t, u))

	var kinds []string
	for _, e := range h.events(t, UserParty(u.ID)) {
		if e.Kind == EventIdentityUpdated {
			var d identityEventData
			require.NoError(t, json.Unmarshal(e.Data, &d))
			kinds = append(kinds, d.Status)
		}
	}
	require.Equal(t, []string{"pending", "requires_input", "verified"}, kinds, "one event per change the person sees")

	_, err = h.svc.StartIdentityVerification(ctx, &Viewer{User: u})
	require.ErrorIs(t, err, ErrConflict, "verified is final")
}

// TestIdentityVerificationRestart: after a rejection the person starts
// again; a late result of the abandoned verification does not move the
// status.
func TestIdentityVerificationRestart(t *testing.T) {
	h := startIdentityEnv(t)
	ctx := context.Background()
	u := h.user(t, "ann")
	first, err := h.svc.StartIdentityVerification(ctx, &Viewer{User: u})
	require.NoError(t, err)
	h.env.Clock.Advance(time.Second)
	require.NoError(t, h.deliver(t, "evt_1", h.reference(t, first), identity.StateRejected, h.svc.now()))
	require.Equal(t, user.IdentityStatusRejected, h.status(t, u))

	h.env.Clock.Advance(time.Second)
	second, err := h.svc.StartIdentityVerification(ctx, &Viewer{User: u})
	require.NoError(t, err)
	require.NotEqual(t, h.reference(t, first), h.reference(t, second))
	require.Equal(t, user.IdentityStatusPending, h.status(t, u))
	h.env.Clock.Advance(time.Second)
	require.NoError(t, h.deliver(t, "evt_2", h.reference(t, first), identity.StateVerified, h.svc.now()))
	require.Equal(t, user.IdentityStatusPending, h.status(t, u), "the ended verification cannot verify")
	require.NoError(t, h.deliver(t, "evt_3", h.reference(t, second), identity.StateVerified, h.svc.now()))
	require.Equal(t, user.IdentityStatusVerified, h.status(t, u))
}

// TestIdentityCallbackConcurrentDeliveries: a provider delivering one event
// several times at once has it applied once.
func TestIdentityCallbackConcurrentDeliveries(t *testing.T) {
	h := startIdentityEnv(t)
	ctx := context.Background()
	u := h.user(t, "ann")
	started, err := h.svc.StartIdentityVerification(ctx, &Viewer{User: u})
	require.NoError(t, err)
	header, body := h.callback(t, "evt_once", h.reference(t, started), identity.StateVerified, h.svc.now())

	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.svc.HandleIdentityCallback(ctx, sandbox.Name, header, body)
		}()
	}
	wg.Wait()
	applied := 0
	for _, err := range errs {
		if err == nil {
			applied++
			continue
		}
		require.ErrorIs(t, err, ErrConflict)
	}
	require.Equal(t, 1, applied)
	require.Equal(t, user.IdentityStatusVerified, h.status(t, u))
	events, err := h.env.DB.Ent.IdentityCallback.Query().Where(identitycallback.EventID("evt_once")).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, events)
}
