package idempotency_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/idempotencykey"
	"agentpay/ent/transfer"
	"agentpay/internal/clock"
	"agentpay/internal/idempotency"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

// The runner is tested on a toy operation that moves "money" the way the
// service's do: it records a transfer row (linking the claim in that
// transaction) and answers it. Its errors: errRefused is final (a
// refusal), errDown is not (nothing moved, may pass).

var (
	errRefused  = errors.New("refused")
	errDown     = errors.New("down")
	errConflict = errors.New("conflict")
)

type env struct {
	db *store.DB
	// sender is the user the transfers are from.
	sender uuid.UUID
	clock  *clock.Stub
	r      *idempotency.Runner
	runs   atomic.Int32
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{db: testdb.Open(t), clock: clock.NewStub(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))}
	u, err := e.db.Ent.User.Create().SetUsername("payer").SetEmail("payer@example.com").Save(context.Background())
	require.NoError(t, err)
	e.sender = u.ID
	e.r = &idempotency.Runner{
		DB: e.db, Now: e.clock.Now, TTL: 24 * time.Hour, Lease: time.Minute, Conflict: errConflict,
		KeepError: func(err error) (any, bool) {
			return map[string]string{"error": err.Error()}, !errors.Is(err, errDown)
		},
		ReplayError: func(kept json.RawMessage) error {
			var v map[string]string
			if err := json.Unmarshal(kept, &v); err != nil {
				return err
			}
			if v["error"] == errRefused.Error() {
				return errRefused
			}
			return errors.New(v["error"])
		},
	}
	return e
}

// answer is the toy operation's answer.
type answer struct {
	TransferID uuid.UUID `json:"transfer_id"`
	Note       string    `json:"note"`
	// From says which path answered: run, replay or recover.
	From string `json:"-"`
}

type payment struct {
	To     string `json:"to"`
	Amount string `json:"amount"`
}

// record records a transfer as the service does, linking the claim in
// its transaction.
func (e *env) record(ctx context.Context, claim *idempotency.Claim) (uuid.UUID, error) {
	var id uuid.UUID
	err := e.db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		ref := make([]byte, 16)
		_, _ = rand.Read(ref)
		t, err := tx.Transfer.Create().SetKind(transfer.KindWithdrawal).SetFromUserID(e.sender).SetChain("base").SetFromAddress("0xfrom").SetToAddress("0xto").
			SetAmount(1_000_000).SetNet(1_000_000).SetRef(ref).Save(ctx)
		if err != nil {
			return err
		}
		id = t.ID
		return claim.Link(ctx, tx, t.ID)
	})
	return id, err
}

// op is the toy operation under key; run, when set, replaces its body.
func (e *env) op(key string, p payment, run func(ctx context.Context, claim *idempotency.Claim) (answer, error)) idempotency.Op[answer] {
	if run == nil {
		run = func(ctx context.Context, claim *idempotency.Claim) (answer, error) {
			id, err := e.record(ctx, claim)
			return answer{TransferID: id, Note: "paid " + p.Amount + " to " + p.To, From: "run"}, err
		}
	}
	return idempotency.Op[answer]{
		Request: idempotency.Request{Scope: "agent:a", Key: key, Operation: "pay", Canonical: p},
		Run: func(ctx context.Context, claim *idempotency.Claim) (answer, error) {
			e.runs.Add(1)
			return run(ctx, claim)
		},
		Keep: func(a answer) any { return a },
		Replay: func(_ context.Context, kept json.RawMessage) (answer, error) {
			var a answer
			err := json.Unmarshal(kept, &a)
			a.From = "replay"
			return a, err
		},
		Recover: func(_ context.Context, id uuid.UUID) (answer, error) {
			return answer{TransferID: id, Note: "recovered", From: "recover"}, nil
		},
	}
}

