package agentpay

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/idempotencykey"
	"agentpay/ent/transfer"
	"agentpay/internal/clock"
	"agentpay/internal/idempotency"
)

func TestParseIdempotencyKey(t *testing.T) {
	for _, tc := range []struct {
		raw, key, err string
	}{
		{raw: "8e03978e-40d5-43e8-bc93-6894a57f9324", key: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{raw: "order 17/retry", key: "order 17/retry"},
		{raw: `"abc"`, key: "abc"}, // the draft's structured-field string: the same key as bare
		{raw: `"a\"b\\c"`, key: `a"b\c`},
		{raw: strings.Repeat("k", 255), key: strings.Repeat("k", 255)},
		{raw: `"` + strings.Repeat("k", 255) + `"`, key: strings.Repeat("k", 255)},
		{raw: "", err: "Idempotency-Key: must be 1 to 255 characters long"},
		{raw: `""`, err: "Idempotency-Key: must be 1 to 255 characters long"},
		{raw: strings.Repeat("k", 256), err: "Idempotency-Key: must be 1 to 255 characters long"},
		{raw: "a\tb", err: "Idempotency-Key: must contain printable ASCII characters only"},
		{raw: "clé", err: "Idempotency-Key: must contain printable ASCII characters only"},
		{raw: "a\x7fb", err: "Idempotency-Key: must contain printable ASCII characters only"},
		{raw: `"abc`, err: "Idempotency-Key: must be a string in double quotes"},
		{raw: `"a"b"`, err: "Idempotency-Key: must be a string in double quotes"},
		{raw: `"a\nb"`, err: "Idempotency-Key: must be a string in double quotes"},
		{raw: `"abc\"`, err: "Idempotency-Key: must be a string in double quotes"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			key, err := ParseIdempotencyKey(tc.raw)
			if tc.err != "" {
				require.True(t, IsValidation(err), "%v", err)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.key, key)
		})
	}
}

// idemEnv is a send environment whose service reads a clock the test
// moves.
type idemEnv struct {
	*sendEnv
	clock *clock.Stub
	svc   *Service
}

func startIdemEnv(t *testing.T) *idemEnv {
	t.Helper()
	e := startSendEnv(t)
	clk := clock.NewStub(time.Now())
	svc := newTestService(t, e.env, Config{AgentMode: ModeTest, Clock: clk})
	return &idemEnv{sendEnv: e, clock: clk, svc: svc}
}

func (e *idemEnv) transfers(t *testing.T, from *ent.Agent) []*ent.Transfer {
	t.Helper()
	ts, err := e.db.Ent.Transfer.Query().Where(transfer.FromAgentID(from.ID)).All(context.Background())
	require.NoError(t, err)
	return ts
}

func (e *idemEnv) keyRow(t *testing.T, from *ent.Agent, key string) *ent.IdempotencyKey {
	t.Helper()
	row, err := e.db.Ent.IdempotencyKey.Query().Where(
		idempotencykey.Scope(agentIdempotencyScope(from.ID)), idempotencykey.Key(key)).Only(context.Background())
	if ent.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return row
}

func keyOf(s string) *string { return &s }

// sendKeyed, withdrawKeyed and payCheckoutKeyed are the operations under
// key (the request's IdempotencyKey).
func sendKeyed(s *Service, ctx context.Context, from *ent.Agent, key *string, req SendRequest) (*SendResult, bool, error) {
	req.IdempotencyKey = key
	return s.Send(ctx, from, req)
}

func withdrawKeyed(s *Service, ctx context.Context, v *Viewer, key *string, req WithdrawRequest) (*Withdrawal, bool, error) {
	req.IdempotencyKey = key
	return s.Withdraw(ctx, v, req)
}

func payCheckoutKeyed(s *Service, ctx context.Context, a *ent.Agent, key *string, req PayCheckoutRequest) (*CheckoutPayment, bool, error) {
	req.IdempotencyKey = key
	return s.PayCheckout(ctx, a, req)
}

