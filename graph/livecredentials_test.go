package graph

import (
	"context"
	"database/sql"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/httpx"
)

// TestSubscriptionsEndWithTheirCredential: over a real websocket, each
// account subscription ends (complete) once the credential it was opened
// with does, before the event that follows: viewerEvents when its browser
// signs out or the session is revoked, agentEvents when the key is
// regenerated, merchantEvents when the secret key is rolled. A
// subscription opened with the credential that holds after the change
// hears that same event, so it is one the ended subscription would have
// had. The service reads credentials again every 200 ms here
// (Config.CredentialRecheckInterval, 5 s by default).
func TestSubscriptionsEndWithTheirCredential(t *testing.T) {
	const interval = 200 * time.Millisecond
	api := newViewerAPIWith(t, agentpay.Config{CredentialRecheckInterval: interval})
	ctx := context.Background()

	// subscribe opens a subscription on a socket of its own.
	subscribe := func(t *testing.T, header http.Header, init map[string]any, q string) *wsClient {
		c := dialWS(t, api.URL, header)
		c.init(init)
		c.send(map[string]any{"id": "s", "type": "subscribe", "payload": map[string]any{"query": q}})
		return c
	}
	viewerSub := func(t *testing.T, session, csrf string) *wsClient {
		return subscribe(t, http.Header{"Cookie": {httpx.SessionCookie + "=" + session}},
			map[string]any{httpx.CSRFHeader: csrf}, `subscription { viewerEvents(after: 0) { id kind } }`)
	}
	agentSub := func(t *testing.T, key string) *wsClient {
		return subscribe(t, nil, map[string]any{httpx.AgentKeyHeader: key}, `subscription { agentEvents(after: 0) { id kind } }`)
	}
	merchantSub := func(t *testing.T, key string) *wsClient {
		return subscribe(t, nil, map[string]any{httpx.MerchantKeyHeader: key}, `subscription { merchantEvents(after: 0) { cursor kind } }`)
	}
	agentOf := func(t *testing.T, key string) *ent.Agent {
		a, err := api.Svc.Authenticate(ctx, key)
		require.NoError(t, err)
		return a
	}

	// requireEnded: the subscription completes, before any event (read
	// waits 10 s at most, far more than the few re-check intervals it
	// takes; how soon is not measured on the wall clock).
	requireEnded := func(t *testing.T, c *wsClient) {
		t.Helper()
		m, err := c.read()
		require.NoError(t, err, "the subscription outlived its credential")
		require.Equal(t, wsMessage{Type: "complete", ID: "s"}, m, "the first message after the credential ended")
		c.requireQuiet()
	}
	// requireHeard: the subscription sends n events (from the first: each
	// subscribes after: 0, so none is missed however late it starts).
	requireHeard := func(t *testing.T, c *wsClient, n int) {
		t.Helper()
		for range n {
			m, err := c.read()
			require.NoError(t, err)
			require.Equal(t, "next", m.Type, "the subscription hears the event: %s", m.Payload)
		}
	}

	t.Run("viewerEvents: signed out", func(t *testing.T) {
		u, session, csrf := api.signIn(t, uniqueName(t, "ann"))
		_, session2, csrf2 := api.signInAgain(t, u)
		bot := agentOf(t, api.register(t, uniqueName(t, "bot")).APIKey)
		c, control := viewerSub(t, session, csrf), viewerSub(t, session2, csrf2)
		// Both hear the first event: they are open.
		pairingRequest(t, api, bot, u)
		requireHeard(t, c, 1)
		requireHeard(t, control, 1)

		var out struct{ SignOut bool }
		api.asViewer(t, session, csrf, `mutation { signOut }`, nil).decode(t, &out)
		require.True(t, out.SignOut)
		pairingRequest(t, api, agentOf(t, api.register(t, uniqueName(t, "bot")).APIKey), u)
		requireHeard(t, control, 1)
		requireEnded(t, c)
	})

	t.Run("viewerEvents: session revoked", func(t *testing.T) {
		u, session, csrf := api.signIn(t, uniqueName(t, "ann"))
		_, session2, csrf2 := api.signInAgain(t, u)
		c, control := viewerSub(t, session, csrf), viewerSub(t, session2, csrf2)
		pairingRequest(t, api, agentOf(t, api.register(t, uniqueName(t, "bot")).APIKey), u)
		requireHeard(t, c, 1)
		requireHeard(t, control, 1)

		// The other browser signs this one out from its settings page.
		var list struct {
			Viewer struct {
				Sessions []struct {
					ID      string
					Current bool
				}
			}
		}
		api.asViewer(t, session, csrf, `{ viewer { sessions { id current } } }`, nil).decode(t, &list)
		var revoked string
		for _, s := range list.Viewer.Sessions {
			if s.Current {
				revoked = s.ID
			}
		}
		require.NotEmpty(t, revoked)
		var out struct{ RevokeSession bool }
		api.asViewer(t, session2, csrf2, `mutation($id: ID!) { revokeSession(id: $id) }`, map[string]any{"id": revoked}).decode(t, &out)
		require.True(t, out.RevokeSession)
		// Nothing happens: the interval's re-read ends it.
		requireEnded(t, c)
		pairingRequest(t, api, agentOf(t, api.register(t, uniqueName(t, "bot")).APIKey), u)
		requireHeard(t, control, 1)
		c.requireQuiet()
	})

	t.Run("agentEvents: key regenerated", func(t *testing.T) {
		reg := api.register(t, uniqueName(t, "bot"))
		c := agentSub(t, reg.APIKey)
		// A human denies the agent's request: the agent hears it.
		denied := func(key string) {
			u, _, _ := api.signIn(t, uniqueName(t, "ann"))
			p := pairingRequest(t, api, agentOf(t, key), u)
			_, err := api.Svc.DecidePairing(ctx, u, p.Pairing.ID.String(), agentpay.DenyPairing)
			require.NoError(t, err)
		}
		denied(reg.APIKey)
		requireHeard(t, c, 1)

		var regen struct{ RegenerateApiKey struct{ ApiKey string } }
		api.do(t, reg.APIKey, `mutation { regenerateApiKey { apiKey } }`, nil).decode(t, &regen)
		control := agentSub(t, regen.RegenerateApiKey.ApiKey)
		denied(regen.RegenerateApiKey.ApiKey)
		requireHeard(t, control, 2) // the first event again, and this one
		requireEnded(t, c)
	})

	t.Run("merchantEvents: secret key rolled", func(t *testing.T) {
		name, email := "Shop", uniqueName(t, "shop")+"@example.com"
		reg, err := api.Svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
		require.NoError(t, err)
		c := merchantSub(t, reg.Keys.TestSecretKey)
		recordTestEvent(t, api.agentAPI, reg.Merchant.ID)
		requireHeard(t, c, 1)

		var rolled struct{ RollKeys struct{ SecretKey string } }
		(&merchantAPI{URL: api.URL, DB: api.DB, Svc: api.Svc}).do(t, reg.Keys.TestSecretKey,
			`mutation { rollKeys { secretKey } }`, nil).decode(t, &rolled)
		control := merchantSub(t, rolled.RollKeys.SecretKey)
		recordTestEvent(t, api.agentAPI, reg.Merchant.ID)
		requireHeard(t, control, 2) // the first event again, and this one
		requireEnded(t, c)
	})
}

// pairingRequest: the agent asks the user to pair (an event for the user).
func pairingRequest(t *testing.T, api *viewerAPI, a *ent.Agent, u *ent.User) *agentpay.PairingView {
	t.Helper()
	p, err := api.Svc.RequestPairing(context.Background(), a, agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	return p
}

// recordTestEvent records a test-mode event for the merchant, as a change
// of its sessions would.
func recordTestEvent(t *testing.T, api *agentAPI, merchantID uuid.UUID) {
	t.Helper()
	require.NoError(t, api.DB.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		_, err := api.Svc.RecordEvent(ctx, tx, sqlTx, agentpay.EventInput{MerchantID: merchantID, Type: agentpay.EventWebhookTest})
		return err
	}))
}
