package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/idempotencykey"
	"agentpay/internal/store"
)

var (
	// ErrKeyReused: the key was already used for a different request.
	ErrKeyReused = errors.New("idempotency key reused")
	// ErrInProgress: another request holds the key (Runner.Conflict wraps
	// it).
	ErrInProgress = errors.New("a request with this Idempotency-Key is still in progress; retry once it has been answered")
)

// Runner runs operations under their keys (the package doc). Every field
// but Logger and Conflict is required.
type Runner struct {
	DB *store.DB
	// Now is the clock the lease and the expiry read.
	Now func() time.Time
	// TTL is how long a key is kept and its answer replayed.
	TTL time.Duration
	// Lease is how long a claim stays its request's while the request
	// runs: longer than the longest an operation may take.
	Lease time.Duration
	// KeepError is an error as kept (JSON-able), and whether it is final:
	// a final error is the key's answer; another one that recorded
	// nothing releases the claim, so a retry runs again.
	KeepError func(error) (kept any, final bool)
	// ReplayError is a kept error again, mapping to the same status.
	ReplayError func(kept json.RawMessage) error
	// Conflict is the error ErrInProgress is wrapped in (the caller's
	// 409), nil for none.
	Conflict error
	Logger   *slog.Logger
}

// Request is one request under a key.
type Request struct {
	// Scope is whose key it is ("agent:<uuid>", "user:<uuid>"): two
	// callers' equal keys never meet.
	Scope string
	// Key is the parsed key; "" runs the operation without one.
	Key string
	// Operation names the operation ("send", "withdraw"): a key used for
	// one is never replayed as another.
	Operation string
	// Canonical is the request's canonical form, fingerprinted with
	// Operation: what the operation acts on, in a struct of fixed field
	// order (a number as a normalised string, so 5 and 5.00 are one
	// request); never what only shapes the answer (a wait).
	Canonical any
}

// Op is one operation under a key, answering A.
type Op[A any] struct {
	Request
	// Run does the operation. claim is nil without a key; with one, Run
	// passes it to the transaction that records the operation's transfer
	// (Claim.Link).
	Run func(ctx context.Context, claim *Claim) (A, error)
	// Keep is the answer as kept (JSON-able).
	Keep func(A) any
	// Replay answers again from the kept answer.
	Replay func(ctx context.Context, kept json.RawMessage) (A, error)
	// Recover answers a request that died after recording transferID,
	// from that transfer as it is now.
	Recover func(ctx context.Context, transferID uuid.UUID) (A, error)
}

// Fingerprint is the SHA-256 of the operation and v's JSON.
func Fingerprint(operation string, v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		// The canonical forms are plain structs of strings: cannot fail.
		panic(fmt.Sprintf("idempotency: fingerprint of %s: %v", operation, err))
	}
	sum := sha256.Sum256(append([]byte(operation+"\x00"), body...))
	return sum[:]
}

// Claim is the claim a running request holds on its key.
type Claim struct {
	r           *Runner
	id          uuid.UUID
	attempt     int
	key         string
	fingerprint []byte
	held        json.RawMessage
}

// ID is the key's row.
func (c *Claim) ID() uuid.UUID { return c.id }

// Held is what an earlier attempt at this key kept with Hold before its
// process died (nil when none): an operation whose unit of "once" is not
// the request (a payment a client signs again on each retry) goes on with
// that, not with its own request.
func (c *Claim) Held() json.RawMessage { return c.held }

// Hold keeps v in the key's row while the request runs, before it moves
// anything: a retry that finds the claim held (ErrInProgress, or the
// claim taken over after the lease) reads it back (Held, HeldBy). It
// fails with the in-progress error when the claim is no longer this
// request's.
func (c *Claim) Hold(ctx context.Context, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("idempotency key: holding: %w", err)
	}
	n, err := c.r.DB.Ent.IdempotencyKey.Update().
		Where(idempotencykey.ID(c.id), idempotencykey.Attempt(c.attempt), idempotencykey.StateEQ(idempotencykey.StateInFlight)).
		SetAnswer(string(body)).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("idempotency key: holding: %w", err)
	}
	if n == 0 {
		return c.r.inProgress()
	}
	c.held = body
	return nil
}

// Key is the claim's key (nil for a nil claim).
func (c *Claim) Key() *string {
	if c == nil {
		return nil
	}
	k := c.key
	return &k
}

// Fingerprint is the request's fingerprint (nil for a nil claim).
func (c *Claim) Fingerprint() []byte {
	if c == nil {
		return nil
	}
	return c.fingerprint
}