func (e *env) row(t *testing.T, key string) *ent.IdempotencyKey {
	t.Helper()
	row, err := e.db.Ent.IdempotencyKey.Query().Where(idempotencykey.Scope("agent:a"), idempotencykey.Key(key)).Only(context.Background())
	if ent.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return row
}

func (e *env) transfers(t *testing.T) int {
	t.Helper()
	return testdb.CountRows(t, e.db, "transfers")
}

// TestRunnerSameKeySameAnswer: the same key and request run once; every
// retry gets the first answer (a refusal too), marked replayed, from the
// answer kept as JSON.
func TestRunnerSameKeySameAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p := payment{To: "bob", Amount: "5"}

	first, replayed, err := idempotency.Do(ctx, e.r, e.op("k", p, nil))
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "run", first.From)
	for range 2 {
		again, replayed, err := idempotency.Do(ctx, e.r, e.op("k", p, nil))
		require.NoError(t, err)
		require.True(t, replayed)
		require.Equal(t, "replay", again.From)
		require.Equal(t, first.TransferID, again.TransferID)
		require.Equal(t, first.Note, again.Note)
	}
	require.EqualValues(t, 1, e.runs.Load(), "run once")
	require.Equal(t, 1, e.transfers(t))
	row := e.row(t, "k")
	require.Equal(t, idempotencykey.StateDone, row.State)
	require.Equal(t, first.TransferID, *row.TransferID)
	require.JSONEq(t, `{"transfer_id":"`+first.TransferID.String()+`","note":"paid 5 to bob"}`, *row.Answer, "the answer as JSON")
	require.Nil(t, row.Refusal)

	refuse := func(context.Context, *idempotency.Claim) (answer, error) { return answer{}, errRefused }
	_, replayed, err = idempotency.Do(ctx, e.r, e.op("k-refused", p, refuse))
	require.ErrorIs(t, err, errRefused)
	require.False(t, replayed)
	_, replayed, err = idempotency.Do(ctx, e.r, e.op("k-refused", p, nil))
	require.ErrorIs(t, err, errRefused, "the refusal is the key's answer, not a new run")
	require.True(t, replayed)
	require.EqualValues(t, 2, e.runs.Load())
	require.JSONEq(t, `{"error":"refused"}`, *e.row(t, "k-refused").Refusal)
	require.Nil(t, e.row(t, "k-refused").Answer)

	// No key: every request runs, and no row is kept.
	for range 2 {
		_, replayed, err := idempotency.Do(ctx, e.r, e.op("", p, nil))
		require.NoError(t, err)
		require.False(t, replayed)
	}
	require.EqualValues(t, 4, e.runs.Load())
	require.Equal(t, 2, testdb.CountRows(t, e.db, "idempotency_keys"))
}

// TestRunnerDifferentRequest: another request under a used key (another
// canonical form or operation), whatever the first's state, is
// ErrKeyReused and runs nothing.
func TestRunnerDifferentRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p := payment{To: "bob", Amount: "5"}
	_, _, err := idempotency.Do(ctx, e.r, e.op("k", p, nil))
	require.NoError(t, err)

	other := e.op("k", payment{To: "bob", Amount: "6"}, nil)
	_, replayed, err := idempotency.Do(ctx, e.r, other)
	require.ErrorIs(t, err, idempotency.ErrKeyReused)
	require.False(t, replayed)
	otherOp := e.op("k", p, nil)
	otherOp.Operation = "refund"
	_, _, err = idempotency.Do(ctx, e.r, otherOp)
	require.ErrorIs(t, err, idempotency.ErrKeyReused)
	otherScope := e.op("k", p, nil)
	otherScope.Scope = "agent:b"
	_, replayed, err = idempotency.Do(ctx, e.r, otherScope)
	require.NoError(t, err, "keys are their scope's own")
	require.False(t, replayed)
	require.EqualValues(t, 2, e.runs.Load())
	require.Equal(t, 2, e.transfers(t))

	// While the first still runs, too.
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		_, _, err := idempotency.Do(ctx, e.r, e.op("k-running", p, func(ctx context.Context, claim *idempotency.Claim) (answer, error) {
			close(started)
			<-release
			return answer{}, nil
		}))
		done <- err
	}()
	<-started
	_, _, err = idempotency.Do(ctx, e.r, e.op("k-running", payment{To: "carol", Amount: "5"}, nil))
	require.ErrorIs(t, err, idempotency.ErrKeyReused)
	close(release)
	require.NoError(t, <-done)
}

