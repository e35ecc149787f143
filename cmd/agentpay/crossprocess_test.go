package main

// Tests of `serve` and `worker` as separate OS processes on PostgreSQL: a
// subscriber on `serve` sees what the worker process commits, and a worker
// killed in the middle of a payment loses nothing and sends nothing twice.
// The harness is in process_test.go.

import (
	"encoding/json"
	"math/big"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains/devnet/usdc"
)

// processTestTimeout bounds each wait of these tests: generous for a loaded
// CI machine; a passing run takes a few seconds per step.
const processTestTimeout = 45 * time.Second

// testMetadata is the session metadata every webhook must carry intact.
var testMetadata = map[string]any{
	"order_id": "ord_7781",
	"customer": map[string]any{"tier": "gold", "tags": []any{"a", "b"}},
	"qty":      json.Number("3"),
}

// TestProcessSubscriptionAcrossProcesses: a websocket subscriber on the
// serve process sees every status of a session that a separate worker
// process detects and confirms. Nothing but PostgreSQL NOTIFY connects the
// worker's changes to the serve process: without the fan-out the
// subscriber would stop at detecting.
func TestProcessSubscriptionAcrossProcesses(t *testing.T) {
	e := newProcEnv(t)
	_, api := e.Serve("serve")
	e.Worker("worker")
	e.WaitFirstScan()

	m := e.RegisterMerchant(api)
	id := e.CreateSession(api, m, "12.50", testMetadata)
	sub := subscribeSessionStatus(t, api, id)
	sub.waitStatus(t, "PENDING")

	d := e.Select(api, id)
	sub.waitStatus(t, "DETECTING")

	amount, ok := new(big.Int).SetString(d.AmountBaseUnits.String(), 10)
	require.True(t, ok, d.AmountBaseUnits)
	require.Equal(t, big.NewInt(12_500_000), amount)
	tx := e.Pay(d.Address, amount)
	e.KeepMining(200 * time.Millisecond)

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("status read through REST at the end: %s", e.Status(api, id))
		}
	})
	last := sub.waitStatus(t, "CONFIRMED")
	require.Equal(t, []string{"PENDING", "DETECTING", "CONFIRMING", "CONFIRMED"}, sub.statusChanges(),
		"every status, in order, each once")
	require.Equal(t, "12.5", last.AmountPaid.String())
	require.Equal(t, "base", *last.Chain)
	require.GreaterOrEqual(t, last.Confirmations, procTestConfirmations)

	got := requirePaidSessionEvents(t, e, api, m, id)
	for _, kind := range []string{agentpay.EventPaymentDetected, agentpay.EventPaymentConfirmed} {
		requirePaymentPayload(t, e, got[kind], id, tx)
	}
}

// TestProcessKillWorker: the worker process is killed (SIGKILL) in the
// middle of a payment's processing while blocks keep coming; a new worker
// process finishes the work. The session confirms, and the healthy receiver
// gets every event exactly once.
func TestProcessKillWorker(t *testing.T) {
	requirePostgres(t)
	t.Run("after payment.detected is delivered", func(t *testing.T) {
		e := newProcEnv(t)
		_, api := e.Serve("serve")
		w := e.Worker("worker-1")
		e.WaitFirstScan()
		m, id, d := paidSessionSetup(t, e, api)

		tx := e.Pay(d.Address, mustAmount(t, d))
		// No blocks are mined until the kill: the payment stays short of
		// its confirmations.
		waitFor(t, processTestTimeout, func() bool {
			return e.Receiver.HasAcked(id, agentpay.EventPaymentDetected) && allDelivered(e.WebhookLog(api, m), id)
		}, "payment.detected delivered and recorded")
		require.Equal(t, "confirming", e.Status(api, id), "seen, not yet confirmed")

		w.kill()
		e.KeepMining(200 * time.Millisecond)
		waitFor(t, processTestTimeout, func() bool {
			n, err := e.base.Client().BlockNumber(t.Context())
			return err == nil && n >= e.blockOf(t, tx)+procTestConfirmations
		}, "the payment's confirmations mined while no worker runs")
		require.Equal(t, "confirming", e.Status(api, id), "no worker, no confirmation")

		e.Worker("worker-2")
		got := requirePaidSessionEvents(t, e, api, m, id)
		requirePaymentPayload(t, e, got[agentpay.EventPaymentConfirmed], id, tx)
		require.Equal(t, "confirmed", e.Status(api, id))
	})

	t.Run("as soon as the deposit is seen", func(t *testing.T) {
		e := newProcEnv(t)
		_, api := e.Serve("serve")
		w := e.Worker("worker-1")
		e.WaitFirstScan()
		m, id, d := paidSessionSetup(t, e, api)

		// The first try of payment.detected is held by the receiver and
		// cut off by the kill: the worker dies with the scan that saw the
		// deposit just committed and the delivery in flight.
		held := e.Receiver.HoldFirst(agentpay.EventPaymentDetected)
		tx := e.Pay(d.Address, mustAmount(t, d))
		var first receivedWebhook
		select {
		case first = <-held:
		case <-time.After(processTestTimeout):
			t.Fatal("payment.detected never arrived")
		}
		w.kill()
		require.Equal(t, id, webhookSession(first))

		e.KeepMining(200 * time.Millisecond)
		e.Worker("worker-2")
		got := requirePaidSessionEvents(t, e, api, m, id)
		require.Equal(t, first.EventID, got[agentpay.EventPaymentDetected].EventID,
			"the event whose try was cut off is delivered by the new worker, not a new one")
		requirePaymentPayload(t, e, got[agentpay.EventPaymentConfirmed], id, tx)
		require.Equal(t, "confirmed", e.Status(api, id))
	})
}