// Link records, in the transaction that records the transfer, that the
// claim's request recorded it. It fails with the in-progress error, and so
// rolls the transfer back, when the claim is no longer this request's (a
// retry took it over after the lease ran out). A nil claim links nothing.
func (c *Claim) Link(ctx context.Context, tx *ent.Tx, transferID uuid.UUID) error {
	if c == nil {
		return nil
	}
	n, err := tx.IdempotencyKey.Update().
		Where(
			idempotencykey.ID(c.id),
			idempotencykey.Attempt(c.attempt),
			idempotencykey.StateEQ(idempotencykey.StateInFlight),
			idempotencykey.TransferIDIsNil(),
		).
		SetTransferID(transferID).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("idempotency key: linking transfer: %w", err)
	}
	if n == 0 {
		return c.r.inProgress()
	}
	return nil
}

// Do runs op once under its key, or answers it from the key's row;
// replayed is true when the answer (result or error) is an earlier
// request's.
func Do[A any](ctx context.Context, r *Runner, op Op[A]) (res A, replayed bool, err error) {
	if op.Key == "" {
		res, err = op.Run(ctx, nil)
		return res, false, err
	}
	fp := Fingerprint(op.Operation, op.Canonical)
	claim, prior, err := r.claim(ctx, op.Request, fp)
	if err != nil {
		return res, false, err
	}
	if prior != nil {
		res, err = replay(ctx, r, op, prior)
		return res, true, err
	}
	res, err = op.Run(ctx, claim)
	if err != nil {
		kept, final := r.KeepError(err)
		r.finish(ctx, claim, nil, kept, final)
		return res, false, err
	}
	r.finish(ctx, claim, op.Keep(res), nil, true)
	return res, false, nil
}

// replay answers from the key's row: the kept answer, or for a request
// that died after recording its transfer the transfer as it is now (then
// kept, so later replays match).
func replay[A any](ctx context.Context, r *Runner, op Op[A], row *ent.IdempotencyKey) (res A, err error) {
	if row.State == idempotencykey.StateDone {
		switch {
		case row.Refusal != nil:
			return res, r.ReplayError(json.RawMessage(*row.Refusal))
		case row.Answer != nil:
			return op.Replay(ctx, json.RawMessage(*row.Answer))
		}
		return res, fmt.Errorf("idempotency key %s: done without an answer", row.ID)
	}
	res, err = op.Recover(ctx, *row.TransferID)
	if err != nil {
		return res, fmt.Errorf("idempotency key %s: %w", row.ID, err)
	}
	if !row.LockedUntil.After(r.Now()) {
		// Abandoned: this answer is the key's from now on. A request still
		// running keeps its claim and writes its own.
		r.finish(ctx, &Claim{r: r, id: row.ID, attempt: row.Attempt}, op.Keep(res), nil, true)
	}
	return res, nil
}

// Claim claims req's key without running anything, for an operation Do
// does not fit (one that holds what it acts on before acting: Claim.Hold):
// prior is the key's row when the request must be answered from it (done,
// or abandoned after recording its transfer); ErrKeyReused and the
// in-progress error as Do answers them. The caller ends its claim with
// Finish.
func (r *Runner) Claim(ctx context.Context, req Request) (claim *Claim, prior *ent.IdempotencyKey, err error) {
	return r.claim(ctx, req, Fingerprint(req.Operation, req.Canonical))
}

// HeldBy is what the request holding req's key kept with Hold (nil when
// nothing yet, or no such key).
func (r *Runner) HeldBy(ctx context.Context, req Request) (json.RawMessage, error) {
	row, err := r.DB.Ent.IdempotencyKey.Query().
		Where(idempotencykey.Scope(req.Scope), idempotencykey.Key(req.Key)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency key: reading: %w", err)
	}
	if row.Answer == nil {
		return nil, nil
	}
	return json.RawMessage(*row.Answer), nil
}

// Finish ends a claim taken with Claim: answer kept (done) when final or
// when the request recorded its transfer, else the key released so a
// retry runs again.
func (r *Runner) Finish(ctx context.Context, c *Claim, answer any, final bool) {
	r.finish(ctx, c, answer, nil, final)
}

func (r *Runner) inProgress() error {
	if r.Conflict == nil {
		return ErrInProgress
	}
	return fmt.Errorf("%w: %w", r.Conflict, ErrInProgress)
}

