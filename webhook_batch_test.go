package agentpay

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent/webhookdelivery"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
	"agentpay/internal/webhooksend"
)

// TestWebhookBatch: a new receiver's delivery is tried alone; once it has
// answered, one call tries the merchant's other due deliveries with its
// own, each once. A delivery another batch holds is not sent: its job
// waits for the lease's end; given back (Release), it is due again at
// once and the next call sends it.
func TestWebhookBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	rcv := testenv.NewReceiver(t, http.StatusOK)
	m, _ := createWebhookMerchant(t, svc, rcv.URL)
	deliveryOf := func() uuid.UUID {
		return onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(m, false)).ID).ID
	}

	first := deliveryOf()
	res, err := svc.DeliverWebhookBatch(ctx, first, m.ID, false, nil)
	require.NoError(t, err)
	require.True(t, res.Own.Done)
	require.Empty(t, res.Others, "a new receiver's try is alone")
	require.Len(t, rcv.Requests(), 1)

	own := deliveryOf()
	for range 29 {
		deliveryOf()
	}
	res, err = svc.DeliverWebhookBatch(ctx, own, m.ID, false, nil)
	require.NoError(t, err)
	require.True(t, res.Own.Done)
	require.Equal(t, webhookdelivery.StatusSucceeded, res.Own.Status)
	require.Len(t, res.Others, 29)
	require.Len(t, rcv.Requests(), 31)
	seen := map[string]int{}
	for _, r := range rcv.Requests() {
		seen[r.Header.Get("webhook-id")]++
	}
	require.Len(t, seen, 31, "each event sent once")
	ds, err := svc.cfg.DB.Ent.WebhookDelivery.Query().All(ctx)
	require.NoError(t, err)
	for _, d := range ds {
		require.Equal(t, webhookdelivery.StatusSucceeded, d.Status)
		require.Equal(t, 1, d.Attempts)
	}

	// Held by another batch (another process's claim).
	held := deliveryOf()
	now := svc.now().UTC()
	lease := now.Add(webhookLease).Truncate(time.Microsecond)
	ids, err := webhooksend.Claim(ctx, svc.cfg.DB, m.ID, false, held, now, lease, webhookBatchMax)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{held}, ids)
	// Its job waits for the lease's end too, unfetched (River would only
	// find the delivery leased); given back, it is due with it.
	heldRow, err := svc.cfg.DB.Ent.WebhookDelivery.Get(ctx, held)
	require.NoError(t, err)
	require.NotNil(t, heldRow.JobID)
	dbNow := "datetime('now', 'subsec')"
	if testdb.IsPostgres() {
		dbNow = "now()"
	}
	jobLater := fmt.Sprintf("river_job WHERE id = %d AND state = 'available' AND scheduled_at > %s", *heldRow.JobID, dbNow)
	deferred := 0 // SQLite defers no job (webhooksend.Claim)
	if testdb.IsPostgres() {
		deferred = 1
	}
	require.Equal(t, deferred, testdb.CountRows(t, svc.cfg.DB, jobLater), "the held delivery's job is deferred on PostgreSQL")
	res, err = svc.DeliverWebhookBatch(ctx, held, m.ID, false, nil)
	require.NoError(t, err)
	require.False(t, res.Own.Done)
	require.Greater(t, res.Wait, webhookLease-5*time.Second, "waits for the lease's end")
	require.Len(t, rcv.Requests(), 31, "nothing sent")

	require.NoError(t, webhooksend.Release(ctx, svc.cfg.DB, ids, lease, svc.now()))
	require.Equal(t, 0, testdb.CountRows(t, svc.cfg.DB, jobLater), "a given-back delivery's job is due")
	res, err = svc.DeliverWebhookBatch(ctx, held, m.ID, false, nil)
	require.NoError(t, err)
	require.True(t, res.Own.Done)
	require.Len(t, rcv.Requests(), 32)
}

