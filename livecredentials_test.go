package agentpay

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
)

// TestLiveWatchesEndWithTheirCredential: each live watch (agentEvents,
// viewerEvents, merchantEvents) ends once the credential it was opened
// with does: within Config.CredentialRecheckInterval when nothing happens,
// and at the next event, which is not sent, however long the interval.
// A watch whose credential holds hears that same event.
func TestLiveWatchesEndWithTheirCredential(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	h.env.Clock.Set(time.Now())

	// A party's watch, opened with its credential as it is now.
	type watcher func(s *Service, ctx context.Context) (<-chan struct{}, error)
	// party: watch opens a watch with the credential; end ends that
	// credential and answers a watch of the same party with one that
	// holds; event causes an event for the party.
	type party struct {
		watch watcher
		end   func(t *testing.T) watcher
		event func(t *testing.T)
	}
	viewerWatch := func(v *Viewer) watcher {
		return func(s *Service, ctx context.Context) (<-chan struct{}, error) {
			return drained(s.WatchViewerEvents(ctx, v, nil))
		}
	}
	merchantWatch := func(auth *MerchantAuth) watcher {
		return func(s *Service, ctx context.Context) (<-chan struct{}, error) {
			return drained(s.WatchMerchantEvents(ctx, auth, nil))
		}
	}
	cases := map[string]func(t *testing.T, h *humansEnv) party{
		"viewer signed out": func(t *testing.T, h *humansEnv) party {
			u, bot := h.user(t, "ann"), h.agent(t, "bot")
			v := h.viewer(t, u)
			return party{
				watch: viewerWatch(v),
				end: func(t *testing.T) watcher {
					require.NoError(t, h.svc.SignOut(ctx, v, false))
					return viewerWatch(h.viewer(t, u))
				},
				event: func(t *testing.T) { h.requestPairing(t, bot, u) },
			}
		},
		"viewer session revoked from another browser": func(t *testing.T, h *humansEnv) party {
			u, bot := h.user(t, "ann"), h.agent(t, "bot")
			v, other := h.viewer(t, u), h.viewer(t, u)
			return party{
				watch: viewerWatch(v),
				end: func(t *testing.T) watcher {
					require.NoError(t, h.svc.RevokeBrowserSession(ctx, other, v.Session.ID.String()))
					return viewerWatch(other)
				},
				event: func(t *testing.T) { h.requestPairing(t, bot, u) },
			}
		},
		"viewer session expired": func(t *testing.T, h *humansEnv) party {
			u, bot := h.user(t, "ann"), h.agent(t, "bot")
			v := h.viewer(t, u)
			return party{
				watch: viewerWatch(v),
				end: func(t *testing.T) watcher {
					h.env.Clock.Set(v.Session.ExpiresAt)
					return viewerWatch(h.viewer(t, u))
				},
				event: func(t *testing.T) { h.requestPairing(t, bot, u) },
			}
		},
		"agent key regenerated": func(t *testing.T, h *humansEnv) party {
			a, u := h.agent(t, "bot"), h.user(t, "ann")
			agentWatch := func(a *ent.Agent) watcher {
				return func(s *Service, ctx context.Context) (<-chan struct{}, error) {
					return drained(s.WatchAgentEvents(ctx, a, nil))
				}
			}
			return party{
				watch: agentWatch(a),
				end: func(t *testing.T) watcher {
					key, err := h.svc.RegenerateAPIKey(ctx, a)
					require.NoError(t, err)
					now, err := h.svc.Authenticate(ctx, key)
					require.NoError(t, err)
					return agentWatch(now)
				},
				event: func(t *testing.T) {
					p := h.requestPairing(t, a, u)
					_, err := h.svc.DecidePairing(ctx, u, p.Pairing.ID.String(), DenyPairing)
					require.NoError(t, err)
				},
			}
		},
		"merchant secret key rolled": func(t *testing.T, h *humansEnv) party {
			reg := h.merchantOf(t, randomName(t, "shop")+"@example.com")
			auth, err := h.svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
			require.NoError(t, err)
			return party{
				watch: merchantWatch(auth),
				end: func(t *testing.T) watcher {
					keys, err := h.svc.RollMerchantKeys(ctx, auth, ModeTest)
					require.NoError(t, err)
					now, err := h.svc.AuthenticateMerchant(ctx, keys.TestSecretKey)
					require.NoError(t, err)
					return merchantWatch(now)
				},
				event: func(t *testing.T) { h.recordMerchantEvent(t, auth) },
			}
		},
		"dashboard session's browser signed out": func(t *testing.T, h *humansEnv) party {
			owner := h.user(t, "own")
			reg := h.merchantOf(t, owner.Email)
			dashboard := func(v *Viewer) *MerchantAuth {
				opened, err := h.svc.OpenDashboard(ctx, v, reg.Merchant.ID, ModeTest)
				require.NoError(t, err)
				auth, err := h.svc.AuthenticateDashboard(ctx, opened.Token)
				require.NoError(t, err)
				return auth
			}
			v := h.viewer(t, owner)
			auth := dashboard(v)
			return party{
				watch: merchantWatch(auth),
				end: func(t *testing.T) watcher {
					require.NoError(t, h.svc.SignOut(ctx, v, false))
					return merchantWatch(dashboard(h.viewer(t, owner)))
				},
				event: func(t *testing.T) { h.recordMerchantEvent(t, auth) },
			}
		},
	}

	// Each mode has its service, which the parties use for everything (on
	// SQLite each service has its own in-process bus).
	// Nothing happens: the interval's read ends the watch.
	const short = 50 * time.Millisecond
	ticking := &humansEnv{env: h.env, svc: newTestService(t, h.env, Config{CredentialRecheckInterval: short})}
	// The interval never comes: the event's wake ends the watch before it
	// sends the event.
	waking := &humansEnv{env: h.env, svc: newTestService(t, h.env, Config{CredentialRecheckInterval: time.Hour})}

	for name, makeParty := range cases {
		t.Run(name, func(t *testing.T) {
			t.Run("within the interval", func(t *testing.T) {
				h.env.Clock.Set(time.Now())
				p := makeParty(t, ticking)
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				got, err := p.watch(ticking.svc, wctx)
				require.NoError(t, err)
				requireOpen(t, got, 5*short)
				p.end(t)
				requireEnded(t, got, 100*short)
			})
			t.Run("at the next event, unsent", func(t *testing.T) {
				h.env.Clock.Set(time.Now())
				p := makeParty(t, waking)
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				got, err := p.watch(waking.svc, wctx)
				require.NoError(t, err)
				// The same event reaches a watch whose credential holds:
				// it is one the ended watch would have sent.
				control, err := p.end(t)(waking.svc, wctx)
				require.NoError(t, err)
				p.event(t)
				select {
				case _, open := <-control:
					require.True(t, open, "the control watch hears the event")
				case <-time.After(30 * time.Second):
					t.Fatal("the event reached no watch: the test proves nothing")
				}
				requireEnded(t, got, 30*time.Second)
			})
		})
	}
}