// paidSessionSetup registers a merchant, creates a 12.50 USD session and
// selects base.
func paidSessionSetup(t *testing.T, e *procEnv, api string) (merchant, string, deposit) {
	t.Helper()
	m := e.RegisterMerchant(api)
	id := e.CreateSession(api, m, "12.50", testMetadata)
	return m, id, e.Select(api, id)
}

func mustAmount(t *testing.T, d deposit) *big.Int {
	t.Helper()
	amount, ok := new(big.Int).SetString(d.AmountBaseUnits.String(), 10)
	require.True(t, ok, d.AmountBaseUnits)
	return amount
}

// blockOf is the number of the block including tx.
func (e *procEnv) blockOf(t *testing.T, tx common.Hash) uint64 {
	t.Helper()
	r, err := e.base.Client().TransactionReceipt(t.Context(), tx)
	require.NoError(t, err)
	return r.BlockNumber.Uint64()
}

// ---- what a paid session's receiver must get ----

// eventExpectations are the webhook events of one session: Required kinds
// arrive exactly once; Optional kinds at most once (payment.confirming is
// skipped when a worker first sees the deposit already final); no other
// kind may arrive.
type eventExpectations struct {
	Required []string
	Optional []string
}

// paidSessionEvents is what a session paid in full, exactly, gets.
var paidSessionEvents = eventExpectations{
	Required: []string{agentpay.EventPaymentDetected, agentpay.EventPaymentConfirmed, agentpay.EventSettlementCompleted},
	Optional: []string{agentpay.EventPaymentConfirming},
}

// paidSessionChecks run after the events of a paid session have all been
// delivered.
var paidSessionChecks = []func(t *testing.T, e *procEnv, api string, m merchant, sessionExternalID string){
	requireSettledOnce,
}

