package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"agentpay/ent"
	"agentpay/ent/webhookdelivery"
)

// BenchmarkWebhookDeliveries measures webhook deliveries per second through
// the real worker (River on the test database, SQLite or PostgreSQL) to a
// receiver on loopback that answers 200 at once. b.N events are committed
// in one transaction while the worker runs; the clock runs from the commit
// until every delivery is recorded as succeeded. A merchant's first
// delivery is tried alone (its receiver is new); after it, a delivery job
// claims a batch of the merchant's due deliveries (agentpay's
// webhook_batch.go): one statement claims up to 100, one reads them with
// their events and merchant, each is posted on one of the cap's lanes
// (opening the secret, signing twice, the HTTP POST) and recorded with its
// delivery's state and feed line (a statement or transaction shared with
// the tries ended at the same time), which removes the delivery's River job
// unless River is running it. The other deliveries' jobs that River
// fetched before their delivery was recorded are snoozed (to their lease's
// end, or about a second while the batch runs) and removed by the
// recording then.
//
// The events belong to 50 merchants (the machinery's throughput), or all to
// one (a burst of one merchant: its cap of tries in flight,
// DefaultWebhookMerchantConcurrency, bounds how many are sent at once: a
// batch's lanes). Each reports
// deliveries/s and that figure over its goal (of-goal: 10,000/s for 50
// merchants, 5,000/s for one).
//
//	go test -run '^$' -bench WebhookDeliveries -benchtime 5000x ./worker
func BenchmarkWebhookDeliveries(b *testing.B) {
	for _, merchants := range []int{50, 1} {
		b.Run(fmt.Sprintf("merchants=%d", merchants), func(b *testing.B) { benchmarkWebhookDeliveries(b, merchants) })
	}
}

func benchmarkWebhookDeliveries(b *testing.B, merchants int) {
	h := newWebhookHarness(b, nil)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
	}))
	b.Cleanup(srv.Close)
	ms := make([]*ent.Merchant, merchants)
	for i := range ms {
		ms[i], _ = h.merchant(b, srv.URL)
	}
	h.runWorker(b)
	time.Sleep(300 * time.Millisecond) // the worker is up and polling

	b.ResetTimer()
	h.recordFor(b, ms, b.N)
	start := time.Now()
	ctx := context.Background()
	succeeded := func() int {
		n, err := h.db.Ent.WebhookDelivery.Query().Where(webhookdelivery.StatusEQ(webhookdelivery.StatusSucceeded)).Count(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(5 * time.Minute)
	for hits.Load() < int64(b.N) || succeeded() < b.N {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d delivered", hits.Load(), b.N)
		}
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if hits.Load() != int64(b.N) {
		b.Fatalf("receiver got %d requests for %d events", hits.Load(), b.N)
	}
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "deliveries/s")
	// The figure against its goal (issue 26): 10,000/s over many
	// merchants, 5,000/s for one; 1 or more meets it.
	goal := 10_000.0
	if merchants == 1 {
		goal = 5_000
	}
	b.ReportMetric(rate/goal, "of-goal")
}
