package worker

import (
	"context"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/testenv"
)

// agentPayBlockTime is the base devnet's block interval in the agent-pay
// latency benchmark: `agentpay dev`'s default (DEV_BLOCK_TIME).
const agentPayBlockTime = time.Second

// agentPayServiceBudget is what issue 26 allows the service beyond the
// chain's confirmations: request to confirmed webhook.
const agentPayServiceBudget = 300 * time.Millisecond

// BenchmarkAgentPayConfirmedLatency measures an agent paying a checkout
// session on the base devnet, from the request (Service.PayCheckout, what
// POST /checkout/pay/{id}/agent-pay and the MCP pay_checkout tool call) to
// the merchant's payment.confirmed webhook at a loopback receiver, through
// the real worker as `agentpay worker` runs it (its default scan interval
// and delivery), on the test database, SQLite or PostgreSQL. The devnet
// makes a block every agentPayBlockTime and a payment needs
// latencyConfirmations; the goal (issue 26) is at most confirmations ×
// block time + 300 ms (3.3 s here): the chain's own wait plus 300 ms for
// the service.
// Reports the mean, p50, p99 and max.
//
//	go test ./worker -run '^$' -bench AgentPayConfirmedLatency -benchtime 10x
func BenchmarkAgentPayConfirmedLatency(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := testenv.New(b, testenv.Options{
		Chains:        []chains.Name{chains.Base},
		BlockTime:     agentPayBlockTime,
		Confirmations: map[chains.Name]uint64{chains.Base: latencyConfirmations},
	})
	jobs := &boundJobs{}
	h := newHarness(b, env, agentpay.Config{Jobs: jobs, AgentMode: agentpay.ModeTest})
	db, svc, logger := h.db, h.svc, env.Logger

	// The worker first: registering the merchant mails it.
	w, err := New(Config{DB: db, Service: svc, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	jobs.bind(w.Client())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			b.Error("worker did not stop")
		}
	})

	receiver := testenv.NewReceiver(b, http.StatusOK)
	name, email, hook := "Shop", "shop@example.com", receiver.URL
	reg, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email, WebhookURL: &hook})
	if err != nil {
		b.Fatal(err)
	}
	auth, err := svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	if err != nil {
		b.Fatal(err)
	}
	buyer, err := svc.QuickRegister(ctx, "bench_buyer")
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range buyer.Wallets {
		if w.Chain == string(chains.Base) {
			env.Fund(b, chains.Base, w.Address, int64(b.N+1)*20_000_000)
		}
	}

	amount := decimal.RequireFromString("12.34")
	delays := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		created, err := svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
		if err != nil {
			b.Fatal(err)
		}
		id := created.Session.ExternalID
		start := time.Now()
		res, _, err := svc.PayCheckout(ctx, buyer.Agent, agentpay.PayCheckoutRequest{ExternalID: id})
		if err != nil {
			b.Fatalf("payment %d: %v", i, err)
		}
		if res.Payment == nil {
			b.Fatalf("payment %d: answered %s without its payment", i, res.Status)
		}
		got, err := waitConfirmedHook(receiver, id, 60*time.Second)
		if err != nil {
			b.Fatalf("payment %d: %v", i, err)
		}
		delays = append(delays, got.Sub(start))
	}
	b.StopTimer()
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	var sum time.Duration
	for _, d := range delays {
		sum += d
	}
	n := len(delays)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(sum/time.Duration(n)), "mean-ms")
	b.ReportMetric(ms(delays[n/2]), "p50-ms")
	b.ReportMetric(ms(delays[min(n-1, n*99/100)]), "p99-ms")
	b.ReportMetric(ms(delays[n-1]), "max-ms")
	b.ReportMetric(ms(latencyConfirmations*agentPayBlockTime+agentPayServiceBudget), "goal-ms")
}

// BenchmarkInternalPayment measures an agent paying a checkout session of
// one of our merchants settled on the internal ledger
// (Config.InternalSettlement, settle_internal.go), from the request
// (Service.PayCheckout, as agent-pay and the MCP tool call it) to its
// answer, which is the payment confirmed: no chain transaction is waited
// for. The real worker runs beside it, as `agentpay worker` does
// (delivering the webhooks, collecting the payments from the wallet to the
// treasury on the base devnet), on the test database, SQLite or
// PostgreSQL. Beside BenchmarkAgentPayConfirmedLatency, the on-chain
// path; goal p99 under 50 ms. Reports the mean, p50, p99 and max.
//
//	go test ./worker -run '^$' -bench InternalPayment -benchtime 200x
func BenchmarkInternalPayment(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := testenv.New(b, testenv.Options{
		Chains:        []chains.Name{chains.Base},
		BlockTime:     agentPayBlockTime,
		Confirmations: map[chains.Name]uint64{chains.Base: latencyConfirmations},
	})
	jobs := &boundJobs{}
	h := newHarness(b, env, agentpay.Config{Jobs: jobs, AgentMode: agentpay.ModeTest, InternalSettlement: true})
	db, svc, logger := h.db, h.svc, env.Logger

	// The worker first: registering the merchant mails it.
	w, err := New(Config{DB: db, Service: svc, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	jobs.bind(w.Client())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			b.Error("worker did not stop")
		}
	})

	receiver := testenv.NewReceiver(b, http.StatusOK)
	name, email, hook := "Shop", "shop@example.com", receiver.URL
	reg, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email, WebhookURL: &hook})
	if err != nil {
		b.Fatal(err)
	}
	auth, err := svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	if err != nil {
		b.Fatal(err)
	}
	buyer, err := svc.QuickRegister(ctx, "bench_buyer")
	if err != nil {
		b.Fatal(err)
	}
	// Tier T3, so the daily limit never answers first.
	if err := db.Ent.Agent.UpdateOneID(buyer.Agent.ID).
		SetPartnerVerified(true).SetExternalWalletVerified(true).SetHumanVerified(true).Exec(ctx); err != nil {
		b.Fatal(err)
	}
	if err := svc.RecomputeTrust(ctx, buyer.Agent.ID); err != nil {
		b.Fatal(err)
	}
	agent, err := db.Ent.Agent.Get(ctx, buyer.Agent.ID)
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range buyer.Wallets {
		if w.Chain == string(chains.Base) {
			env.Fund(b, chains.Base, w.Address, int64(b.N+1)*1_000_000)
		}
	}

	amount := decimal.RequireFromString("0.50")
	delays := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		created, err := svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		res, _, err := svc.PayCheckout(ctx, agent, agentpay.PayCheckoutRequest{ExternalID: created.Session.ExternalID})
		if err != nil {
			b.Fatalf("payment %d: %v", i, err)
		}
		delays = append(delays, time.Since(start))
		if res.Status != "confirmed" {
			b.Fatalf("payment %d: answered %s, not confirmed", i, res.Status)
		}
	}
	b.StopTimer()
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	var sum time.Duration
	for _, d := range delays {
		sum += d
	}
	n := len(delays)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(sum/time.Duration(n)), "mean-ms")
	b.ReportMetric(ms(delays[n/2]), "p50-ms")
	b.ReportMetric(ms(delays[min(n-1, n*99/100)]), "p99-ms")
	b.ReportMetric(ms(delays[n-1]), "max-ms")
	b.ReportMetric(50, "goal-ms")
}