// drained turns a watch's channel into one that says only that something
// arrived.
func drained[T any](in <-chan T, err error) (<-chan struct{}, error) {
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1000)
	go func() {
		defer close(out)
		for range in {
			out <- struct{}{}
		}
	}()
	return out, nil
}

// requireOpen: the watch sends nothing and stays open for d.
func requireOpen(t *testing.T, got <-chan struct{}, d time.Duration) {
	t.Helper()
	select {
	case _, open := <-got:
		require.True(t, open, "the watch ended while its credential held")
		t.Fatal("the watch sent something: nothing happened")
	case <-time.After(d):
	}
}

// requireEnded: the watch ends within d, without sending anything.
func requireEnded(t *testing.T, got <-chan struct{}, d time.Duration) {
	t.Helper()
	select {
	case _, open := <-got:
		require.False(t, open, "the watch sent an event after its credential ended")
	case <-time.After(d):
		t.Fatalf("the watch outlived its credential by %s", d)
	}
}

func (h *humansEnv) requestPairing(t *testing.T, a *ent.Agent, u *ent.User) *PairingView {
	t.Helper()
	p, err := h.svc.RequestPairing(context.Background(), a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	return p
}

// recordMerchantEvent records a test event for the merchant, in the
// caller's mode, as any change of its sessions would.
func (h *humansEnv) recordMerchantEvent(t *testing.T, auth *MerchantAuth) {
	t.Helper()
	require.NoError(t, h.env.DB.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		_, err := h.svc.RecordEvent(ctx, tx, sqlTx, EventInput{MerchantID: auth.Merchant.ID, Type: EventWebhookTest, Livemode: auth.Livemode()})
		return err
	}))
}
