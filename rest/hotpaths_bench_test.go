package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/shopspring/decimal"

	"agentpay"
	"agentpay/ent/agent"
)

// BenchmarkHotPathsInProcess is the CPU side of BenchmarkCheckoutStatus and
// BenchmarkMeProfile without the network, the clients or the machine's
// load (which move the HTTP figures by a third from run to run on the
// shared machine): one goroutine calls the router's ServeHTTP with a
// recorder, and each sub-benchmark's baseline runs beside it. What a
// served request costs beyond its baseline shows as ns/op and allocs/op.
//
//   - status-cached: GET /checkout/pay/{id}/status answered from the status
//     cache (what three polls in four are, BenchmarkCheckoutStatus), against
//     status-bare, a handler writing the same bytes (that benchmark's bare
//     handler).
//   - status-miss: the same poll reading the database every time (the
//     cache off): what the fourth poll costs.
//   - me-profile: GET /agents/me/profile with a T4 agent's key (the key from
//     the authentication cache, the rate limit's lease, the profile),
//     against me-shaped, bare chi with the same middleware and routes
//     writing the same JSON (BenchmarkMeProfile's same-middleware
//     baseline).
func BenchmarkHotPathsInProcess(b *testing.B) {
	ctx := context.Background()
	api := newTestAPI(b, testAPIConfig{})
	svc, db := api.Svc, api.DB
	router := api.Server.Config.Handler

	name, email := "Shop", "shop@example.com"
	reg, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	if err != nil {
		b.Fatal(err)
	}
	const externalID = "cs_bench_inprocess"
	if _, err := db.Ent.CheckoutSession.Create().SetMerchantID(reg.Merchant.ID).SetExternalID(externalID).
		SetLivemode(false).SetAmountUsd(decimal.NewFromInt(10)).
		SetExpiresAt(time.Now().Add(time.Hour).UTC()).Save(ctx); err != nil {
		b.Fatal(err)
	}
	statusReq := httptest.NewRequest(http.MethodGet, "/checkout/pay/"+externalID+"/status", nil)
	serve := func(b *testing.B, h http.Handler, req *http.Request) {
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	}
	b.Run("status-miss", func(b *testing.B) { serve(b, router, statusReq) })
	cacheCtx, stop := context.WithCancel(ctx)
	defer stop()
	if err := svc.CacheCheckoutStatuses(cacheCtx); err != nil {
		b.Fatal(err)
	}
	rec := httptest.NewRecorder()
	router.ServeHTTP(rec, statusReq)
	statusBody := rec.Body.Bytes()
	b.Run("status-cached", func(b *testing.B) { serve(b, router, statusReq) })
	b.Run("status-bare", func(b *testing.B) {
		serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(statusBody)
		}), statusReq)
	})

	// The profile's body, as the API answers it, for the baseline.
	keys := benchT4Keys(b, api, 1)
	meReq := func(key string) *http.Request {
		req := httptest.NewRequest(http.MethodGet, "/agents/me/profile", nil)
		req.Header.Set("X-Agent-Key", key)
		return req
	}
	rec = httptest.NewRecorder()
	router.ServeHTTP(rec, meReq(keys[0]))
	var body profileBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		b.Fatal(rec.Code, rec.Body.String(), err)
	}
	shaped := (&server{svc: svc, logger: slog.Default()}).newMux()
	shaped.Route("/agents", func(r chi.Router) {
		r.Route("/me", func(r chi.Router) {
			r.Get("/profile", func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusOK, body)
			})
		})
	})
	// Each agent sends requestsPerBenchAgent requests, under its T4 minute
	// limit, so that the benchmark measures answers, not 429s.
	serveAgents := func(b *testing.B, h http.Handler) {
		keys := benchT4Keys(b, api, b.N/requestsPerBenchAgent+1)
		reqs := make([]*http.Request, len(keys))
		for i, k := range keys {
			reqs[i] = meReq(k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, reqs[i/requestsPerBenchAgent])
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	}
	b.Run("me-profile", func(b *testing.B) { serveAgents(b, router) })
	b.Run("me-shaped", func(b *testing.B) { serveAgents(b, shaped) })
}

// benchT4Keys registers n agents made T4 (verified inputs, so a trust
// refresh keeps them T4) and returns their API keys.
func benchT4Keys(b *testing.B, api *testAPI, n int) []string {
	b.Helper()
	ctx := context.Background()
	keys := make([]string, n)
	for i := range keys {
		reg, err := api.Svc.QuickRegister(ctx, fmt.Sprintf("t4_%d_%d", time.Now().UnixNano()%1_000_000_000, i))
		if err != nil {
			b.Fatal(err)
		}
		if err := api.DB.Ent.Agent.UpdateOneID(reg.Agent.ID).
			SetPartnerVerified(true).SetHumanVerified(true).SetExternalWalletVerified(true).
			SetVolumeSent(1_000_000_000).SetTrustScore(84).SetTier(agent.TierT4).
			Exec(ctx); err != nil {
			b.Fatal(err)
		}
		keys[i] = reg.APIKey
	}
	return keys
}
