package worker

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"agentpay/internal/vault"
)

// Dead worker processes (PostgreSQL).
//
// A worker process killed in the middle of a job (SIGKILL, OOM, a lost
// machine) leaves the job's row `running`. River's own rescuer only moves a
// job on after RescueStuckJobsAfter (River's default is an hour; New sets
// jobTimeout + 30 s), since it cannot tell a dead process from a slow job.
// Until then a killed webhook delivery waits, and a killed chain scan blocks
// every later scan of that chain (scans are unique while running), so no
// deposit on it is seen. A killed leader also leaves River's leadership
// row, so periodic jobs (the scans) are not scheduled until its lease runs
// out.
//
// So each worker process holds a PostgreSQL session-level advisory lock named
// by its River client id, on a connection of its own, for as long as it
// runs. PostgreSQL releases the lock the moment that process's connection
// ends, so "the lock is free" means "that worker is gone", exactly and at
// once. Every worker checks every livenessInterval (and before it starts
// working) the clients that own running jobs or the leadership: for a
// client whose lock it can take, it makes the jobs available again (never
// discarded: the job did not fail, its process died) and removes the dead
// leader, so a new leader is elected at its next attempt.
//
// A job is thus run again after its worker dies, as River's rescuer would do
// later; jobs are idempotent (deposits are unique per chain, tx and log
// index; a webhook delivery that succeeded is never sent again). Only
// clients whose id carries livenessPrefix are judged this way, so workers
// that hold no lock (an older release during a rolling deploy) are left to
// River's rescuer.

// livenessPrefix starts the River client id of workers that hold their
// liveness lock.
const livenessPrefix = "agentpay_lv1_"

// livenessInterval is how often a worker looks for dead workers.
const livenessInterval = 2 * time.Second

// newLivenessID is a River client id unique to this process start.
func newLivenessID() string {
	host, _ := os.Hostname()
	if len(host) > 40 {
		host = host[:40]
	}
	return fmt.Sprintf("%s%s_%d_%s", livenessPrefix, host, os.Getpid(), vault.InstanceTag.New())
}

// livenessKey is the advisory lock key of a client id.
func livenessKey(clientID string) int64 {
	h := sha256.Sum256([]byte("agentpay/worker-liveness/" + clientID))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

type liveness struct {
	url    string
	id     string
	logger *slog.Logger

	db   *sql.DB // one connection, separate from the service's pool
	conn *sql.Conn
}

// hold takes this worker's lock on a dedicated connection.
func (l *liveness) hold(ctx context.Context) error {
	db, err := sql.Open("postgres", l.url)
	if err != nil {
		return fmt.Errorf("worker liveness: %w", err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return fmt.Errorf("worker liveness: %w", err)
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", livenessKey(l.id)).Scan(&ok); err != nil {
		_ = conn.Close()
		_ = db.Close()
		return fmt.Errorf("worker liveness: %w", err)
	}
	if !ok {
		_ = conn.Close()
		_ = db.Close()
		return fmt.Errorf("worker liveness: client id %s is already in use", l.id)
	}
	l.db, l.conn = db, conn
	return nil
}

// release drops the lock (closing its connection ends the session).
func (l *liveness) release() {
	if l.conn != nil {
		_ = l.conn.Close()
		_ = l.db.Close()
		l.conn, l.db = nil, nil
	}
}

// run reaps dead workers every livenessInterval until ctx ends, and takes
// the lock again if its connection was lost.
func (l *liveness) run(ctx context.Context) {
	t := time.NewTicker(livenessInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := l.conn.PingContext(ctx); err != nil && ctx.Err() == nil {
			l.logger.WarnContext(ctx, "worker liveness: lock connection lost, taking the lock again", "err", err)
			l.release()
			if err := l.hold(ctx); err != nil {
				l.logger.ErrorContext(ctx, "worker liveness: taking the lock again", "err", err)
				continue
			}
		}
		if err := l.reap(ctx); err != nil && ctx.Err() == nil {
			l.logger.WarnContext(ctx, "worker liveness: looking for dead workers", "err", err)
		}
	}
}

// reap frees the running jobs and the leadership of dead workers.
func (l *liveness) reap(ctx context.Context) error {
	rows, err := l.conn.QueryContext(ctx, `
		SELECT DISTINCT attempted_by[array_length(attempted_by, 1)]
		FROM river_job
		WHERE state = 'running' AND array_length(attempted_by, 1) > 0
		UNION
		SELECT leader_id FROM river_leader`)
	if err != nil {
		return err
	}
	var clients []string
	for rows.Next() {
		var id sql.NullString
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close()
			return err
		}
		if id.Valid && id.String != l.id && len(id.String) > len(livenessPrefix) && id.String[:len(livenessPrefix)] == livenessPrefix {
			clients = append(clients, id.String)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, id := range clients {
		dead, err := l.isDead(ctx, id)
		if err != nil {
			return err
		}
		if dead {
			if err := l.rescue(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// isDead reports whether the worker's lock is free: taking it succeeds
// only when no session holds it. It is released at once.
func (l *liveness) isDead(ctx context.Context, clientID string) (bool, error) {
	key := livenessKey(clientID)
	var free bool
	if err := l.conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&free); err != nil {
		return false, err
	}
	if free {
		if _, err := l.conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			return false, err
		}
	}
	return free, nil
}

// rescue makes the dead worker's running jobs available now (with an error
// entry saying why, as River's rescuer writes) and removes its leadership.
// The conditions repeat what made it dead's, so a job another worker has
// rescued and claimed meanwhile is left alone.
func (l *liveness) rescue(ctx context.Context, clientID string) error {
	errEntry, err := json.Marshal(map[string]any{
		"at":    time.Now().UTC(),
		"error": fmt.Sprintf("worker %s died while running the job (its liveness lock was released); run again", clientID),
		"trace": "",
	})
	if err != nil {
		return err
	}
	res, err := l.conn.ExecContext(ctx, `
		UPDATE river_job SET
			state = 'available',
			scheduled_at = now(),
			max_attempts = greatest(max_attempts, attempt + 1),
			errors = array_append(errors, jsonb_set($2::jsonb, '{attempt}', to_jsonb(attempt)))
		WHERE state = 'running' AND attempted_by[array_length(attempted_by, 1)] = $1`,
		clientID, string(errEntry))
	if err != nil {
		return fmt.Errorf("rescuing the jobs of dead worker %s: %w", clientID, err)
	}
	jobs, _ := res.RowsAffected()
	res, err = l.conn.ExecContext(ctx, "DELETE FROM river_leader WHERE leader_id = $1", clientID)
	if err != nil {
		return fmt.Errorf("removing the leadership of dead worker %s: %w", clientID, err)
	}
	leader, _ := res.RowsAffected()
	if jobs > 0 || leader > 0 {
		l.logger.WarnContext(ctx, "worker liveness: a worker died; its jobs run again", "dead_worker", clientID, "jobs", jobs, "was_leader", leader > 0)
	}
	return nil
}
