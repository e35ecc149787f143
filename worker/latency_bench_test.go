package worker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/shopspring/decimal"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/chaincursor"
	"agentpay/internal/testenv"
)

// latencyConfirmations is the depth a deposit needs in the latency
// benchmark (the devnets' default in `agentpay dev`).
const latencyConfirmations = 3

// BenchmarkConfirmedWebhookLatency measures the time from the block that
// completes a payment's confirmations to the payment.confirmed webhook at
// a loopback receiver, through the real worker as `agentpay worker` runs it
// (worker.New with only DB, Service and Logger, so its defaults are what is
// measured; the service inserts jobs with the worker's own River client) on
// the test database, SQLite or PostgreSQL, with a base devnet.
//
// The benchmark produces the blocks itself (the devnet has no ticker), so
// it knows when each one is sealed: for each of b.N payments, one after the
// other at a random moment (up to a second apart, so they do not fall in
// step with the periodic scans), it creates a session, selects base, pays the exact amount (one
// block), waits a little as a chain would, then seals the blocks up to the
// required depth, noting the time the last one is sealed, and waits for the
// receiver to get the session's payment.confirmed. Reports the mean, p50,
// p99 and max of that delay.
//
//	go test ./worker -run '^$' -bench ConfirmedWebhookLatency -benchtime 20x
func BenchmarkConfirmedWebhookLatency(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := testenv.New(b, testenv.Options{
		Chains:        []chains.Name{chains.Base},
		Confirmations: map[chains.Name]uint64{chains.Base: latencyConfirmations},
	})
	jobs := &boundJobs{}
	h := newHarness(b, env, agentpay.Config{Jobs: jobs})
	db, svc, logger, chain := h.db, h.svc, env.Logger, env.EVM(chains.Base)

	w, err := New(Config{DB: db, Service: svc, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	jobs.bind(w.Client())
	// The merchant's receiver: when each session's payment.confirmed came.
	// Registered once the jobs are bound (registering mails the contact
	// e-mail through the outbox).
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
	// The first scan puts the chain's cursor at the head: payments come
	// after it.
	deadline := time.Now().Add(30 * time.Second)
	for !db.Ent.ChainCursor.Query().Where(chaincursor.Chain(string(chains.Base)), chaincursor.ModeEQ(chaincursor.ModeTest)).ExistX(ctx) {
		if time.Now().After(deadline) {
			b.Fatal("the worker did not scan base")
		}
		chain.Commit()
		time.Sleep(50 * time.Millisecond)
	}

	amount := decimal.RequireFromString("12.34")
	delays := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		// Payments come at random moments, not in step with the scans.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		created, err := svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
		if err != nil {
			b.Fatal(err)
		}
		id := created.Session.ExternalID
		dep, err := svc.SelectPaymentMethod(ctx, id, "", string(chains.Base), agentpay.TokenUSDC)
		if err != nil {
			b.Fatal(err)
		}
		// The payment's block (Send seals it), then the rest of the depth
		// at a short block time; the last block completes the confirmations.
		if _, err := chain.Send(ctx, common.HexToAddress(dep.Address), dep.AmountUnits); err != nil {
			b.Fatal(err)
		}
		var sealed time.Time
		for range latencyConfirmations - 1 {
			time.Sleep(100 * time.Millisecond)
			chain.Commit()
			sealed = time.Now()
		}
		got, err := waitConfirmedHook(receiver, id, 30*time.Second)
		if err != nil {
			b.Fatalf("payment %d: %v", i, err)
		}
		delays = append(delays, got.Sub(sealed))
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
}

// waitConfirmedHook waits until the receiver has the session's first
// payment.confirmed and returns when it arrived.
func waitConfirmedHook(r *testenv.Receiver, session string, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		for _, req := range r.Requests() {
			var ev struct {
				Data struct {
					Session string `json:"session_external_id"`
				} `json:"data"`
			}
			if req.Event == agentpay.EventPaymentConfirmed && json.Unmarshal(req.Body, &ev) == nil && ev.Data.Session == session {
				return req.At, nil
			}
		}
		select {
		case <-r.Arrived():
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			return time.Time{}, errors.New("no payment.confirmed webhook within " + timeout.String())
		}
	}
}

// boundJobs inserts jobs with the worker's River client once bound, as
// cmd/agentpay wires `agentpay worker`: the service needs an inserter
// before the worker (which needs the service) exists.
type boundJobs struct {
	client atomic.Pointer[river.Client[*sql.Tx]]
}

func (j *boundJobs) bind(c *river.Client[*sql.Tx]) { j.client.Store(c) }

func (j *boundJobs) InsertTx(ctx context.Context, tx *sql.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	c := j.client.Load()
	if c == nil {
		return nil, errors.New("job inserter used before the worker's client was bound")
	}
	return c.InsertTx(ctx, tx, args, opts)
}
