package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/ent/agent"
	"agentpay/internal/testdb"
)

// benchClients is how many clients send requests at once.
const benchClients = 16

func benchHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        benchClients,
		MaxIdleConnsPerHost: benchClients,
		MaxConnsPerHost:     benchClients,
	}}
}

// manyIPsHTTPClient is benchHTTPClient whose connections come from
// addresses 127.0.1.1 to 127.0.1.250 in turn (all loopback on Linux), so
// that a server counting per client IP sees many clients, as a checkout
// page's polls come from many customers.
func manyIPsHTTPClient() *http.Client {
	var n atomic.Uint32
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        benchClients,
		MaxIdleConnsPerHost: benchClients,
		MaxConnsPerHost:     benchClients,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ip := net.IPv4(127, 0, 1, byte(n.Add(1)%250+1))
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// loadResult is what a run of n requests measured.
type loadResult struct {
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r loadResult) perSecond(n int) float64 { return float64(n) / r.elapsed.Seconds() }

// runLoad sends n requests from benchClients concurrent clients; req(i)
// builds the i-th request and each answer must have status want.
func runLoad(b *testing.B, n int, want int, req func(i int) *http.Request) loadResult {
	b.Helper()
	client := benchHTTPClient()
	defer client.CloseIdleConnections()
	latencies := make([]time.Duration, n)
	elapsed := runLoadRange(b, client, latencies, 0, n, want, req)
	return summarize(elapsed, latencies)
}

// runLoadRange sends requests lo to hi-1 with client from benchClients
// concurrent clients, recording each one's latency in latencies[i], and
// returns the time they took.
func runLoadRange(b *testing.B, client *http.Client, latencies []time.Duration, lo, hi, want int, req func(i int) *http.Request) time.Duration {
	b.Helper()
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		failMu  sync.Mutex
		failure string
	)
	next.Store(int64(lo))
	start := time.Now()
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= hi {
					return
				}
				t0 := time.Now()
				resp, err := client.Do(req(i))
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != want {
						err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
					}
				}
				latencies[i] = time.Since(t0)
				if err != nil {
					failMu.Lock()
					failure = err.Error()
					failMu.Unlock()
					next.Store(int64(hi)) // stop everyone
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failure != "" {
		b.Fatal(failure)
	}
	return elapsed
}