// TestSendIdempotency: a send under a key runs once; the same request
// again answers the first result, marked replayed; another request with
// the key is refused and moves nothing; keys belong to their agent.
func TestSendIdempotency(t *testing.T) {
	e := startIdemEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Base, "10")
	req := SendRequest{ToUsername: bob.Username, AmountUSD: dec("5"), Chain: "base", Memo: "rent"}

	first, replayed, err := sendKeyed(e.svc, ctx, alice, keyOf("k-1"), req)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "completed", first.Status)
	row := e.keyRow(t, alice, "k-1")
	require.Equal(t, idempotencykey.StateDone, row.State)
	require.Equal(t, first.Transfer.ID, *row.TransferID)
	require.Equal(t, e.clock.Now().Add(IdempotencyKeyTTL).UTC().Truncate(time.Microsecond), row.ExpiresAt.UTC())

	t.Run("replay", func(t *testing.T) {
		// 5.00 is the same amount as 5; the quoted form the same key.
		again := req
		again.AmountUSD = dec("5.00")
		res, replayed, err := sendKeyed(e.svc, ctx, alice, keyOf(`"k-1"`), again)
		require.NoError(t, err)
		require.True(t, replayed)
		require.Equal(t, first.Transfer.ID, res.Transfer.ID)
		require.Equal(t, first.Message, res.Message)
		require.Equal(t, first.Status, res.Status)
		require.Equal(t, first.TxHash, res.TxHash)
		require.Equal(t, first.FeeTxHash, res.FeeTxHash)
		requireDecimal(t, first.Delivered.String(), res.Delivered)
		requireDecimal(t, first.Fee.String(), res.Fee)
		require.Len(t, e.transfers(t, alice), 1)
		requireDecimal(t, "5", e.onChain(t, chains.Base, e.wallet(t, alice, chains.Base)), "sent once")
	})

	t.Run("another request with the key", func(t *testing.T) {
		for name, other := range map[string]SendRequest{
			"amount":    {ToUsername: bob.Username, AmountUSD: dec("4"), Chain: "base", Memo: "rent"},
			"memo":      {ToUsername: bob.Username, AmountUSD: dec("5"), Chain: "base"},
			"chain":     {ToUsername: bob.Username, AmountUSD: dec("5"), Memo: "rent"},
			"recipient": {ToUsername: alice.Username, AmountUSD: dec("5"), Chain: "base", Memo: "rent"},
		} {
			_, replayed, err := sendKeyed(e.svc, ctx, alice, keyOf("k-1"), other)
			require.ErrorIs(t, err, ErrIdempotencyKeyReused, name)
			require.False(t, replayed)
		}
		require.Len(t, e.transfers(t, alice), 1, "nothing moved")
	})

	t.Run("keys are the agent's own", func(t *testing.T) {
		e.fund(t, bob, chains.Base, "1")
		res, replayed, err := sendKeyed(e.svc, ctx, bob, keyOf("k-1"), SendRequest{ToUsername: alice.Username, AmountUSD: dec("1"), Chain: "base"})
		require.NoError(t, err)
		require.False(t, replayed)
		require.Equal(t, bob.ID, *res.Transfer.FromAgentID)
	})

	t.Run("a refusal is the answer", func(t *testing.T) {
		big := SendRequest{ToUsername: bob.Username, AmountUSD: dec("50"), Chain: "base"}
		_, replayed, err := sendKeyed(e.svc, ctx, alice, keyOf("k-broke"), big)
		require.ErrorIs(t, err, ErrInsufficientFunds)
		require.False(t, replayed)
		first := err.Error()
		e.fund(t, alice, chains.Base, "100")
		_, replayed, err = sendKeyed(e.svc, ctx, alice, keyOf("k-broke"), big)
		require.ErrorIs(t, err, ErrInsufficientFunds, "the key's answer, not a new send")
		require.True(t, replayed)
		require.Equal(t, first, err.Error())

		_, replayed, err = sendKeyed(e.svc, ctx, alice, keyOf("k-nobody"), SendRequest{ToUsername: "nobody_here", AmountUSD: dec("1"), Chain: "base"})
		require.ErrorIs(t, err, ErrNotFound)
		require.False(t, replayed)
		_, replayed, err = sendKeyed(e.svc, ctx, alice, keyOf("k-nobody"), SendRequest{ToUsername: "nobody_here", AmountUSD: dec("1"), Chain: "base"})
		require.ErrorIs(t, err, ErrNotFound)
		require.True(t, replayed)

		_, replayed, err = sendKeyed(e.svc, ctx, alice, keyOf("k-tiny"), SendRequest{ToUsername: bob.Username, AmountUSD: dec("0.001"), Chain: "base"})
		require.True(t, IsValidation(err))
		require.False(t, replayed)
		_, replayed, err = sendKeyed(e.svc, ctx, alice, keyOf("k-tiny"), SendRequest{ToUsername: bob.Username, AmountUSD: dec("0.001"), Chain: "base"})
		require.True(t, IsValidation(err))
		require.EqualError(t, err, "amount_usd: must be at least 0.01")
		require.True(t, replayed)
		require.Len(t, e.transfers(t, alice), 1, "nothing moved")
	})

	t.Run("no key: every request sends", func(t *testing.T) {
		for range 2 {
			_, replayed, err := sendKeyed(e.svc, ctx, alice, nil, SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Chain: "base"})
			require.NoError(t, err)
			require.False(t, replayed)
		}
		require.Len(t, e.transfers(t, alice), 3)
	})

	t.Run("a malformed key changes nothing", func(t *testing.T) {
		_, _, err := sendKeyed(e.svc, ctx, alice, keyOf(""), req)
		require.True(t, IsValidation(err))
		require.Len(t, e.transfers(t, alice), 3)
	})
}

