package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains/devnet/usdc"
)

// TestProcessChurn is issue 26's production shape under churn, from
// outside: two `serve` and two `worker` processes on PostgreSQL, the base
// chain's RPC behind a proxy that fails 10% of calls (half answered 500,
// half dropped without an answer) and delays a fifth by up to 1.5 s, and a
// random process SIGKILLed every 2 s and started again at once, as an
// orchestrator does. Customers pay sessions meanwhile. Every payment must
// confirm and settle while the churn goes on, and nothing be lost or
// doubled: each session has one event of each kind (one id), every event
// reaches the receiver, the merchant's settlement address holds exactly
// the sum of the settled nets.
func TestProcessChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four processes under churn for a minute or more")
	}
	requirePostgres(t)
	e := newProcEnv(t)
	proxy := newFlakyRPC(t, e.base.RPCURL)
	viaProxy := "CHAIN_BASE_TEST_RPC_URL=" + proxy.URL
	// Payouts in batches of two payments or more (12.49 net each): the
	// batches are paid while the churn goes on. Which payments a batch
	// takes depends on when each was swept, so one can be left alone
	// below the minimum (a batch took three or five); the interval pays
	// it, as an hour does in production.
	e.env = append(e.env, "SETTLEMENT_MINIMUM_USD=20", "SETTLEMENT_INTERVAL=10s")

	// The shape: the API processes on fixed ports (a restarted one comes
	// back where the clients look for it), every process's RPC through the
	// proxy.
	type slot struct {
		name, addr string
		serve      bool
		mu         sync.Mutex
		p          *proc
	}
	var slots []*slot
	for i := range 2 {
		slots = append(slots, &slot{name: fmt.Sprintf("serve-%d", i+1), addr: "127.0.0.1:" + freePort(t), serve: true})
	}
	for i := range 2 {
		slots = append(slots, &slot{name: fmt.Sprintf("worker-%d", i+1)})
	}
	start := func(s *slot) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.serve {
			s.p = e.startWith(s.name, []string{viaProxy, "HTTP_ADDR=" + s.addr}, "serve")
		} else {
			s.p = e.startWith(s.name, []string{viaProxy}, "worker")
		}
	}
	for _, s := range slots {
		start(s)
	}
	apis := []string{"http://" + slots[0].addr, "http://" + slots[1].addr}
	c := &churnClient{t: t, apis: apis, http: &http.Client{Timeout: 10 * time.Second}}
	waitFor(t, 2*time.Minute, func() bool { return c.ready() }, "both API processes ready")
	e.WaitFirstScan()

	var m merchant
	c.must(func(api string) error {
		var err error
		m, err = c.registerMerchant(e, api)
		return err
	}, "register the merchant")
	e.KeepMining(250 * time.Millisecond)

	// The churn: a random process killed every 2 s, started again at once.
	stop, stopped := make(chan struct{}), make(chan struct{})
	var kills atomic.Int64
	go func() {
		defer close(stopped)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			s := slots[rand.IntN(len(slots))]
			s.mu.Lock()
			p := s.p
			s.mu.Unlock()
			p.kill()
			kills.Add(1)
			start(s)
		}
	}()
	stopChurn := func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-stopped
		}
	}
	t.Cleanup(stopChurn)

	// Customers pay sessions while it goes on.
	const sessions = 8
	var ids []string
	began := time.Now()
	for i := range sessions {
		var id string
		c.must(func(api string) error {
			var err error
			id, err = c.createSession(api, m, "12.50")
			return err
		}, "create session %d", i)
		var d deposit
		c.must(func(api string) error {
			var err error
			d, err = c.selectBase(api, id)
			return err
		}, "select base for %s", id)
		e.Pay(d.Address, mustAmount(t, d))
		ids = append(ids, id)
	}

	// Every payment confirms and settles, the churn still going. A batch
	// pays several sessions at once: its settlement.completed names each
	// payment it paid (data.payments). A minute or two here, the payouts
	// the slowest step (their batches are formed and paid by jobs the
	// churn keeps killing; the timeline logged below shows each step): six
	// minutes leave room for CI's loaded machine.
	confirmed := []string{agentpay.EventPaymentDetected, agentpay.EventPaymentConfirmed}
	var logged []webhookLogEvent
	var settled map[string]churnSettlement
	waitFor(t, 6*time.Minute, func() bool {
		for _, id := range ids {
			for _, kind := range confirmed {
				if !e.Receiver.HasAcked(id, kind) {
					return false
				}
			}
		}
		settled = churnSettlements(t, e)
		paid := map[string]int{}
		for _, st := range settled {
			for _, id := range st.sessions {
				paid[id]++
			}
		}
		for _, id := range ids {
			if paid[id] == 0 {
				return false
			}
		}
		var err error
		if logged, err = c.webhookLog(m); err != nil {
			return false
		}
		for _, ev := range logged {
			if len(ev.Deliveries) == 0 || ev.Deliveries[len(ev.Deliveries)-1].Status != "succeeded" {
				return false
			}
		}
		return true
	}, "all %d sessions confirmed and settled under churn: %s (%v kills; RPC %v)", sessions, lazy(func() string { return churnProgress(e, ids) }), lazy(func() string { return fmt.Sprint(kills.Load()) }), proxy)
	stopChurn()
	t.Logf("under churn: %d sessions paid, confirmed and settled in %s; %d kills, %d settlement batches, RPC calls %s",
		sessions, time.Since(began).Round(time.Second), kills.Load(), len(settled), proxy.counts())
	t.Logf("timeline:%s", churnTimeline(e))
	require.GreaterOrEqual(t, kills.Load(), int64(3), "the processes were killed while payments went through")

	// Nothing lost or doubled: one event of each kind per session (one
	// id), each delivery of an event in the log and signed, each session
	// paid out by one batch, the settlement address holding exactly the
	// batches' nets.
	inLog := map[string]string{}
	for _, ev := range logged {
		inLog[ev.ID] = ev.Event
	}
	for _, id := range ids {
		kinds := map[string][]string{}
		for _, ev := range logged {
			if ev.SessionExternalID == id {
				kinds[ev.Event] = append(kinds[ev.Event], ev.ID)
			}
		}
		for _, kind := range confirmed {
			require.Len(t, kinds[kind], 1, "session %s: %s recorded once", id, kind)
		}
		for kind, evs := range kinds {
			require.Len(t, evs, 1, "session %s: %s recorded once", id, kind)
		}
	}
	for _, w := range e.Receiver.Requests() {
		if !w.Acked {
			continue
		}
		require.True(t, e.Receiver.ValidSignature(w), "bad signature on %s %s", w.Event, w.EventID)
		require.Equal(t, inLog[w.EventID], w.Event, "%s %s delivered but not in the webhook log", w.Event, w.EventID)
	}
	paid := map[string]int{}
	net := decimal.Zero
	for _, st := range settled {
		net = net.Add(st.net)
		for _, id := range st.sessions {
			paid[id]++
		}
	}
	for _, id := range ids {
		require.Equal(t, 1, paid[id], "session %s paid out by one batch", id)
	}
	token, err := usdc.NewUSDC(e.base.USDC, e.base.Client())
	require.NoError(t, err)
	held, err := token.BalanceOf(&bind.CallOpts{Context: t.Context()}, common.HexToAddress(m.SettlementAddress))
	require.NoError(t, err)
	require.True(t, net.IsPositive())
	require.Equal(t, net.Shift(6).BigInt().String(), held.String(), "the merchant is paid each net once")
}

