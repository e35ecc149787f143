package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent/transfer"
	"agentpay/internal/httpx"
)

// heldBase is an API whose agents' Base wallets live on a devnet that
// makes a block only when the test says so: a send waits for inclusion, in
// flight, until then.
type heldBase struct {
	*sendChains
	api *testAPI
}

func startHeldBase(t *testing.T) *heldBase {
	t.Helper()
	c := startSendChainsEvery(t, 0)
	return &heldBase{sendChains: c, api: c.api(t, nil)}
}

// fundedPair registers a sender (tier T3, so its rate limit stays out of
// the way) holding units of USDC on base, and a recipient.
func (h *heldBase) fundedPair(t *testing.T, units int64) (from, to registered) {
	t.Helper()
	from, to = h.api.register("alice_idem"), h.api.register("bob_idem")
	raiseTier(t, h.api, from.ID)
	h.fund(t, chains.Base, from.Base, units)
	return from, to
}

// exchange is one answer read off the wire, for requests made away from
// the test's goroutine (testAPI.do may only fail the test there).
type exchange struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (h *heldBase) post(path string, body any, header http.Header) exchange {
	raw, err := json.Marshal(body)
	if err != nil {
		return exchange{err: err}
	}
	req, err := http.NewRequest(http.MethodPost, h.api.Server.URL+path, bytes.NewReader(raw))
	if err != nil {
		return exchange{err: err}
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.api.Server.Client().Do(req)
	if err != nil {
		return exchange{err: err}
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return exchange{status: resp.StatusCode, header: resp.Header, body: out, err: err}
}

// mineUntil makes blocks until done is closed.
func (h *heldBase) mineUntil(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
			h.env.EVM(chains.Base).Commit()
		}
	}
}

func (h *heldBase) transfers(t *testing.T, from registered) []uuid.UUID {
	t.Helper()
	ids, err := h.api.DB.Ent.Transfer.Query().Where(transfer.FromAgentID(uuid.MustParse(from.ID))).IDs(context.Background())
	require.NoError(t, err)
	return ids
}

func withIdempotencyKey(h http.Header, key string) http.Header {
	h = h.Clone()
	h.Add(httpx.IdempotencyKeyHeader, key)
	return h
}

