package agentpay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/internal/testdb/freshdb"
)

// TestWebhookTriesShareStatements: tries delivered at once are recorded in
// shared statements, each with its own attempt and delivery state; a try of
// a delivery already finished is logged without changing it.
func TestWebhookTriesShareStatements(t *testing.T) {
	if !freshdb.IsPostgres() {
		t.Skip("PostgreSQL only (SQLite records each try in its own transaction): set TEST_DATABASE_URL")
	}
	ctx := context.Background()
	svc := newWebhookTestService(t)
	ok := newWebhookReceiver(t, 200)
	failing := newWebhookReceiver(t, 500)
	mOK, _ := createWebhookMerchant(t, svc, ok.URL)
	mFail, _ := createWebhookMerchant(t, svc, failing.URL)

	const n = 40
	ids := make([]uuid.UUID, n)
	for i := range ids {
		m := mOK
		if i%2 == 1 {
			m = mFail
		}
		ids[i] = onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(m, false)).ID).ID
	}
	// One delivery is already finished: its try is logged, nothing else.
	require.NoError(t, svc.cfg.DB.Ent.WebhookDelivery.UpdateOneID(ids[0]).SetStatus(webhookdelivery.StatusSucceeded).Exec(ctx))

	// The first batch is held on a table lock until every other try has
	// arrived, so the count below does not depend on how the sends happen
	// to overlap: the held batch, then one batch for all the rest.
	b := webhookTryBatchers.For(svc.cfg.DB)
	statementsBefore, triesBefore := b.statements.Load(), b.calls.Submitted()
	lock, err := svc.cfg.DB.SQL.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer lock.Rollback() //nolint:errcheck // committed below
	_, err = lock.ExecContext(ctx, "LOCK TABLE webhook_deliveries IN EXCLUSIVE MODE")
	require.NoError(t, err)
	start := make(chan struct{})
	results := make([]WebhookDeliveryResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = svc.DeliverWebhook(ctx, id)
		}()
	}
	close(start)
	require.Eventually(t, func() bool { return b.calls.Submitted()-triesBefore == n-1 }, 30*time.Second, 5*time.Millisecond,
		"every try but the finished delivery's reaches the batcher")
	require.NoError(t, lock.Commit())
	wg.Wait()
	require.Equal(t, int64(2), b.statements.Load()-statementsBefore, "the tries that waited shared one statement")

	for i, id := range ids {
		require.NoError(t, errs[i])
		d, err := svc.cfg.DB.Ent.WebhookDelivery.Get(ctx, id)
		require.NoError(t, err)
		attempts, err := svc.cfg.DB.Ent.WebhookAttempt.Query().Where(webhookattempt.DeliveryID(id)).All(ctx)
		require.NoError(t, err)
		switch {
		case i == 0:
			require.Equal(t, webhookdelivery.StatusSucceeded, d.Status)
			require.Zero(t, d.Attempts, "a finished delivery is not counted again")
			require.Empty(t, attempts, "nothing was sent for it")
		case i%2 == 0:
			require.Equal(t, webhookdelivery.StatusSucceeded, d.Status)
			require.True(t, results[i].Done)
			require.Equal(t, 1, d.Attempts)
			require.Len(t, attempts, 1)
			require.Equal(t, 200, attempts[0].StatusCode)
			require.NotNil(t, d.CompletedAt)
			require.Nil(t, d.NextAttemptAt)
		default:
			require.Equal(t, webhookdelivery.StatusPending, d.Status)
			require.False(t, results[i].Done)
			require.Equal(t, 1, d.Attempts)
			require.Len(t, attempts, 1)
			require.Equal(t, 500, attempts[0].StatusCode)
			require.Contains(t, attempts[0].Error, "500")
			require.NotNil(t, d.NextAttemptAt)
			require.WithinDuration(t, results[i].RetryAt, *d.NextAttemptAt, time.Microsecond) // stored to the microsecond
			require.Nil(t, d.CompletedAt)
		}
	}
	require.Len(t, ok.requests(), n/2-1)
	require.Len(t, failing.requests(), n/2)
}
