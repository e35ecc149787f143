package rest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"agentpay/chains"
)

// BenchmarkSendBase: POST /agents/me/wallet/send on the Base devnet (a
// block every 50 ms), 16 concurrent senders over real HTTP, each sending 1
// USDC at a time from its own agent. Every answer is 200 completed: the
// request returns once both legs (recipient and treasury fee) are
// included, so its latency is the time from request to completed. Reports
// sends/s, mean and p99 latency. SQLite by default, PostgreSQL with
// TEST_DATABASE_URL.
func BenchmarkSendBase(b *testing.B) {
	c := startSendChains(b)
	api := c.api(b, nil)
	svc, srv, db := api.Svc, api.Server, api.DB
	ctx := context.Background()

	// One agent per sender, verified to tier T3 (120 requests a minute):
	// a sender uses a fresh agent every 100 sends, so the rate limit never
	// answers first.
	perAgent := 100
	agentsPer := (b.N + benchClients*perAgent - 1) / (benchClients * perAgent)
	if agentsPer < 1 {
		agentsPer = 1
	}
	type sender struct{ keys []string }
	senders := make([]sender, benchClients)
	recipient, err := svc.QuickRegister(ctx, fmt.Sprintf("bench_to_%d", time.Now().UnixNano()%1e9))
	if err != nil {
		b.Fatal(err)
	}
	for i := range senders {
		for j := 0; j < agentsPer; j++ {
			reg, err := svc.QuickRegister(ctx, fmt.Sprintf("bench_%d_%d_%d", i, j, time.Now().UnixNano()%1e6))
			if err != nil {
				b.Fatal(err)
			}
			if err := db.Ent.Agent.UpdateOneID(reg.Agent.ID).
				SetPartnerVerified(true).SetExternalWalletVerified(true).SetHumanVerified(true).Exec(ctx); err != nil {
				b.Fatal(err)
			}
			if err := svc.RecomputeTrust(ctx, reg.Agent.ID); err != nil {
				b.Fatal(err)
			}
			c.fund(b, chains.Base, reg.Wallets[1].Address, int64(perAgent+1)*1_000_000)
			senders[i].keys = append(senders[i].keys, reg.APIKey)
		}
	}
	body := fmt.Sprintf(`{"to_username":%q,"amount_usd":1,"chain":"base"}`, recipient.Agent.Username)
	client := benchHTTPClient()
	defer client.CloseIdleConnections()

	latencies := make([]time.Duration, b.N)
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		failMu  sync.Mutex
		failure string
	)
	b.ResetTimer()
	start := time.Now()
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := 0
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				key := senders[s].keys[min(sent/perAgent, len(senders[s].keys)-1)]
				sent++
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/agents/me/wallet/send", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Agent-Key", key)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"status":"completed"`) {
						err = fmt.Errorf("status %d: %s", resp.StatusCode, out)
					}
				}
				latencies[i] = time.Since(t0)
				if err != nil {
					failMu.Lock()
					failure = err.Error()
					failMu.Unlock()
					next.Store(int64(b.N))
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failure != "" {
		b.Fatal(failure)
	}
	var total time.Duration
	for _, l := range latencies {
		total += l
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "sends/s")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "mean-ms")
	b.ReportMetric(float64(latencies[min(b.N-1, b.N*99/100)].Milliseconds()), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