// TestSendIdempotencyConcurrent: requests with one key at once make one
// transfer; each of the others is refused as in progress or answered with
// the first's result.
func TestSendIdempotencyConcurrent(t *testing.T) {
	e := startIdemEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Base, "10")
	req := SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Chain: "base"}

	const n = 8
	type answer struct {
		res      *SendResult
		replayed bool
		err      error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, replayed, err := sendKeyed(e.svc, ctx, alice, keyOf("same"), req)
			answers[i] = answer{res, replayed, err}
		}()
	}
	close(start)
	wg.Wait()

	ts := e.transfers(t, alice)
	require.Len(t, ts, 1, "one transfer")
	ran := 0
	for _, a := range answers {
		switch {
		case a.err == nil && !a.replayed:
			ran++
			require.Equal(t, ts[0].ID, a.res.Transfer.ID)
		case a.err == nil:
			require.Equal(t, ts[0].ID, a.res.Transfer.ID)
		default:
			require.ErrorIs(t, a.err, ErrConflict)
			require.ErrorContains(t, a.err, "still in progress")
		}
	}
	require.Equal(t, 1, ran, "one request ran the send")
	requireDecimal(t, "9", e.onChain(t, chains.Base, e.wallet(t, alice, chains.Base)), "sent once")
}

// errCrash is the panic that stands for a process dying mid-request.
var errCrash = errors.New("the process died")

// crashSend runs a send under key whose process dies (its goroutine
// panics, so nothing after it runs: no answer is written) once during has
// run inside the send's place; during gets the send itself to call, or not.
func (e *idemEnv) crashSend(t *testing.T, from *ent.Agent, key string, req SendRequest,
	during func(ctx context.Context, claim *idempotency.Claim, send func(context.Context, *idempotency.Claim) (*SendResult, error))) {
	t.Helper()
	req.IdempotencyKey = &key
	op, err := e.svc.sendOp(from, req)
	require.NoError(t, err)
	send := op.Run
	op.Run = func(ctx context.Context, claim *idempotency.Claim) (*SendResult, error) {
		during(ctx, claim, send)
		panic(errCrash)
	}
	require.PanicsWithValue(t, errCrash, func() { _, _, _ = idempotency.Do(context.Background(), e.svc.idem, op) })
}