// churnSettlement is one settlement.completed as the receiver got it: its
// net and the sessions of the payments it paid.
type churnSettlement struct {
	net      decimal.Decimal
	sessions []string
}

// churnSettlements are the acknowledged settlement.completed events, by
// event id (an event delivered twice counts once).
func churnSettlements(t *testing.T, e *procEnv) map[string]churnSettlement {
	out := map[string]churnSettlement{}
	for _, w := range e.Receiver.Requests() {
		if !w.Acked || w.Event != agentpay.EventSettlementCompleted {
			continue
		}
		var body struct {
			Data struct {
				NetUSD   json.Number `json:"net_usd"`
				Payments []struct {
					SessionExternalID string `json:"session_external_id"`
				} `json:"payments"`
			} `json:"data"`
		}
		d := json.NewDecoder(bytes.NewReader(w.Body))
		d.UseNumber()
		require.NoError(t, d.Decode(&body))
		st := churnSettlement{net: decimal.RequireFromString(body.Data.NetUSD.String())}
		for _, p := range body.Data.Payments {
			st.sessions = append(st.sessions, p.SessionExternalID)
		}
		out[w.EventID] = st
	}
	return out
}

// churnClient calls whichever API process answers: under churn one may be
// down or restarting at any moment, as behind a load balancer.
type churnClient struct {
	t    *testing.T
	apis []string
	http *http.Client
	next atomic.Int64
}

