package agentpay

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"agentpay/internal/store"
)

// Webhook tries on PostgreSQL are recorded in shared statements (group
// commit, as the status reads are batched): a try that finishes while
// another batch is being written joins the next one, which writes every
// waiting try's attempt and delivery state in one statement and one commit.
// Recording a try waited on the WAL flush of its own commit (LWLock
// WALWrite, IO WALSync in pg_stat_activity); one flush now covers a batch.
// Each try is still committed before DeliverWebhook returns, so its job
// completes only once its outcome is durable.

// webhookTryBatchMax bounds the tries one statement records.
const webhookTryBatchMax = 500

// webhookTryBatcher records the tries of one pool (store.GroupBatch).
type webhookTryBatcher struct {
	db    *store.DB
	calls *store.GroupBatch[*webhookTryCall]
	// statements counts the batches written (tests).
	statements atomic.Int64
}

type webhookTryCall struct {
	try     webhookTry
	attempt uuid.UUID
	done    chan struct{}
	applied bool
	err     error
}

// webhookTryBatchers holds each DB's batcher, shared by every Service on
// it; it holds nothing to release.
var webhookTryBatchers = store.NewPerDB(newWebhookTryBatcher, nil)

func newWebhookTryBatcher(db *store.DB) *webhookTryBatcher {
	b := &webhookTryBatcher{db: db}
	b.calls = store.NewGroupBatch(webhookTryBatchMax, b.serve)
	return b
}

// record writes the try (its attempt row with id attempt, and the
// delivery's new state if still pending) and reports whether the delivery
// was still pending. It returns once the batch holding it has committed.
func (b *webhookTryBatcher) record(ctx context.Context, t webhookTry, attempt uuid.UUID) (bool, error) {
	c := &webhookTryCall{try: t, attempt: attempt, done: make(chan struct{})}
	b.calls.Submit(c)
	select {
	case <-c.done:
		return c.applied, c.err
	case <-ctx.Done():
		// The batch may still commit it: the caller's job runs again and
		// finds the delivery as that commit left it.
		return false, ctx.Err()
	}
}

// serve writes a batch and answers its calls.
func (b *webhookTryBatcher) serve(batch []*webhookTryCall) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	applied, err := b.write(ctx, batch)
	cancel()
	for _, c := range batch {
		c.applied, c.err = applied[c.try.deliveryID], err
		close(c.done)
	}
}

// write runs recordWebhookTriesPostgres for the batch and returns the
// deliveries it updated.
func (b *webhookTryBatcher) write(ctx context.Context, batch []*webhookTryCall) (map[uuid.UUID]bool, error) {
	b.statements.Add(1)
	n := len(batch)
	var (
		deliveries, statuses, errs = make([]string, n), make([]string, n), make([]string, n)
		attempts                   = make([]string, n)
		ats, nows                  = make([]string, n), make([]string, n)
		nexts, completions         = make([]sql.NullString, n), make([]sql.NullString, n)
		codes, durations           = make([]int64, n), make([]int64, n)
	)
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	for i, c := range batch {
		t := c.try
		deliveries[i], attempts[i], statuses[i], errs[i] = t.deliveryID.String(), c.attempt.String(), string(t.status), t.errText
		ats[i], nows[i] = ts(t.at), ts(t.now)
		codes[i], durations[i] = int64(t.statusCode), t.duration.Milliseconds()
		if t.nextAttemptAt != nil {
			nexts[i] = sql.NullString{String: ts(*t.nextAttemptAt), Valid: true}
		} else {
			completions[i] = sql.NullString{String: ts(t.now), Valid: true}
		}
	}
	rows, err := b.db.QueryCached(ctx, recordWebhookTriesPostgres,
		pq.StringArray(deliveries), pq.StringArray(ats), pq.StringArray(statuses), pq.Array(nexts), pq.Array(completions),
		pq.StringArray(nows), pq.StringArray(attempts), pq.Array(codes), pq.Array(durations), pq.StringArray(errs))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	applied := make(map[uuid.UUID]bool, n)
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		applied[id] = true
	}
	return applied, rows.Err()
}

// recordWebhookTriesPostgres records many tries: each writes its attempt
// row, and updates its delivery (attempts + 1, status, next or completion
// time) if it is still pending. Arguments are arrays of, in order, delivery ids, attempt times, statuses, next attempts
// (NULL when done), completions (NULL while pending), now, attempt ids,
// status codes, durations (ms) and errors. It answers the ids of the
// deliveries it updated (those still pending).
const recordWebhookTriesPostgres = `WITH i AS (
	SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::timestamptz[], $5::timestamptz[],
		$6::timestamptz[], $7::uuid[], $8::bigint[], $9::bigint[], $10::text[])
		AS t(delivery_id, at, status, next_at, completed_at, now, attempt_id, status_code, duration_ms, error)
), d AS (
	UPDATE webhook_deliveries w
	SET attempts = w.attempts + 1, last_attempt_at = i.at, status = i.status,
		next_attempt_at = i.next_at, completed_at = i.completed_at, updated_at = i.now
	FROM i
	WHERE w.id = i.delivery_id AND w.status = 'pending'
	RETURNING w.id
), a AS (
	INSERT INTO webhook_attempts (id, created_at, updated_at, delivery_id, status_code, duration_ms, error, at)
	SELECT attempt_id, now, now, delivery_id, status_code, duration_ms, error, at FROM i
)
SELECT id FROM d`