// TestRunnerRunning: while a request runs, another with its key gets
// ErrInProgress inside the caller's conflict error (409), and runs
// nothing; once it has answered, retries get its answer.
func TestRunnerRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p := payment{To: "bob", Amount: "5"}
	release := make(chan struct{})
	started := make(chan struct{})
	type result struct {
		a   answer
		err error
	}
	done := make(chan result)
	go func() {
		a, _, err := idempotency.Do(ctx, e.r, e.op("k", p, func(ctx context.Context, claim *idempotency.Claim) (answer, error) {
			close(started)
			<-release
			id, err := e.record(ctx, claim)
			return answer{TransferID: id, Note: "slowly"}, err
		}))
		done <- result{a, err}
	}()
	<-started
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = idempotency.Do(ctx, e.r, e.op("k", p, nil))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.ErrorIs(t, err, idempotency.ErrInProgress)
		require.ErrorIs(t, err, errConflict)
		require.EqualError(t, err, "conflict: a request with this Idempotency-Key is still in progress; retry once it has been answered")
	}
	close(release)
	first := <-done
	require.NoError(t, first.err)
	again, replayed, err := idempotency.Do(ctx, e.r, e.op("k", p, nil))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.a.TransferID, again.TransferID)
	require.EqualValues(t, 1, e.runs.Load())
}