// TestSendIdempotencyOverREST: while a send with an Idempotency-Key waits
// for its block, the same request answers its transfer pending and
// another request with the key is 422, neither moving anything; once answered, the same request gets the
// identical body again with Idempotent-Replayed: true. A malformed key is
// 400.
func TestSendIdempotencyOverREST(t *testing.T) {
	h := startHeldBase(t)
	alice, bob := h.fundedPair(t, 100_000_000)
	body := map[string]any{"to_username": bob.Username, "amount_usd": 50, "chain": "base"}
	keyed := withIdempotencyKey(agentKey(alice.APIKey), "order-17")

	first := make(chan exchange, 1)
	go func() { first <- h.post("/agents/me/wallet/send", body, keyed) }()
	require.Eventually(t, func() bool {
		n, err := h.api.DB.Ent.Transfer.Query().Where(transfer.StatusEQ(transfer.StatusSubmitted)).Count(context.Background())
		return err == nil && n == 1
	}, 30*time.Second, 10*time.Millisecond, "the first send is broadcast and waits for its block")

	// The same request while the first waits: the first's transfer as it
	// is now (pending), never a second send.
	resp := h.api.do(http.MethodPost, "/agents/me/wallet/send", body, keyed)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, "true", resp.Header.Get(httpx.IdempotentReplayedHeader))
	during := resp.Map(t)
	require.Equal(t, "pending", during["status"])
	require.Equal(t, h.transfers(t, alice)[0].String(), during["transaction_id"])

	other := map[string]any{"to_username": bob.Username, "amount_usd": 49, "chain": "base"}
	resp = h.api.do(http.MethodPost, "/agents/me/wallet/send", other, keyed)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
	assertGolden(t, "send_idempotency_key_reused", resp.Body, nil)
	require.Len(t, h.transfers(t, alice), 1, "neither moved anything")

	mined := make(chan struct{})
	go h.mineUntil(mined)
	got := <-first
	close(mined)
	require.NoError(t, got.err)
	require.Equal(t, http.StatusOK, got.status, string(got.body))
	require.Empty(t, got.header.Get(httpx.IdempotentReplayedHeader), "the first answer is not a replay")

	resp = h.api.do(http.MethodPost, "/agents/me/wallet/send", body, keyed)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, "true", resp.Header.Get(httpx.IdempotentReplayedHeader))
	require.Equal(t, string(got.body), string(resp.Body), "the first answer, byte for byte")
	assertGolden(t, "send_completed_base", resp.Body, map[string]string{alice.Username: "<from>", bob.Username: "<to>"})
	require.Len(t, h.transfers(t, alice), 1, "sent once")

	// A refusal is replayed too, with the same status and detail.
	tooMuch := map[string]any{"to_username": bob.Username, "amount_usd": 60, "chain": "base"}
	refusalKey := withIdempotencyKey(agentKey(alice.APIKey), "order-18")
	resp = h.api.do(http.MethodPost, "/agents/me/wallet/send", tooMuch, refusalKey)
	require.Equal(t, http.StatusBadRequest, resp.Status, string(resp.Body))
	require.Empty(t, resp.Header.Get(httpx.IdempotentReplayedHeader))
	again := h.api.do(http.MethodPost, "/agents/me/wallet/send", tooMuch, refusalKey)
	require.Equal(t, http.StatusBadRequest, again.Status)
	require.Equal(t, "true", again.Header.Get(httpx.IdempotentReplayedHeader))
	require.Equal(t, string(resp.Body), string(again.Body))

	for _, tc := range []struct {
		name   string
		header http.Header
		golden string
	}{
		{"empty", withIdempotencyKey(agentKey(alice.APIKey), ""), "send_idempotency_key_empty"},
		{"not ASCII", withIdempotencyKey(agentKey(alice.APIKey), "clé"), "send_idempotency_key_not_ascii"},
		{"given twice", withIdempotencyKey(withIdempotencyKey(agentKey(alice.APIKey), "a"), "b"), "send_idempotency_key_twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.api.do(http.MethodPost, "/agents/me/wallet/send", body, tc.header)
			require.Equal(t, http.StatusBadRequest, resp.Status, string(resp.Body))
			assertGolden(t, tc.golden, resp.Body, nil)
		})
	}
	require.Len(t, h.transfers(t, alice), 1)
	requireDec(t, "50", h.onChain(t, chains.Base, alice.Base))
	requireDec(t, "49.95", h.onChain(t, chains.Base, bob.Base))
}

// TestSendIdempotencyConcurrentOverREST: requests with one key at once
// make one transfer; the others are 409 or the first's answer replayed.
func TestSendIdempotencyConcurrentOverREST(t *testing.T) {
	h := startHeldBase(t)
	alice, bob := h.fundedPair(t, 10_000_000)
	body := map[string]any{"to_username": bob.Username, "amount_usd": 1, "chain": "base"}
	keyed := withIdempotencyKey(agentKey(alice.APIKey), "burst")

	const n = 8
	got := make([]exchange, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got[i] = h.post("/agents/me/wallet/send", body, keyed)
		}()
	}
	mined := make(chan struct{})
	go h.mineUntil(mined)
	close(start)
	wg.Wait()
	close(mined)

	var ran, replayed, inProgress int
	var first []byte
	for _, x := range got {
		require.NoError(t, x.err)
		switch {
		case x.status == http.StatusOK && x.header.Get(httpx.IdempotentReplayedHeader) == "":
			ran++
			first = x.body
		case x.status == http.StatusOK:
			replayed++
		default:
			require.Equal(t, http.StatusConflict, x.status, string(x.body))
			require.Contains(t, string(x.body), "still in progress")
			inProgress++
		}
	}
	t.Logf("%d sent, %d replayed, %d in progress", ran, replayed, inProgress)
	require.Equal(t, 1, ran, "one request sent")
	require.Equal(t, n, ran+replayed+inProgress)
	var firstBody struct {
		TransactionID string `json:"transaction_id"`
	}
	require.NoError(t, json.Unmarshal(first, &firstBody))
	for _, x := range got {
		if x.status == http.StatusOK {
			// A replay while the first ran answers its transfer as it was
			// then (pending); the same transfer either way.
			var b struct {
				TransactionID string `json:"transaction_id"`
			}
			require.NoError(t, json.Unmarshal(x.body, &b))
			require.Equal(t, firstBody.TransactionID, b.TransactionID)
		}
	}
	require.Len(t, h.transfers(t, alice), 1)
	requireDec(t, "9", h.onChain(t, chains.Base, alice.Base))
}