// requireSettledOnce: the merchant's settlement address on base holds
// exactly the net of settlement.completed (one session per merchant in
// these tests), however often the worker was killed and restarted.
func requireSettledOnce(t *testing.T, e *procEnv, _ string, m merchant, sessionExternalID string) {
	t.Helper()
	var net string
	for _, w := range e.Receiver.Acked(sessionExternalID) {
		if w.Event != agentpay.EventSettlementCompleted {
			continue
		}
		var body struct {
			Data struct {
				NetUSD            json.Number `json:"net_usd"`
				SettlementAddress string      `json:"settlement_address"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(w.Body, &body))
		require.Equal(t, m.SettlementAddress, body.Data.SettlementAddress)
		net = body.Data.NetUSD.String()
	}
	require.NotEmpty(t, net, "settlement.completed carries net_usd")
	want := decimal.RequireFromString(net).Shift(6).BigInt()
	var got *big.Int
	token, err := usdc.NewUSDC(e.base.USDC, e.base.Client())
	require.NoError(t, err)
	got, err = token.BalanceOf(&bind.CallOpts{Context: t.Context()}, common.HexToAddress(m.SettlementAddress))
	require.NoError(t, err)
	require.Equal(t, want.String(), got.String(), "the merchant is paid the net once")
}

// requirePaidSessionEvents waits until the session's Required events have
// reached the receiver and every delivery of the session's events is
// recorded as succeeded (after which nothing is sent again), then requires
// that nothing was lost, duplicated or invented:
//   - the service recorded each kind at most once (one event id), the
//     Required ones all, no unexpected kind;
//   - the receiver acknowledged each of those event ids exactly once and no
//     other event of the session;
//   - every delivery, acknowledged or cut off, carries a valid signature.
//
// It returns the acknowledged delivery of each kind.
func requirePaidSessionEvents(t *testing.T, e *procEnv, api string, m merchant, sessionExternalID string) map[string]receivedWebhook {
	t.Helper()
	want := paidSessionEvents
	var logged []webhookLogEvent
	waitFor(t, processTestTimeout, func() bool {
		for _, kind := range want.Required {
			if !e.Receiver.HasAcked(sessionExternalID, kind) {
				return false
			}
		}
		logged = e.WebhookLog(api, m)
		return allDelivered(logged, sessionExternalID)
	}, "the session's events %v delivered and recorded", want.Required)

	allowed := map[string]bool{}
	for _, k := range append(append([]string{}, want.Required...), want.Optional...) {
		allowed[k] = true
	}
	idsByKind := map[string][]string{}
	loggedIDs := map[string]string{}
	for _, ev := range logged {
		if ev.SessionExternalID != sessionExternalID {
			continue
		}
		require.True(t, allowed[ev.Event], "unexpected event %s", ev.Event)
		idsByKind[ev.Event] = append(idsByKind[ev.Event], ev.ID)
		loggedIDs[ev.ID] = ev.Event
	}
	for kind, ids := range idsByKind {
		require.Len(t, ids, 1, "%s recorded more than once for the session: %v", kind, ids)
	}
	for _, kind := range want.Required {
		require.Contains(t, idsByKind, kind, "%s never recorded", kind)
	}

	for _, w := range e.Receiver.Requests() {
		if webhookSession(w) == sessionExternalID {
			require.True(t, e.Receiver.ValidSignature(w), "bad signatures on %s %s", w.Event, w.EventID)
		}
	}
	acked := e.Receiver.Acked(sessionExternalID)
	perID := map[string]int{}
	got := map[string]receivedWebhook{}
	for _, w := range acked {
		perID[w.EventID]++
		got[w.Event] = w
		require.Equal(t, loggedIDs[w.EventID], w.Event, "event %s (%s) delivered but not in the webhook log", w.EventID, w.Event)
	}
	for id, kind := range loggedIDs {
		require.Equal(t, 1, perID[id], "%s (%s) acknowledged %d times, want exactly once; received: %s",
			kind, id, perID[id], describeReceived(acked))
	}
	require.Len(t, perID, len(loggedIDs), "received: %s", describeReceived(acked))

	for _, check := range paidSessionChecks {
		check(t, e, api, m, sessionExternalID)
	}
	return got
}

// allDelivered reports whether the session has events and every delivery
// of each has succeeded.
func allDelivered(log []webhookLogEvent, sessionExternalID string) bool {
	n := 0
	for _, ev := range log {
		if ev.SessionExternalID != sessionExternalID {
			continue
		}
		n++
		if len(ev.Deliveries) == 0 {
			return false
		}
		for _, d := range ev.Deliveries {
			if d.Status != "succeeded" {
				return false
			}
		}
	}
	return n > 0
}

func describeReceived(ws []receivedWebhook) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, w.Event+" "+w.EventID)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// requirePaymentPayload checks the spec 6.3 fields (plus id and livemode)
// of a payment event of the session paid by tx from the devnet payer.
func requirePaymentPayload(t *testing.T, e *procEnv, w receivedWebhook, sessionExternalID string, tx common.Hash) {
	t.Helper()
	var body struct {
		ID        string         `json:"id"`
		Event     string         `json:"event"`
		Data      map[string]any `json:"data"`
		Timestamp string         `json:"timestamp"`
		Livemode  *bool          `json:"livemode"`
	}
	dec := json.NewDecoder(strings.NewReader(string(w.Body)))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&body))
	require.Equal(t, w.EventID, body.ID)
	require.NotEmpty(t, body.ID)
	require.Equal(t, w.Event, body.Event)
	require.NotNil(t, body.Livemode)
	require.False(t, *body.Livemode)
	ts, err := time.Parse(time.RFC3339Nano, body.Timestamp)
	require.NoError(t, err, body.Timestamp)
	require.Equal(t, time.UTC, ts.Location(), "timestamp in UTC")

	d := body.Data
	require.Equal(t, sessionExternalID, d["session_external_id"], w.Event)
	require.Regexp(t, `^pay_`, d["payment_external_id"], w.Event)
	require.Equal(t, json.Number("12.5"), d["amount_usd"], w.Event)
	require.Equal(t, json.Number("12.5"), d["amount_token"], w.Event)
	require.Equal(t, "USDC", d["token"], w.Event)
	require.Equal(t, "base", d["chain"], w.Event)
	require.Equal(t, strings.ToLower(tx.Hex()), strings.ToLower(d["tx_hash"].(string)), w.Event)
	payer := crypto.PubkeyToAddress(e.base.Payer.PublicKey)
	require.Equal(t, strings.ToLower(payer.Hex()), strings.ToLower(d["from_address"].(string)), w.Event)
	require.Equal(t, testMetadata, d["metadata"], "%s: metadata intact", w.Event)
}

// ---- the sessionStatus subscription over graphql-transport-ws ----

type statusMessage struct {
	Status        string      `json:"status"`
	AmountPaid    json.Number `json:"amountPaid"`
	Chain         *string     `json:"chain"`
	Confirmations int         `json:"confirmations"`
}

// statusSub is one sessionStatus subscription; a goroutine reads its
// messages as they come.
type statusSub struct {
	mu   sync.Mutex
	msgs []statusMessage
	err  error
}

func subscribeSessionStatus(t *testing.T, api, externalID string) *statusSub {
	t.Helper()
	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 10 * time.Second}
	conn, _, err := dialer.Dial("ws"+strings.TrimPrefix(api, "http")+"/graphql", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{}}))
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	var ack struct{ Type string }
	require.NoError(t, conn.ReadJSON(&ack))
	require.Equal(t, "connection_ack", ack.Type)
	require.NoError(t, conn.SetReadDeadline(time.Time{}))
	require.NoError(t, conn.WriteJSON(map[string]any{"id": "s", "type": "subscribe", "payload": map[string]any{
		"query":     `subscription($id: String!) { sessionStatus(externalId: $id) { status amountPaid chain confirmations } }`,
		"variables": map[string]any{"id": externalID},
	}}))

	s := &statusSub{}
	t.Cleanup(func() {
		if t.Failed() {
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Logf("sessionStatus messages received: %+v", s.msgs)
		}
	})
	go func() {
		for {
			var m struct {
				Type    string          `json:"type"`
				ID      string          `json:"id"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := conn.ReadJSON(&m); err != nil {
				s.fail(err)
				return
			}
			switch m.Type {
			case "ping":
				_ = conn.WriteJSON(map[string]any{"type": "pong"})
				continue
			case "pong":
				continue
			case "next":
			default:
				s.fail(&subError{msg: m.Type + ": " + string(m.Payload)})
				return
			}
			var out struct {
				Data struct {
					SessionStatus statusMessage `json:"sessionStatus"`
				} `json:"data"`
				Errors json.RawMessage `json:"errors"`
			}
			if err := json.Unmarshal(m.Payload, &out); err != nil || len(out.Errors) > 0 {
				s.fail(&subError{msg: "bad message: " + string(m.Payload)})
				return
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, out.Data.SessionStatus)
			s.mu.Unlock()
		}
	}()
	return s
}

type subError struct{ msg string }

func (e *subError) Error() string { return e.msg }

func (s *statusSub) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// waitStatus waits until a message with status has arrived and returns it.
func (s *statusSub) waitStatus(t *testing.T, status string) statusMessage {
	t.Helper()
	var found statusMessage
	waitFor(t, processTestTimeout, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		require.NoError(t, s.err, "subscription ended; statuses so far: %v", s.msgs)
		for _, m := range s.msgs {
			if m.Status == status {
				found = m
				return true
			}
		}
		return false
	}, "status %q on the subscription", status)
	return found
}

// statusChanges lists the statuses received, consecutive repeats (a message
// for a new confirmation count) folded.
func (s *statusSub) statusChanges() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.msgs {
		if len(out) == 0 || out[len(out)-1] != m.Status {
			out = append(out, m.Status)
		}
	}
	return out
}
