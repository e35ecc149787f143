package webhooksend

import (
	"context"
	"database/sql"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"agentpay/internal/store"
)

// Try is one try to record: its attempt row, its delivery's new state and
// its line in the merchant's feed.
type Try struct {
	AttemptID  uuid.UUID
	DeliveryID uuid.UUID
	At         time.Time
	StatusCode int
	Duration   time.Duration
	Error      string
	// Status is the delivery's status after the try.
	Status string
	// NextAttemptAt is the delivery's next try; nil once it is done.
	NextAttemptAt *time.Time
	Now           time.Time
	// MerchantID, Livemode and EventID place the try in its merchant's
	// feed; FeedLine is the line's data (JSON).
	MerchantID uuid.UUID
	Livemode   bool
	EventID    uuid.UUID
	FeedLine   string
}

// RecordPostgres records t on PostgreSQL with the tries recorded at the same
// time (store.Batched, group commit): a try that finishes while another
// batch is being written joins the next one, which writes every waiting
// try's attempt, delivery state and feed line in one statement
// (recordTriesSQL) and one commit, at most 500 tries a statement. One WAL
// flush covers a batch, where a try each waited on its own (LWLock
// WALWrite, IO WALSync in pg_stat_activity). The answer is whether t's
// delivery was still pending (applied); its attempt is written either way.
// When ctx ends first the batch may still commit t.
func RecordPostgres(ctx context.Context, db *store.DB, t Try) (applied bool, err error) {
	return triesPostgres.Do(ctx, db, t)
}

// Counts reports how many tries RecordPostgres was given on db and in how
// many statements it wrote them (tests).
func Counts(db *store.DB) (tries, statements int64) { return triesPostgres.Counts(db) }

var triesPostgres = store.NewBatched(store.BatchSpec[uuid.UUID, Try, bool]{
	SQL:  recordTriesSQL,
	Args: triesArgs,
	Scan: func(rows *sql.Rows, applied map[uuid.UUID]bool) error {
		var id uuid.NullUUID // NULL: a feed line's notification
		if err := rows.Scan(&id); err != nil {
			return err
		}
		if id.Valid {
			applied[id.UUID] = true
		}
		return nil
	},
	Key:     func(t Try) uuid.UUID { return t.DeliveryID },
	Max:     500,
	Timeout: 30 * time.Second,
})

// triesArgs are recordTriesSQL's arrays for tries.
func triesArgs(tries []Try) []any {
	n := len(tries)
	var (
		deliveries, statuses, errs = make([]string, n), make([]string, n), make([]string, n)
		attempts                   = make([]string, n)
		ats, nows                  = make([]string, n), make([]string, n)
		nexts, completions         = make([]sql.NullString, n), make([]sql.NullString, n)
		codes, durations           = make([]int64, n), make([]int64, n)
		merchants, events, feeds   = make([]string, n), make([]string, n), make([]string, n)
		livemodes                  = make([]bool, n)
	)
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	for i, t := range tries {
		deliveries[i], attempts[i], statuses[i], errs[i] = t.DeliveryID.String(), t.AttemptID.String(), t.Status, t.Error
		ats[i], nows[i] = ts(t.At), ts(t.Now)
		codes[i], durations[i] = int64(t.StatusCode), t.Duration.Milliseconds()
		merchants[i], livemodes[i], events[i], feeds[i] = t.MerchantID.String(), t.Livemode, t.EventID.String(), t.FeedLine
		if t.NextAttemptAt != nil {
			nexts[i] = sql.NullString{String: ts(*t.NextAttemptAt), Valid: true}
		} else {
			completions[i] = sql.NullString{String: ts(t.Now), Valid: true}
		}
	}
	return []any{pq.StringArray(deliveries), pq.StringArray(ats), pq.StringArray(statuses), pq.Array(nexts), pq.Array(completions),
		pq.StringArray(nows), pq.StringArray(attempts), pq.Array(codes), pq.Array(durations), pq.StringArray(errs),
		pq.StringArray(merchants), pq.BoolArray(livemodes), pq.StringArray(events), pq.StringArray(feeds)}
}

// recordTriesSQL records many tries (PostgreSQL): each writes its attempt
// row, and updates its delivery (attempts + 1, status, next or completion
// time) if it is still pending. Arguments are arrays of, in order, delivery
// ids, attempt times, statuses, next attempts (NULL when done), completions
// (NULL while pending), now, attempt ids, status codes, durations (ms),
// errors, and for the merchant feed (the root's merchantfeed.go) merchant
// ids, livemodes, event ids and line data. It answers the ids of the
// deliveries it updated (those still pending), and a NULL for each feed
// line, whose notification (pg_notify, delivered on commit) it sends.
//
// A delivery it finishes (succeeded or failed) loses its River job in the
// same statement, so River never fetches a job whose delivery is done (a
// batch's deliveries each have one, webhook_batch.go), unless River holds
// the job: running (it ends by itself, finding the delivery done; a
// batch's own job is running) or locked by a fetch right now (SKIP
// LOCKED: it becomes running). A delivery left pending (a
// failed try with a retry due) keeps its job, which brings it back.
const recordTriesSQL = `WITH i AS (
	SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::timestamptz[], $5::timestamptz[],
		$6::timestamptz[], $7::uuid[], $8::bigint[], $9::bigint[], $10::text[],
		$11::uuid[], $12::boolean[], $13::uuid[], $14::text[])
		AS t(delivery_id, at, status, next_at, completed_at, now, attempt_id, status_code, duration_ms, error,
			merchant_id, livemode, event_id, feed)
), d AS (
	UPDATE webhook_deliveries w
	SET attempts = w.attempts + 1, last_attempt_at = i.at, status = i.status,
		next_attempt_at = i.next_at, completed_at = i.completed_at, updated_at = i.now
	FROM i
	WHERE w.id = i.delivery_id AND w.status = 'pending'
	RETURNING w.id, w.job_id, w.status
), j AS (
	DELETE FROM river_job WHERE id IN (
		SELECT r.id FROM river_job r JOIN d ON r.id = d.job_id
		WHERE d.status <> 'pending' AND r.state IN ('available', 'scheduled', 'retryable')
		ORDER BY r.id
		FOR UPDATE OF r SKIP LOCKED)
), a AS (
	INSERT INTO webhook_attempts (id, created_at, updated_at, delivery_id, status_code, duration_ms, error, at)
	SELECT attempt_id, now, now, delivery_id, status_code, duration_ms, error, at FROM i
), f AS (
	INSERT INTO merchant_feed_entries (merchant_id, livemode, event_id, kind, data, created_at)
	SELECT merchant_id, livemode, event_id, 'delivery_attempt', feed, now FROM i
	RETURNING id, merchant_id, livemode
)
SELECT id FROM d
UNION ALL
SELECT NULL FROM (SELECT pg_notify('merchant_events',
	f.merchant_id::text || '.' || CASE WHEN f.livemode THEN 'live' ELSE 'test' END || ':' || f.id::text) FROM f) n`