// claim claims req's key, or answers why not: prior is set when the
// request must not run but be answered from that row (done, or abandoned
// after recording its transfer).
func (r *Runner) claim(ctx context.Context, req Request, fp []byte) (claim *Claim, prior *ent.IdempotencyKey, err error) {
	for try := 1; ; try++ {
		claim, prior = nil, nil
		err = r.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
			// At PostgreSQL's precision, so the times compared later are
			// the times written.
			now := r.Now().UTC().Truncate(time.Microsecond)
			row, err := store.ForUpdate(r.DB, tx.IdempotencyKey.Query().
				Where(idempotencykey.Scope(req.Scope), idempotencykey.Key(req.Key))).Only(ctx)
			switch {
			case ent.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("idempotency key: reading: %w", err)
			case !row.ExpiresAt.After(now):
				// Past its time: the key is free again.
				if err := tx.IdempotencyKey.DeleteOne(row).Exec(ctx); err != nil {
					return fmt.Errorf("idempotency key: forgetting an expired key: %w", err)
				}
			case row.Operation != req.Operation || !bytes.Equal(row.Fingerprint, fp):
				return fmt.Errorf("%w: this Idempotency-Key was already used for a different request; a new request needs a new key", ErrKeyReused)
			case row.State == idempotencykey.StateDone:
				prior = row
				return nil
			case row.TransferID != nil:
				// Its transfer is recorded (the request still running, or
				// abandoned): answered from the transfer as it is now,
				// never run again.
				prior = row
				return nil
			case row.LockedUntil.After(now):
				return r.inProgress()
			default:
				// Abandoned before anything was recorded: this request runs.
				err := tx.IdempotencyKey.UpdateOne(row).
					SetAttempt(row.Attempt + 1).
					SetLockedUntil(now.Add(r.Lease)).
					Exec(ctx)
				if err != nil {
					return fmt.Errorf("idempotency key: taking over: %w", err)
				}
				claim = &Claim{r: r, id: row.ID, attempt: row.Attempt + 1, key: req.Key, fingerprint: fp}
				if row.Answer != nil {
					claim.held = json.RawMessage(*row.Answer)
				}
				return nil
			}
			created, err := tx.IdempotencyKey.Create().
				SetScope(req.Scope).
				SetKey(req.Key).
				SetOperation(req.Operation).
				SetFingerprint(fp).
				SetLockedUntil(now.Add(r.Lease)).
				SetExpiresAt(now.Add(r.TTL)).
				SetCreatedAt(now).
				SetUpdatedAt(now).
				Save(ctx)
			if err != nil {
				return fmt.Errorf("idempotency key: claiming: %w", err)
			}
			claim = &Claim{r: r, id: created.ID, attempt: created.Attempt, key: req.Key, fingerprint: fp}
			return nil
		})
		if err != nil && try < 3 && isKeyTaken(err) {
			// A concurrent request inserted the key first (PostgreSQL):
			// read what it holds now.
			continue
		}
		return claim, prior, err
	}
}

// isKeyTaken: err is the unique (scope, key) index refusing an insert.
func isKeyTaken(err error) bool {
	if !ent.IsConstraintError(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, `"idempotencykey_scope_key"`) ||
		strings.Contains(msg, "UNIQUE constraint failed: idempotency_keys.scope, idempotency_keys.key")
}

// finish records the answer of the claim's request: kept (done) when final
// or when the request recorded its transfer; otherwise released (a failure
// that moved nothing), so a retry runs it again. Nothing is written when
// the claim is no longer the request's. A failure to write is logged: the
// claim then stays in flight until its lease runs out, and a retry answers
// from the transfer or takes it over.
func (r *Runner) finish(ctx context.Context, c *Claim, answer, refusal any, final bool) {
	ctx = context.WithoutCancel(ctx) // the client leaving does not undo the answer
	err := r.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		row, err := store.ForUpdate(r.DB, tx.IdempotencyKey.Query().Where(
			idempotencykey.ID(c.id),
			idempotencykey.Attempt(c.attempt),
			idempotencykey.StateEQ(idempotencykey.StateInFlight),
		)).Only(ctx)
		if ent.IsNotFound(err) {
			r.logger().WarnContext(ctx, "idempotency key: the claim was taken over before the request ended; its answer is not kept", "claim", c.id)
			return nil
		}
		if err != nil {
			return err
		}
		if !final && row.TransferID == nil {
			return tx.IdempotencyKey.DeleteOne(row).Exec(ctx)
		}
		u := tx.IdempotencyKey.UpdateOne(row).SetState(idempotencykey.StateDone)
		if refusal != nil {
			body, err := json.Marshal(refusal)
			if err != nil {
				return err
			}
			u.SetRefusal(string(body))
		} else {
			body, err := json.Marshal(answer)
			if err != nil {
				return err
			}
			u.SetAnswer(string(body))
		}
		return u.Exec(ctx)
	})
	if err != nil {
		r.logger().WarnContext(ctx, "idempotency key: recording the answer", "claim", c.id, "err", err)
	}
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// Prune deletes the keys past their TTL (a claim finds and replaces an
// expired key itself; this keeps the table to a TTL's requests). It
// returns how many it deleted.
func (r *Runner) Prune(ctx context.Context) (int, error) {
	n, err := r.DB.Ent.IdempotencyKey.Delete().
		Where(idempotencykey.ExpiresAtLT(r.Now().UTC())).
		Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("pruning idempotency keys: %w", err)
	}
	return n, nil
}