// median is the median of xs (which it sorts).
func median(xs []float64) float64 {
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

func summarize(elapsed time.Duration, latencies []time.Duration) loadResult {
	n := len(latencies)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return loadResult{
		elapsed: elapsed,
		p50:     latencies[n/2],
		p99:     latencies[min(n-1, n*99/100)],
	}
}

// BenchmarkQuickRegister: POST /agents/quick-register on PostgreSQL, 16
// concurrent clients over real HTTP.
func BenchmarkQuickRegister(b *testing.B) {
	if !testdb.IsPostgres() {
		b.Skip("PostgreSQL only: set TEST_DATABASE_URL")
	}
	srv := newTestAPI(b, testAPIConfig{}).Server // the IP limits off: the benchmark is one client IP
	run := time.Now().UnixNano() % 1_000_000
	b.ResetTimer()
	res := runLoad(b, b.N, http.StatusCreated, func(i int) *http.Request {
		body := fmt.Sprintf(`{"username":"b%d_%d"}`, run, i)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/agents/quick-register", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return req
	})
	b.StopTimer()
	b.ReportMetric(res.perSecond(b.N), "req/s")
	b.ReportMetric(float64(res.p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(res.p99.Microseconds())/1000, "p99-ms")
}

// requestsPerBenchAgent keeps each agent under its T4 rate limit (300 a
// minute), so the benchmark measures answers, not 429s.
const requestsPerBenchAgent = 250

// BenchmarkMeProfile: GET /agents/me/profile (key lookup, rate limit,
// profile read, JSON) against a bare chi handler writing the same JSON
// (ratio-%) and against the baseline, bare chi with the same
// middleware shape (ratio-same-middleware-%), in the same run, all with 16
// concurrent clients over real HTTP. Runs on
// SQLite, or PostgreSQL when TEST_DATABASE_URL is set.
func BenchmarkMeProfile(b *testing.B) {
	inst := newTestAPI(b, testAPIConfig{}) // the IP limits off: the benchmark is one client IP
	svc, srv, db := inst.Svc, inst.Server, inst.DB
	ctx := context.Background()

	// Enough T4 agents (verified inputs, so a trust refresh keeps them T4)
	// that none passes its rate limit.
	nAgents := b.N/requestsPerBenchAgent + 1
	keys := make([]string, nAgents+1) // the last one warms up

	var wg sync.WaitGroup
	errs := make(chan error, nAgents+1)
	sem := make(chan struct{}, benchClients)
	run := time.Now().UnixNano() % 1_000_000
	for i := range nAgents + 1 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			reg, err := svc.QuickRegister(ctx, fmt.Sprintf("p%d_%d", run, i))
			if err != nil {
				errs <- err
				return
			}
			keys[i] = reg.APIKey
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if _, err := db.Ent.Agent.Update().
		SetPartnerVerified(true).SetHumanVerified(true).SetExternalWalletVerified(true).
		SetVolumeSent(1_000_000_000).SetTrustScore(84).SetTier(agent.TierT4).
		Save(ctx); err != nil {
		b.Fatal(err)
	}

	// The bare handler writes the body the real endpoint answers.
	a, err := svc.Authenticate(ctx, keys[0])
	if err != nil {
		b.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r0 := httptest.NewRequest(http.MethodGet, "/agents/me/profile", nil)
	(&server{svc: svc, logger: slog.Default()}).myProfile(rec, r0.WithContext(context.WithValue(ctx, agentCtxKey{}, a)))
	if rec.Code != http.StatusOK {
		b.Fatalf("profile: %d %s", rec.Code, rec.Body)
	}
	var body profileBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		b.Fatal(err)
	}
	bare := chi.NewRouter()
	bare.Get("/agents/me/profile", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, body)
	})
	bareSrv := httptest.NewServer(bare)
	defer bareSrv.Close()
	// The baseline: bare chi with the same middleware shape (the
	// API's newMux) and the same routing (the /agents and /me subrouters
	// NewRouter mounts), the same JSON, no key, no limit, no database: what
	// the agent's key, its rate limit and the profile read cost.
	shaped := (&server{svc: svc, logger: slog.Default()}).newMux()
	shaped.Route("/agents", func(r chi.Router) {
		r.Route("/me", func(r chi.Router) {
			r.Get("/profile", func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusOK, body)
			})
		})
	})
	shapedSrv := httptest.NewServer(shaped)
	defer shapedSrv.Close()

	// Both sides get the same requests from the same kind of client, each
	// with its own warmed-up connections, and run in alternating rounds, so
	// that load from outside the benchmark (a busy machine) falls on both
	// alike instead of on whichever ran during it. The warm-up requests use
	// an agent of their own, so they use up no benchmark agent's limit.
	bareClient, shapedClient, realClient := benchHTTPClient(), benchHTTPClient(), benchHTTPClient()
	defer bareClient.CloseIdleConnections()
	defer shapedClient.CloseIdleConnections()
	defer realClient.CloseIdleConnections()
	request := func(url, key string) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, url+"/agents/me/profile", nil)
		req.Header.Set("X-Agent-Key", key)
		return req
	}
	bareReq := func(i int) *http.Request { return request(bareSrv.URL, keys[i/requestsPerBenchAgent]) }
	shapedReq := func(i int) *http.Request { return request(shapedSrv.URL, keys[i/requestsPerBenchAgent]) }
	realReq := func(i int) *http.Request { return request(srv.URL, keys[i/requestsPerBenchAgent]) }
	warmLat := make([]time.Duration, 4*benchClients)
	for _, side := range []struct {
		client *http.Client
		url    string
	}{{bareClient, bareSrv.URL}, {shapedClient, shapedSrv.URL}, {realClient, srv.URL}} {
		runLoadRange(b, side.client, warmLat, 0, len(warmLat), http.StatusOK,
			func(int) *http.Request { return request(side.url, keys[nAgents]) })
	}

	const rounds = 10
	bareLat, shapedLat, realLat := make([]time.Duration, b.N), make([]time.Duration, b.N), make([]time.Duration, b.N)
	var bareElapsed, shapedElapsed, realElapsed time.Duration
	roundRatios := make([]float64, 0, rounds)
	b.ResetTimer()
	for round := range rounds {
		lo, hi := b.N*round/rounds, b.N*(round+1)/rounds
		bareElapsed += runLoadRange(b, bareClient, bareLat, lo, hi, http.StatusOK, bareReq)
		shaped := runLoadRange(b, shapedClient, shapedLat, lo, hi, http.StatusOK, shapedReq)
		served := runLoadRange(b, realClient, realLat, lo, hi, http.StatusOK, realReq)
		shapedElapsed += shaped
		realElapsed += served
		roundRatios = append(roundRatios, shaped.Seconds()/served.Seconds())
	}
	bareRes, shapedRes, realRes := summarize(bareElapsed, bareLat), summarize(shapedElapsed, shapedLat), summarize(realElapsed, realLat)
	b.StopTimer()
	bareRPS, realRPS := bareRes.perSecond(b.N), realRes.perSecond(b.N)
	b.ReportMetric(realRPS, "profile-req/s")
	b.ReportMetric(bareRPS, "bare-req/s")
	b.ReportMetric(100*realRPS/bareRPS, "ratio-%")
	// Against the baseline (goal 90%): what the key, the limit and
	// the profile read cost, the middleware on both sides.
	b.ReportMetric(100*realRPS/shapedRes.perSecond(b.N), "ratio-same-middleware-%")
	// The median of the rounds' ratios: a burst of load from outside the
	// benchmark falls on one side of one round and moves the ratio of the
	// sums, not the median.
	b.ReportMetric(100*median(roundRatios), "ratio-same-middleware-median-%")
	b.ReportMetric(float64(realRes.p50.Microseconds())/1000, "profile-p50-ms")
	b.ReportMetric(float64(realRes.p99.Microseconds())/1000, "profile-p99-ms")
}

// BenchmarkMeProfileParts times, without HTTP, each step of an
// authenticated profile read, to show where its cost goes.
func BenchmarkMeProfileParts(b *testing.B) {
	svc := newTestAPI(b, testAPIConfig{}).Svc // the IP limits off: the benchmark is one client IP
	ctx := context.Background()
	reg, err := svc.QuickRegister(ctx, "parts")
	if err != nil {
		b.Fatal(err)
	}
	a, err := svc.Authenticate(ctx, reg.APIKey)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("authenticate", func(b *testing.B) {
		for b.Loop() {
			if _, err := svc.Authenticate(ctx, reg.APIKey); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rate-limit", func(b *testing.B) {
		for b.Loop() {
			if _, err := svc.AllowAgent(ctx, a); err != nil && !errors.Is(err, agentpay.ErrRateLimited) {
				b.Fatal(err)
			}
		}
	})
	b.Run("authenticate-and-allow", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := svc.AuthenticateAndAllow(ctx, reg.APIKey); err != nil && !errors.Is(err, agentpay.ErrRateLimited) {
				b.Fatal(err)
			}
		}
	})
	b.Run("profile", func(b *testing.B) {
		for b.Loop() {
			if _, err := svc.Profile(ctx, a); err != nil {
				b.Fatal(err)
			}
		}
	})
}