// TestSendIdempotencyAfterCrash: a retry of a request that died holding
// its key is answered from the transfer it recorded (never sent again;
// the answer kept once the lease is over), or runs the send after the
// lease when it recorded none; a request that outlived its lease cannot record a transfer
// beside the retry that took its key over.
func TestSendIdempotencyAfterCrash(t *testing.T) {
	e := startIdemEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Base, "10")
	req := SendRequest{ToUsername: bob.Username, AmountUSD: dec("2"), Chain: "base"}

	t.Run("after recording its transfer", func(t *testing.T) {
		// The first request records and sends its transfer, then dies
		// before its answer is written.
		var first *SendResult
		e.crashSend(t, alice, "k-recorded", req, func(ctx context.Context, claim *idempotency.Claim, send func(context.Context, *idempotency.Claim) (*SendResult, error)) {
			var err error
			first, err = send(ctx, claim)
			require.NoError(t, err)
		})
		require.Equal(t, idempotencykey.StateInFlight, e.keyRow(t, alice, "k-recorded").State)

		// While the lease lasts (the first may still be running): its
		// transfer as it is now, never a second send.
		during, replayed, err := sendKeyed(e.svc, ctx, alice, keyOf("k-recorded"), req)
		require.NoError(t, err)
		require.True(t, replayed)
		require.Equal(t, first.Transfer.ID, during.Transfer.ID)
		require.Equal(t, idempotencykey.StateInFlight, e.keyRow(t, alice, "k-recorded").State, "not kept: the first writes its answer")

		e.clock.Advance(IdempotencyLease + time.Second)
		res, replayed, err := sendKeyed(e.svc, ctx, alice, keyOf("k-recorded"), req)
		require.NoError(t, err)
		require.True(t, replayed)
		require.Equal(t, first.Transfer.ID, res.Transfer.ID)
		require.Equal(t, "completed", res.Status)
		require.Equal(t, first.Message, res.Message)
		require.Equal(t, idempotencykey.StateDone, e.keyRow(t, alice, "k-recorded").State, "the answer is kept")
		require.Len(t, e.transfers(t, alice), 1, "not sent again")
		requireDecimal(t, "8", e.onChain(t, chains.Base, e.wallet(t, alice, chains.Base)))
	})

	t.Run("before recording anything", func(t *testing.T) {
		e.crashSend(t, alice, "k-nothing", req, func(context.Context, *idempotency.Claim, func(context.Context, *idempotency.Claim) (*SendResult, error)) {
		})

		_, _, err := sendKeyed(e.svc, ctx, alice, keyOf("k-nothing"), req)
		require.ErrorIs(t, err, ErrConflict)

		e.clock.Advance(IdempotencyLease + time.Second)
		res, replayed, err := sendKeyed(e.svc, ctx, alice, keyOf("k-nothing"), req)
		require.NoError(t, err)
		require.False(t, replayed, "the retry ran the send")
		require.Equal(t, "completed", res.Status)
		row := e.keyRow(t, alice, "k-nothing")
		require.Equal(t, 2, row.Attempt)
		require.Equal(t, res.Transfer.ID, *row.TransferID)
		require.Len(t, e.transfers(t, alice), 2)
	})

	t.Run("a slow request loses its claim", func(t *testing.T) {
		keyed := req
		keyed.IdempotencyKey = keyOf("k-slow")
		op, err := e.svc.sendOp(alice, keyed)
		require.NoError(t, err)
		var retry *SendResult
		send := op.Run
		op.Run = func(ctx context.Context, claim *idempotency.Claim) (*SendResult, error) {
			// The request stalls past its lease; a retry takes the claim
			// over and sends; then the slow request goes on.
			e.clock.Advance(IdempotencyLease + time.Second)
			var replayed bool
			retry, replayed, err = e.svc.Send(ctx, alice, keyed)
			require.NoError(t, err)
			require.False(t, replayed, "the retry took the abandoned claim over")
			return send(ctx, claim)
		}
		_, replayed, err := idempotency.Do(ctx, e.svc.idem, op)
		require.ErrorIs(t, err, ErrConflict)
		require.False(t, replayed)
		row := e.keyRow(t, alice, "k-slow")
		require.Equal(t, retry.Transfer.ID, *row.TransferID, "the retry's answer stays the key's")
		require.Equal(t, idempotencykey.StateDone, row.State)
		require.Len(t, e.transfers(t, alice), 3, "the slow request's transfer was rolled back")
		requireDecimal(t, "4", e.onChain(t, chains.Base, e.wallet(t, alice, chains.Base)))
	})
}

// TestSendIdempotencyExpiry: a key is kept 24 hours (replayed until then),
// then free again, and the pruning deletes it.
func TestSendIdempotencyExpiry(t *testing.T) {
	e := startIdemEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Base, "10")
	req := SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Chain: "base"}

	first, _, err := sendKeyed(e.svc, ctx, alice, keyOf("daily"), req)
	require.NoError(t, err)
	_, _, err = sendKeyed(e.svc, ctx, alice, keyOf("other"), req)
	require.NoError(t, err)

	e.clock.Advance(IdempotencyKeyTTL - time.Second)
	n, err := e.svc.PruneIdempotencyKeys(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "kept 24 hours")
	res, replayed, err := sendKeyed(e.svc, ctx, alice, keyOf("daily"), req)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.Transfer.ID, res.Transfer.ID)

	e.clock.Advance(time.Second)
	res, replayed, err = sendKeyed(e.svc, ctx, alice, keyOf("daily"), req)
	require.NoError(t, err)
	require.False(t, replayed, "after 24 hours the key starts a new send")
	require.NotEqual(t, first.Transfer.ID, res.Transfer.ID)
	require.Len(t, e.transfers(t, alice), 3)

	e.clock.Advance(time.Second)
	n, err = e.svc.PruneIdempotencyKeys(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the expired key")
	require.Nil(t, e.keyRow(t, alice, "other"))
	require.NotNil(t, e.keyRow(t, alice, "daily"), "the new request's key is kept")
}

// TestSendIdempotencyReleasesTransientFailures: a failure that recorded
// nothing (the chain unreachable) is not the key's answer: the claim is
// released and a retry with the key runs again.
func TestSendIdempotencyReleasesTransientFailures(t *testing.T) {
	e := startIdemEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	require.NoError(t, e.env.EVM(chains.Base).Close()) // base's RPC is gone
	req := SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Chain: "base"}
	for range 2 {
		_, replayed, err := sendKeyed(e.svc, ctx, alice, keyOf("k"), req)
		require.ErrorIs(t, err, ErrUnavailable)
		require.False(t, replayed, "run again, not replayed")
		require.Nil(t, e.keyRow(t, alice, "k"), "released")
	}
	require.Empty(t, e.transfers(t, alice))
}