// TestRunnerCrashRecovery: a request that dies (its goroutine panics, so
// no answer is written) holds its key for its lease; a retry is answered
// from the transfer it recorded (Recover, never run again; kept once the
// lease is over), or, after the lease, runs when it recorded none; a slow request whose claim was
// taken over cannot link its transfer (it rolls back) nor write its
// answer; a failure that is not final releases the key.
func TestRunnerCrashRecovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p := payment{To: "bob", Amount: "5"}
	crash := func(key string, during func(ctx context.Context, claim *idempotency.Claim)) {
		t.Helper()
		require.Panics(t, func() {
			_, _, _ = idempotency.Do(ctx, e.r, e.op(key, p, func(ctx context.Context, claim *idempotency.Claim) (answer, error) {
				during(ctx, claim)
				panic("the process died")
			}))
		})
	}

	t.Run("after recording its transfer", func(t *testing.T) {
		var recorded uuid.UUID
		crash("k-recorded", func(ctx context.Context, claim *idempotency.Claim) {
			var err error
			recorded, err = e.record(ctx, claim)
			require.NoError(t, err)
		})
		// While the lease lasts (the request may still be running): the
		// transfer as it is now, not kept.
		a, replayed, err := idempotency.Do(ctx, e.r, e.op("k-recorded", p, nil))
		require.NoError(t, err)
		require.True(t, replayed)
		require.Equal(t, "recover", a.From)
		require.Equal(t, recorded, a.TransferID)
		require.Equal(t, idempotencykey.StateInFlight, e.row(t, "k-recorded").State, "the running request writes its own answer")

		e.clock.Advance(time.Minute + time.Second)
		runs := e.runs.Load()
		a, replayed, err = idempotency.Do(ctx, e.r, e.op("k-recorded", p, nil))
		require.NoError(t, err)
		require.True(t, replayed)
		require.Equal(t, "recover", a.From)
		require.Equal(t, recorded, a.TransferID)
		require.Equal(t, runs, e.runs.Load(), "never run again")
		require.Equal(t, idempotencykey.StateDone, e.row(t, "k-recorded").State, "the recovered answer is kept")
		a, _, err = idempotency.Do(ctx, e.r, e.op("k-recorded", p, nil))
		require.NoError(t, err)
		require.Equal(t, "replay", a.From)
		require.Equal(t, "recovered", a.Note)
	})

	t.Run("before recording anything", func(t *testing.T) {
		crash("k-nothing", func(context.Context, *idempotency.Claim) {})
		before := e.transfers(t)
		e.clock.Advance(time.Minute + time.Second)
		a, replayed, err := idempotency.Do(ctx, e.r, e.op("k-nothing", p, nil))
		require.NoError(t, err)
		require.False(t, replayed, "the retry ran")
		require.Equal(t, "run", a.From)
		row := e.row(t, "k-nothing")
		require.Equal(t, 2, row.Attempt)
		require.Equal(t, a.TransferID, *row.TransferID)
		require.Equal(t, before+1, e.transfers(t))
	})

	t.Run("a slow request loses its claim", func(t *testing.T) {
		var retry answer
		before := e.transfers(t)
		_, replayed, err := idempotency.Do(ctx, e.r, e.op("k-slow", p, func(ctx context.Context, claim *idempotency.Claim) (answer, error) {
			e.clock.Advance(time.Minute + time.Second) // stalled past its lease
			var err error
			var replayed bool
			retry, replayed, err = idempotency.Do(ctx, e.r, e.op("k-slow", p, nil))
			require.NoError(t, err)
			require.False(t, replayed, "the retry took the claim over")
			id, err := e.record(ctx, claim)
			return answer{TransferID: id}, err
		}))
		require.ErrorIs(t, err, idempotency.ErrInProgress, "fenced off its key")
		require.False(t, replayed)
		require.Equal(t, before+1, e.transfers(t), "the slow request's transfer rolled back")
		row := e.row(t, "k-slow")
		require.Equal(t, retry.TransferID, *row.TransferID)
		require.Nil(t, row.Refusal, "the slow request's answer is not written")
		require.Equal(t, idempotencykey.StateDone, row.State)
	})

	t.Run("a failure that moved nothing is released", func(t *testing.T) {
		down := func(context.Context, *idempotency.Claim) (answer, error) { return answer{}, errDown }
		_, _, err := idempotency.Do(ctx, e.r, e.op("k-down", p, down))
		require.ErrorIs(t, err, errDown)
		require.Nil(t, e.row(t, "k-down"), "released")
		a, replayed, err := idempotency.Do(ctx, e.r, e.op("k-down", p, nil))
		require.NoError(t, err)
		require.False(t, replayed, "run again")
		require.Equal(t, "run", a.From)
	})
}

// TestRunnerExpiry: a key is kept TTL; then the same key starts a new
// request, and Prune deletes what has expired.
func TestRunnerExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p := payment{To: "bob", Amount: "5"}
	first, _, err := idempotency.Do(ctx, e.r, e.op("k", p, nil))
	require.NoError(t, err)
	_, _, err = idempotency.Do(ctx, e.r, e.op("other", p, nil))
	require.NoError(t, err)

	e.clock.Advance(24*time.Hour - time.Second)
	n, err := e.r.Prune(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	again, replayed, err := idempotency.Do(ctx, e.r, e.op("k", p, nil))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.TransferID, again.TransferID)

	e.clock.Advance(time.Second)
	fresh, replayed, err := idempotency.Do(ctx, e.r, e.op("k", payment{To: "carol", Amount: "1"}, nil))
	require.NoError(t, err)
	require.False(t, replayed, "an expired key is free again, for any request")
	require.NotEqual(t, first.TransferID, fresh.TransferID)
	e.clock.Advance(time.Second)
	n, err = e.r.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the expired key")
	require.NotNil(t, e.row(t, "k"))
	require.Nil(t, e.row(t, "other"))
}
