package webhooksend

import (
	"context"
	"time"

	"github.com/google/uuid"

	"agentpay/internal/store"
)

// Claim takes up to max of a merchant's due deliveries in one mode (pending,
// next_attempt_at at or before now) for one batch of tries, first, if it is
// among them, first, and returns their ids. Taking one moves its
// next_attempt_at to leaseUntil: no other batch takes it until then, and if
// the batch's process dies its delivery is due again then (the lease
// expires), which is what brings it back to its own job (the root's
// webhook_batch.go). On PostgreSQL concurrent claims skip each other's rows
// (FOR UPDATE SKIP LOCKED); on SQLite the statement runs alone.
//
// On PostgreSQL the claimed deliveries' River jobs that wait to be fetched
// are deferred to the lease's end in the claim's statement (their
// scheduled_at, skipping a job a fetch holds): River does not fetch them
// meanwhile, only to find their delivery leased and snooze them, which
// was most of River's work in a burst. They come back at the lease's end,
// when their delivery is due again if the batch's process died; the try
// that finishes a delivery removes its job (recordTriesSQL), and Release
// brings them back with their deliveries. A job River holds already
// (running) is left alone. Not on SQLite: there the deferral and the
// removal were statements more on the one connection, and cost more than
// River's fetches and snoozes they saved (BenchmarkWebhookDeliveries,
// docs/performance.md).
func Claim(ctx context.Context, db *store.DB, merchantID uuid.UUID, livemode bool, first uuid.UUID, now, leaseUntil time.Time, max int) ([]uuid.UUID, error) {
	q := claimSQLite
	if db.IsPostgres() {
		q = claimPostgres
	}
	// The rest in due order, an index range read that stops at its
	// limit (webhook_deliveries' merchant_id, livemode, status,
	// next_attempt_at): first, when given, is one of max.
	rest := max
	if first != uuid.Nil {
		rest--
	}
	rows, err := db.SQL.QueryContext(ctx, q, merchantID, livemode, now.UTC(), leaseUntil.UTC(), first, rest)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// RETURNING follows no order (neither engine keeps the subquery's):
	// the given delivery goes first again, as the caller expects.
	for i, id := range ids {
		if id == first && i > 0 {
			ids[0], ids[i] = ids[i], ids[0]
			break
		}
	}
	return ids, nil
}

// Release gives back the deliveries of a batch it did not try (their
// merchant's cap turned them away, or the batch ran out of its time): due
// again at now, if still pending and still held by that batch's lease, and
// on PostgreSQL their River jobs, which the claim deferred to the lease's
// end, due now.
func Release(ctx context.Context, db *store.DB, ids []uuid.UUID, leaseUntil, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if db.IsPostgres() {
		_, err := db.SQL.ExecContext(ctx, `WITH d AS (
	UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE status = 'pending' AND next_attempt_at = $2 AND id = ANY($3::uuid[])
	RETURNING job_id
)
UPDATE river_job SET scheduled_at = $1 WHERE id IN (SELECT job_id FROM d) AND state = 'available' AND scheduled_at > $1`,
			append([]any{now.UTC(), leaseUntil.UTC()}, idsArgPostgres(ids)...)...)
		return err
	}
	_, err := db.SQL.ExecContext(ctx, `UPDATE webhook_deliveries SET next_attempt_at = ? WHERE status = 'pending' AND next_attempt_at = ? AND id IN (SELECT value FROM json_each(?))`,
		append([]any{now.UTC(), leaseUntil.UTC()}, idsArgSQLite(ids)...)...)
	return err
}

// The claim: the due deliveries of one merchant's mode, the given one first,
// then the longest due. Arguments: merchant id, livemode, now, the lease's
// end, the first delivery's id (uuid.Nil: none), how many more at most.
// The given one is read by its key and the rest from the merchant's index
// in due order, so a claim reads what it takes, not every due delivery.
const (
	claimPostgres = `WITH own AS (
	SELECT w.id FROM webhook_deliveries w
	WHERE w.id = $5 AND w.merchant_id = $1 AND w.livemode = $2 AND w.status = 'pending' AND w.next_attempt_at <= $3
	FOR UPDATE SKIP LOCKED
), rest AS (
	SELECT w.id FROM webhook_deliveries w
	WHERE w.merchant_id = $1 AND w.livemode = $2 AND w.status = 'pending' AND w.next_attempt_at <= $3 AND w.id <> $5
	ORDER BY w.next_attempt_at
	LIMIT $6
	FOR UPDATE SKIP LOCKED
), claimed AS (
	UPDATE webhook_deliveries d SET next_attempt_at = $4
	WHERE d.id IN (SELECT id FROM own UNION ALL SELECT id FROM rest)
	AND d.status = 'pending' AND d.next_attempt_at <= $3
	RETURNING d.id, d.job_id
), jobs AS (
	UPDATE river_job SET scheduled_at = $4 WHERE id IN (
		SELECT r.id FROM river_job r JOIN claimed c ON r.id = c.job_id
		WHERE r.state = 'available' AND r.scheduled_at < $4
		ORDER BY r.id
		FOR UPDATE OF r SKIP LOCKED)
)
SELECT id FROM claimed`
	claimSQLite = `UPDATE webhook_deliveries SET next_attempt_at = ?4
WHERE id IN (
	SELECT id FROM webhook_deliveries
	WHERE id = ?5 AND merchant_id = ?1 AND livemode = ?2 AND status = 'pending' AND next_attempt_at <= ?3
	UNION ALL
	SELECT * FROM (SELECT id FROM webhook_deliveries
		WHERE merchant_id = ?1 AND livemode = ?2 AND status = 'pending' AND next_attempt_at <= ?3 AND id <> ?5
		ORDER BY next_attempt_at
		LIMIT ?6))
RETURNING id`
)

// ReleaseOne gives back delivery id, which ClaimOne took until leaseUntil
// and which was not tried: due again at now. Its job is the one running
// the try (ClaimOne defers no job), so unlike Release it moves no job.
func ReleaseOne(ctx context.Context, db *store.DB, id uuid.UUID, leaseUntil, now time.Time) error {
	q := `UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ? AND status = 'pending' AND next_attempt_at = ?`
	if db.IsPostgres() {
		q = `UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE id = $2 AND status = 'pending' AND next_attempt_at = $3`
	}
	_, err := db.SQL.ExecContext(ctx, q, now.UTC(), id, leaseUntil.UTC())
	return err
}

// ClaimOne takes delivery id alone, as Claim does (until leaseUntil), if it
// is pending and due at now; false if not.
func ClaimOne(ctx context.Context, db *store.DB, id uuid.UUID, now, leaseUntil time.Time) (bool, error) {
	q := `UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ? AND status = 'pending' AND next_attempt_at <= ?`
	if db.IsPostgres() {
		q = `UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE id = $2 AND status = 'pending' AND next_attempt_at <= $3`
	}
	r, err := db.SQL.ExecContext(ctx, q, leaseUntil.UTC(), id, now.UTC())
	if err != nil {
		return false, err
	}
	n, err := r.RowsAffected()
	return n > 0, err
}