// must runs do against the API processes in turn until one succeeds, for
// at most a minute.
func (c *churnClient) must(do func(api string) error, format string, args ...any) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		api := c.apis[int(c.next.Add(1))%len(c.apis)]
		if last = do(api); last == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("%s: %v", fmt.Sprintf(format, args...), last)
}

func (c *churnClient) ready() bool {
	for _, api := range c.apis {
		resp, err := c.http.Get(api + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

// do makes one request and decodes a want answer into out; any other
// answer or a failed connection is an error to try again.
func (c *churnClient) do(method, url, secretKey string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if secretKey != "" {
		req.Header.Set("X-Checkout-Secret-Key", secretKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(out)
}

func (c *churnClient) registerMerchant(e *procEnv, api string) (merchant, error) {
	m := merchant{SettlementAddress: common.BytesToAddress(randomBytes(20)).Hex()}
	body := map[string]any{
		"name": "Churn Shop", "email": "churn@example.com", "webhook_url": e.Receiver.URL(),
		"settlement_address": m.SettlementAddress, "settlement_chain": "base",
	}
	var out struct {
		Merchant struct {
			ID string `json:"id"`
		} `json:"merchant"`
		Keys struct {
			TestSecretKey     string `json:"test_secret_key"`
			TestWebhookSecret string `json:"test_webhook_secret"`
		} `json:"keys"`
	}
	if err := c.do(http.MethodPost, api+"/checkout/merchants/register", "", body, http.StatusCreated, &out); err != nil {
		return merchant{}, err
	}
	m.ID, m.TestSecretKey, m.WebhookSecret = out.Merchant.ID, out.Keys.TestSecretKey, out.Keys.TestWebhookSecret
	e.Receiver.SetSecret(m.WebhookSecret)
	return m, nil
}

func (c *churnClient) createSession(api string, m merchant, amount string) (string, error) {
	var out struct {
		Session struct {
			ExternalID string `json:"external_id"`
		} `json:"session"`
	}
	err := c.do(http.MethodPost, api+"/checkout/sessions", m.TestSecretKey,
		map[string]any{"amount": json.Number(amount), "currency": "USD"}, http.StatusCreated, &out)
	return out.Session.ExternalID, err
}

func (c *churnClient) selectBase(api, id string) (deposit, error) {
	var d deposit
	err := c.do(http.MethodPost, api+"/checkout/pay/"+id+"/select", "", map[string]any{"chain": "base", "token": "USDC"}, http.StatusOK, &d)
	if err == nil && d.Chain != "base" {
		err = fmt.Errorf("select answered chain %q", d.Chain)
	}
	return d, err
}

func (c *churnClient) webhookLog(m merchant) ([]webhookLogEvent, error) {
	var out struct {
		Data []webhookLogEvent `json:"data"`
	}
	var err error
	for _, api := range c.apis {
		if err = c.do(http.MethodGet, api+"/checkout/webhooks/events?limit=100", m.TestSecretKey, nil, http.StatusOK, &out); err == nil {
			return out.Data, nil
		}
	}
	return nil, err
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

// flakyRPC is a chain RPC behind a bad network: of every hundred calls
// five are answered 500, five dropped without an answer, twenty delayed
// by up to 1.5 s; the rest pass as they are.
type flakyRPC struct {
	*httptest.Server
	failed, dropped, delayed, passed atomic.Int64
}

func newFlakyRPC(t *testing.T, target string) *flakyRPC {
	u, err := url.Parse(target)
	require.NoError(t, err)
	f := &flakyRPC{}
	rp := httputil.NewSingleHostReverseProxy(u)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := rand.IntN(100); {
		case n < 5:
			f.failed.Add(1)
			http.Error(w, "upstream failed", http.StatusInternalServerError)
			return
		case n < 10:
			f.dropped.Add(1)
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		case n < 30:
			f.delayed.Add(1)
			time.Sleep(time.Duration(rand.Int64N(int64(1500 * time.Millisecond))))
		default:
			f.passed.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *flakyRPC) counts() string {
	return fmt.Sprintf("failed %d, dropped %d, delayed %d, passed %d", f.failed.Load(), f.dropped.Load(), f.delayed.Load(), f.passed.Load())
}

// churnProgress says which events of each session reached the receiver
// and where each settlement batch stands.
func churnProgress(e *procEnv, ids []string) string {
	var b bytes.Buffer
	for _, id := range ids {
		fmt.Fprintf(&b, "\n  %s:", id)
		for _, w := range e.Receiver.Acked(id) {
			fmt.Fprintf(&b, " %s", w.Event)
		}
	}
	b.WriteString(churnTimeline(e))
	return b.String()
}

// churnTimeline is where each payment and settlement batch stands, with
// the time each step took place (seconds after the first payment was
// detected), to show which step a slow run waited on.
func churnTimeline(e *procEnv) string {
	var b bytes.Buffer
	db, err := sql.Open("postgres", e.dbURL)
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	rows, err := db.Query(`WITH t0 AS (SELECT min(created_at) AS t FROM payments)
		SELECT external_id, status, coalesce(settlement_status, ''), coalesce(settlement_error, ''),
			extract(epoch FROM confirmed_at - t0.t)::float8, extract(epoch FROM swept_at - t0.t)::float8,
			extract(epoch FROM settled_at - t0.t)::float8
		FROM payments, t0 ORDER BY created_at`)
	if err != nil {
		return "\n  payments: " + err.Error()
	}
	defer rows.Close()
	for rows.Next() {
		var id, status, settlement, why string
		var confirmed, swept, settled sql.NullFloat64
		if rows.Scan(&id, &status, &settlement, &why, &confirmed, &swept, &settled) == nil {
			fmt.Fprintf(&b, "\n  payment %s: %s (%s), swept %s, settlement %s (%s) %s", id, status, seconds(confirmed), seconds(swept), settlement, seconds(settled), why)
		}
	}
	batches, err := db.Query(`SELECT seq, status, coalesce(error, ''),
			extract(epoch FROM created_at - (SELECT min(created_at) FROM payments))::float8,
			extract(epoch FROM completed_at - (SELECT min(created_at) FROM payments))::float8
		FROM settlement_batches ORDER BY seq`)
	if err != nil {
		return b.String() + "\n  batches: " + err.Error()
	}
	defer batches.Close()
	for batches.Next() {
		var seq int64
		var status, why string
		var created, updated sql.NullFloat64
		if batches.Scan(&seq, &status, &why, &created, &updated) == nil {
			fmt.Fprintf(&b, "\n  batch %d: created %s, %s (%s) %s", seq, seconds(created), status, seconds(updated), why)
		}
	}
	return b.String()
}

func seconds(f sql.NullFloat64) string {
	if !f.Valid {
		return "-"
	}
	return fmt.Sprintf("%.1fs", f.Float64)
}

// lazy formats as what its function answers when formatted.
type lazy func() string

func (l lazy) String() string { return l() }

func (f *flakyRPC) String() string { return f.counts() }
