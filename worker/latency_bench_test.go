package worker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/shopspring/decimal"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/chaincursor"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
	"agentpay/internal/jobs"
	"agentpay/internal/store"
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
	phases := make([]latencyPhases, 0, b.N)
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
		phases = append(phases, confirmedPhases(ctx, b, w.Client(), db, created.Session.ID, sealed, got))
	}
	b.StopTimer()
	reportPhases(b, phases)
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

// latencyPhases is where one payment's delay went, from River's own
// timestamps (the database's clock, the same machine's) around the scan
// job that confirmed it and the webhook job that delivered it. On
// PostgreSQL a job's created_at is now(), its inserting transaction's
// start: there scan ends when the scan's transaction begins, and
// hookPickup holds that transaction.
type latencyPhases struct {
	// total: the last block's sealing to the receiver's request.
	total time.Duration
	// enqueue: sealing to the scan job's insert (the head watch's look, and
	// its waits behind a scan still running); negative when the scan was
	// already waiting.
	enqueue time.Duration
	// pickup: the scan job's insert to its start.
	pickup time.Duration
	// scan: the scan's start to its transaction's insert of the webhook job.
	scan time.Duration
	// completed: that insert to the scan job's finalized_at (the time the
	// scan finished, in its transaction or as River's completer was told:
	// not when the completer wrote it, whose lag shows in the next
	// payment's enqueue, as a scan refused while this one is running).
	completed time.Duration
	// hookPickup: the webhook job's insert to its start (the rest of the
	// scan's transaction, then the webhook queue's poll).
	hookPickup time.Duration
	// deliver: the webhook job's start to the receiver's request.
	deliver time.Duration
	ok      bool
}

// confirmedPhases finds the webhook job of the session's payment.confirmed
// and the scan job whose transaction inserted it (the last scan started
// before it), and splits the delay between them.
func confirmedPhases(ctx context.Context, b *testing.B, client *river.Client[*sql.Tx], db *store.DB, session uuid.UUID, sealed, received time.Time) latencyPhases {
	b.Helper()
	out := latencyPhases{total: received.Sub(sealed)}
	d, err := db.Ent.WebhookDelivery.Query().
		Where(webhookdelivery.HasEventWith(webhookevent.SessionID(session), webhookevent.EventType(agentpay.EventPaymentConfirmed))).
		First(ctx)
	if err != nil {
		b.Logf("no payment.confirmed delivery: %v", err)
		return out
	}
	recent := func(kind string) []*rivertype.JobRow {
		res, err := client.JobList(ctx, river.NewJobListParams().Kinds(kind).OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(200))
		if err != nil {
			b.Fatal(err)
		}
		return res.Jobs
	}
	var hook *rivertype.JobRow
	for _, j := range recent(jobs.DeliverWebhookArgs{}.Kind()) {
		var args jobs.DeliverWebhookArgs
		if json.Unmarshal(j.EncodedArgs, &args) == nil && args.DeliveryID == d.ID {
			hook = j
			break
		}
	}
	if hook == nil {
		b.Logf("the payment's webhook job was not found")
		return out
	}
	// The scan whose transaction inserted the webhook job: the last one
	// started before that insert. Its completion may not be recorded yet
	// (River's completer records it later unless the scan did): its
	// FinalizedAt is waited for, as part of what is measured.
	var scan *rivertype.JobRow
	for wait := time.Now().Add(5 * time.Second); time.Now().Before(wait); time.Sleep(10 * time.Millisecond) {
		scan = nil
		for _, j := range recent(ScanChainArgs{}.Kind()) {
			if j.AttemptedAt != nil && !j.AttemptedAt.After(hook.CreatedAt) {
				scan = j
				break
			}
		}
		if scan != nil && scan.FinalizedAt != nil {
			break
		}
	}
	if hook.AttemptedAt == nil || scan == nil || scan.FinalizedAt == nil {
		b.Logf("the payment's scan job was not found")
		return out
	}
	// A scan that failed was retried a second later (NextRetry): say why.
	for _, e := range scan.Errors {
		b.Logf("scan job %d attempt %d failed at %s: %s", scan.ID, e.Attempt, e.At.Format(time.TimeOnly+".000"), e.Error)
	}
	out.enqueue = scan.CreatedAt.Sub(sealed)
	out.pickup = scan.AttemptedAt.Sub(scan.CreatedAt)
	out.scan = hook.CreatedAt.Sub(*scan.AttemptedAt)
	out.completed = scan.FinalizedAt.Sub(hook.CreatedAt)
	out.hookPickup = hook.AttemptedAt.Sub(hook.CreatedAt)
	out.deliver = received.Sub(*hook.AttemptedAt)
	out.ok = true
	return out
}

// reportPhases logs each payment's phases, slowest first, and reports
// each phase's mean.
func reportPhases(b *testing.B, phases []latencyPhases) {
	b.Helper()
	sort.Slice(phases, func(i, j int) bool { return phases[i].total > phases[j].total })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var sum latencyPhases
	n := 0
	lines := "total enqueue pickup scan completed hook-pickup deliver (ms)"
	for _, p := range phases {
		if !p.ok {
			continue
		}
		n++
		sum.enqueue += p.enqueue
		sum.pickup += p.pickup
		sum.scan += p.scan
		sum.completed += p.completed
		sum.hookPickup += p.hookPickup
		sum.deliver += p.deliver
		lines += fmt.Sprintf("\n%6.1f %6.1f %6.1f %6.1f %6.1f %6.1f %6.1f", ms(p.total), ms(p.enqueue), ms(p.pickup),
			ms(p.scan), ms(p.completed), ms(p.hookPickup), ms(p.deliver))
	}
	b.Log(lines)
	if n == 0 {
		return
	}
	mean := func(d time.Duration) float64 { return ms(d / time.Duration(n)) }
	b.ReportMetric(mean(sum.enqueue), "enqueue-ms")
	b.ReportMetric(mean(sum.pickup), "pickup-ms")
	b.ReportMetric(mean(sum.scan), "scan-ms")
	b.ReportMetric(mean(sum.completed), "completed-ms")
	b.ReportMetric(mean(sum.hookPickup), "hook-pickup-ms")
	b.ReportMetric(mean(sum.deliver), "deliver-ms")
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
