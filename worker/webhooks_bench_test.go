package worker

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"agentpay/ent/webhookdelivery"
)

// BenchmarkWebhookDeliveries measures webhook deliveries per second through
// the real worker (River on the test database, SQLite or PostgreSQL) to a
// receiver on loopback that answers 200 at once. b.N events are committed
// in one transaction while the worker runs; the clock runs from the commit
// until every delivery is recorded as succeeded. Each delivery is: the
// River fetch, reading the delivery, event and merchant, opening the
// secret, signing twice, the HTTP POST, recording the attempt and the
// delivery's state in one transaction, and River completing the job.
//
//	go test -run '^$' -bench WebhookDeliveries -benchtime 5000x ./worker
func BenchmarkWebhookDeliveries(b *testing.B) {
	h := newWebhookHarness(b, nil)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
	}))
	b.Cleanup(srv.Close)
	m, _ := h.merchant(b, srv.URL)
	h.runWorker(b)
	time.Sleep(300 * time.Millisecond) // the worker is up and polling

	b.ResetTimer()
	h.record(b, m, b.N)
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
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
}