// TestWebhookBatchReportsEveryTryOnce: the job's own delivery is its
// batch's own try wherever the claim's rows come back (RETURNING keeps no
// order), so every try is reported once: the own one as Own, each other
// one to onTried (the worker's metrics).
func TestWebhookBatchReportsEveryTryOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	rcv := testenv.NewReceiver(t, http.StatusOK)
	m, _ := createWebhookMerchant(t, svc, rcv.URL)
	deliveryOf := func() uuid.UUID {
		return onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(m, false)).ID).ID
	}
	_, err := svc.DeliverWebhookBatch(ctx, deliveryOf(), m.ID, false, nil) // the receiver answers: proven
	require.NoError(t, err)
	for range 20 {
		deliveryOf()
	}
	own := deliveryOf() // the newest, not the first row of the table
	var mu sync.Mutex
	reported := map[uuid.UUID]int{}
	res, err := svc.DeliverWebhookBatch(ctx, own, m.ID, false, func(r WebhookDeliveryResult) {
		mu.Lock()
		defer mu.Unlock()
		reported[r.DeliveryID]++
	})
	require.NoError(t, err)
	require.Equal(t, own, res.Own.DeliveryID)
	require.NotNil(t, res.Own.Attempt, "the own delivery's try is the job's own")
	reported[own]++
	require.Len(t, reported, 21)
	for id, n := range reported {
		require.Equal(t, 1, n, "delivery %s reported once", id)
	}
	require.Len(t, rcv.Requests(), 22)
}

// TestWebhookBatchRemovesDoneJobs: on PostgreSQL the try that finishes a
// delivery removes its River job in the statement that records it, so
// River never fetches it for nothing; a delivery still pending (a failed
// try with a retry due) keeps its job, which brings it back, and so does a
// job River is running (the batch's own: River ends it itself). SQLite
// removes none (webhooksend.Claim says why).
func TestWebhookBatchRemovesDoneJobs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		answer   int
		jobsLeft int // of the batch's 10 deliveries, the own one's running job aside
	}{
		{"succeeded", http.StatusOK, 0},
		{"failed with a retry due", http.StatusInternalServerError, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
			rcv := testenv.NewReceiver(t, tc.answer)
			m, _ := createWebhookMerchant(t, svc, rcv.URL)
			deliveryOf := func() uuid.UUID {
				return onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(m, false)).ID).ID
			}
			jobOf := func(id uuid.UUID) int64 {
				d, err := svc.cfg.DB.Ent.WebhookDelivery.Get(ctx, id)
				require.NoError(t, err)
				require.NotNil(t, d.JobID, "the delivery knows its job")
				return *d.JobID
			}
			_, err := svc.DeliverWebhookBatch(ctx, deliveryOf(), m.ID, false, nil) // the receiver answers: proven
			require.NoError(t, err)
			own := deliveryOf()
			others := make([]uuid.UUID, 10)
			for i := range others {
				others[i] = deliveryOf()
			}
			// River is running the own delivery's job: the batch is its run.
			_, err = svc.cfg.DB.SQL.ExecContext(ctx, fmt.Sprintf(`UPDATE river_job SET state = 'running', attempt = 1 WHERE id = %d`, jobOf(own)))
			require.NoError(t, err)

			res, err := svc.DeliverWebhookBatch(ctx, own, m.ID, false, nil)
			require.NoError(t, err)
			require.Len(t, res.Others, 10)
			left := 0
			for _, id := range others {
				left += testdb.CountRows(t, svc.cfg.DB, fmt.Sprintf("river_job WHERE id = %d", jobOf(id)))
			}
			want := tc.jobsLeft
			if !testdb.IsPostgres() {
				want = len(others)
			}
			require.Equal(t, want, left, "the others' jobs left")
			require.Equal(t, 1, testdb.CountRows(t, svc.cfg.DB, fmt.Sprintf("river_job WHERE id = %d AND state = 'running'", jobOf(own))),
				"a running job is River's to end")
		})
	}
}
