package main

// A harness for tests that run the service as production does: `agentpay
// migrate`, `agentpay serve` and `agentpay worker` as separate OS processes
// of the real binary on one PostgreSQL database, with local chains (devnets)
// running in the test process and reached over their JSON-RPC, as a public
// network would be. Everything a process needs comes through the documented
// environment (docs/operations.md, Configuration).

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/internal/store"
	"agentpay/internal/testdb/freshdb"
	"agentpay/internal/testenv"
	"agentpay/webhook"
)

// procTestConfirmations is what a base deposit needs in the process tests:
// small, so a payment confirms a few blocks after it is seen, but more than
// one, so there is a window between seen and confirmed.
const procTestConfirmations = 3

// binDir holds the agentpay binary built for this test run (see TestMain).
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// agentpayBinary builds the agentpay binary once per test run, as the
// Dockerfile does (CGO_ENABLED=0), and returns its path.
func agentpayBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentpay-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		path := filepath.Join(dir, "agentpay")
		cmd := exec.Command("go", "build", "-o", path, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		buildPath = path
	})
	if buildErr != nil {
		t.Fatalf("building agentpay: %v", buildErr)
	}
	return buildPath
}

// requirePostgres skips a process test on SQLite: separate serve and worker
// processes share one database only on PostgreSQL.
func requirePostgres(t testing.TB) {
	t.Helper()
	if !freshdb.IsPostgres() {
		t.Skip("separate serve and worker processes need PostgreSQL: set TEST_DATABASE_URL=postgres://... to run this test")
	}
}

// procEnv is one deployment under test: a fresh PostgreSQL database, a base
// devnet, the environment shared by its processes, and a webhook receiver.
type procEnv struct {
	t     testing.TB
	bin   string
	env   []string
	base  *devnet.EVM
	dbURL string
	// Receiver is the merchant's webhook endpoint (loopback: test mode).
	Receiver *webhookReceiver

	mineMu   sync.Mutex
	mineStop chan struct{}
	mineDone chan struct{}
}

// newProcEnv builds the binary, creates the database and the devnet, and runs
// `agentpay migrate`. It starts no serve or worker: see serve and worker.
func newProcEnv(t testing.TB) *procEnv {
	t.Helper()
	requirePostgres(t)
	return newProcEnvAnyDB(t)
}

// newProcEnvAnyDB is newProcEnv on either engine: on SQLite its
// processes share one database file. That holds for what a test of it
// asks of several processes (the exactly-once tests: two serve and a
// worker): every connection opens the file in WAL mode, so readers in
// any process run beside the one writer, and every transaction is BEGIN
// IMMEDIATE (internal/store), which takes the file's write lock up front,
// so writers in different processes serialise on it (busy_timeout waits
// for the lock) as they do within one; row locks (FOR UPDATE) are no-ops
// on SQLite because the write lock already covers the whole file. What
// SQLite lacks across processes is what PostgreSQL carries for the
// deployment's other guarantees (LISTEN/NOTIFY to other processes'
// status caches, workers' liveness locks): tests of those stay on
// newProcEnv.
func newProcEnvAnyDB(t testing.TB) *procEnv {
	t.Helper()
	dbURL := freshdb.URL(t)
	if !freshdb.IsPostgres() {
		dbURL = "file:" + dbURL
	}
	e := &procEnv{t: t, bin: agentpayBinary(t), dbURL: dbURL, Receiver: newWebhookReceiver(t)}

	// Blocks only when the test mines them (BlockTime 0): the test decides
	// when a payment gains confirmations. The treasury pays gas
	// (settlement, relayed sends) as on a live network.
	env := testenv.New(t, testenv.Options{NoDB: true, Chains: []chains.Name{chains.Base}})
	e.base = env.EVM(chains.Base)
	t.Cleanup(e.StopMining) // runs before the devnet closes

	e.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"DATA_DIR=" + t.TempDir(),
		"DATABASE_URL=" + e.dbURL,
		"MASTER_KEY=" + hex.EncodeToString(env.MasterKey),
		"HTTP_ADDR=127.0.0.1:0",
		"LOG_LEVEL=info",
		// A failed try is retried soon (the tests' receivers are healthy,
		// but a try cut off by a killed worker is retried).
		"WEBHOOK_RETRY_DELAYS=1s,1s,1s,1s,1s",
		// The receiver is on loopback; serve and worker refuse that unless
		// told.
		"WEBHOOK_ALLOW_PRIVATE=true",
		"IP_RATE_LIMIT=0",
		"REGISTER_RATE_LIMIT=0",
		"PROBE_RATE_LIMIT=0", // Serve polls /readyz every 25 ms
		// Agents' wallets on the test networks (the devnet): no live
		// chain is configured at all.
		"AGENT_NETWORK=test",
		"CHAIN_BASE_TEST_RPC_URL=" + e.base.RPCURL,
		"CHAIN_BASE_TEST_USDC=" + e.base.USDC.Hex(),
		fmt.Sprintf("CHAIN_BASE_TEST_CONFIRMATIONS=%d", procTestConfirmations),
	}

	m := e.start("migrate", "migrate")
	select {
	case <-m.done:
		require.NoError(t, m.err, "agentpay migrate failed:\n%s", m.output())
	case <-time.After(2 * time.Minute):
		t.Fatalf("agentpay migrate did not finish:\n%s", m.output())
	}
	t.Cleanup(e.logJobsOnFailure) // before the database is dropped
	return e
}

// logJobsOnFailure logs the River jobs of a failed test: what the workers
// did, are doing and were stuck on.
func (e *procEnv) logJobsOnFailure() {
	if !e.t.Failed() || !freshdb.IsPostgres() {
		return
	}
	db, err := sql.Open("postgres", e.dbURL)
	if err != nil {
		return
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT id, kind, state, attempt, coalesce(array_to_string(attempted_by, ','), ''),
		coalesce(array_to_string(errors, ' | '), ''), args::text FROM river_job ORDER BY id`)
	if err != nil {
		e.t.Logf("reading river_job: %v", err)
		return
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id int64
		var attempt int
		var kind, state, by, errs, args string
		if err := rows.Scan(&id, &kind, &state, &attempt, &by, &errs, &args); err != nil {
			e.t.Logf("reading river_job: %v", err)
			return
		}
		fmt.Fprintf(&b, "  %d %s %s attempt=%d by=%s args=%s errors=%s\n", id, kind, state, attempt, by, args, errs)
	}
	e.t.Logf("river jobs:\n%s", b.String())
}

// proc is one running agentpay process.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed when the process has exited
	err  error         // its exit error, set before done closes
}

// start runs `agentpay args...` with the shared environment. Its output is
// kept and logged if the test fails; it is killed when the test ends.
func (e *procEnv) start(name string, args ...string) *proc {
	e.t.Helper()
	return e.startWith(name, nil, args...)
}

// startWith is start with extra environment (NAME=value) for this process
// alone.
func (e *procEnv) startWith(name string, extraEnv []string, args ...string) *proc {
	e.t.Helper()
	p := &proc{name: name, out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(e.bin, args...)
	p.cmd.Env = append(append([]string(nil), e.env...), extraEnv...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(e.t, p.cmd.Start(), "starting agentpay %s", name)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	e.t.Cleanup(func() {
		if e.t.Failed() {
			p.dumpStacks()
		}
		p.kill()
		if e.t.Failed() {
			e.t.Logf("---- output of agentpay %s (pid %d) ----\n%s", p.name, p.cmd.Process.Pid, p.output())
		}
	})
	return p
}

// kill sends SIGKILL (no graceful shutdown: what a crash or an OOM kill
// does) and waits until the process is gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// dumpStacks makes a running process print its goroutines (Go's SIGQUIT
// handler) before it is killed, so a failed test shows where it was stuck.
func (p *proc) dumpStacks() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}

func (p *proc) output() string { return p.out.String() }

// Serve starts `agentpay serve` and waits until /readyz answers 200. It
// returns the API's base URL.
func (e *procEnv) Serve(name string) (*proc, string) {
	e.t.Helper()
	return e.ServeWith(name)
}

// ServeWith is Serve with extra environment (NAME=value) for this process.
func (e *procEnv) ServeWith(name string, extraEnv ...string) (*proc, string) {
	e.t.Helper()
	p := e.startWith(name, extraEnv, "serve")
	addrRE := regexp.MustCompile(`msg=serving addr=(http://\S+)`)
	var base string
	waitFor(e.t, 60*time.Second, func() bool {
		if p.exited() {
			e.t.Fatalf("agentpay %s exited: %v\n%s", name, p.err, p.output())
		}
		if m := addrRE.FindStringSubmatch(p.output()); m != nil {
			base = m[1]
			return true
		}
		return false
	}, "agentpay %s prints its address", name)
	waitFor(e.t, 60*time.Second, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "agentpay %s /readyz", name)
	return p, base
}

// Worker starts `agentpay worker`. There is nothing to wait for: the tests
// wait for what it does (see WaitFirstScan).
func (e *procEnv) Worker(name string) *proc {
	e.t.Helper()
	return e.start(name, "worker")
}

// WaitFirstScan waits until a worker has scanned base in test mode once (its
// cursor is saved), so the worker is up and scanning before a test goes on.
func (e *procEnv) WaitFirstScan() {
	e.t.Helper()
	db, err := store.OpenDB(context.Background(), store.DBConfig{URL: e.dbURL})
	require.NoError(e.t, err)
	defer db.Close()
	waitFor(e.t, processTestTimeout, func() bool {
		var n int
		err := db.SQL.QueryRow(`SELECT count(*) FROM chain_cursors WHERE chain = 'base' AND mode = 'test'`).Scan(&n)
		require.NoError(e.t, err)
		return n > 0
	}, "the worker's first scan of base")
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pay sends amount base units of USDC from the devnet payer to address with
// a plain token transfer, as a customer's wallet would, and returns the
// transaction hash once included (the transfer seals its own block).
func (e *procEnv) Pay(address string, amount *big.Int) common.Hash {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hash, err := e.base.Send(ctx, common.HexToAddress(address), amount)
	require.NoError(e.t, err)
	return hash
}

// Mine seals n empty blocks now.
func (e *procEnv) Mine(n int) {
	for range n {
		e.base.Commit()
	}
}

// KeepMining seals a block every interval until StopMining.
func (e *procEnv) KeepMining(interval time.Duration) {
	e.mineMu.Lock()
	defer e.mineMu.Unlock()
	if e.mineStop != nil {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	e.mineStop, e.mineDone = stop, done
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				e.base.Commit()
			}
		}
	}()
}

// StopMining stops KeepMining and waits until no block is being sealed.
func (e *procEnv) StopMining() {
	e.mineMu.Lock()
	defer e.mineMu.Unlock()
	if e.mineStop == nil {
		return
	}
	close(e.mineStop)
	<-e.mineDone
	e.mineStop, e.mineDone = nil, nil
}

// waitFor polls cond every 25 ms until it holds, failing the test at the
// deadline. It never asserts on elapsed time, only on the condition.
func waitFor(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", timeout, fmt.Sprintf(format, args...))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// lockedBuffer is a process's output, written by exec's copier goroutines
// and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ---- the merchant's side ----

// merchant is a registered merchant as the REST API answered it.
type merchant struct {
	ID            string
	TestSecretKey string
	// WebhookSecret is test mode's, which signs the deliveries of its
	// (test-mode) sessions.
	WebhookSecret string
	// SettlementAddress is a fresh base address the merchant settles to.
	SettlementAddress string
}

// RegisterMerchant registers a merchant through REST on api with the
// receiver as its webhook URL (loopback: allowed in test mode).
func (e *procEnv) RegisterMerchant(api string) merchant {
	e.t.Helper()
	payee, err := crypto.GenerateKey()
	require.NoError(e.t, err)
	settleTo := crypto.PubkeyToAddress(payee.PublicKey).Hex()
	body := map[string]any{
		"name": "Process Shop", "email": "shop@example.com",
		"webhook_url":        e.Receiver.URL(),
		"settlement_address": settleTo, "settlement_chain": "base",
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
	e.call(http.MethodPost, api+"/checkout/merchants/register", "", body, http.StatusCreated, &out)
	require.NotEmpty(e.t, out.Keys.TestWebhookSecret)
	m := merchant{ID: out.Merchant.ID, TestSecretKey: out.Keys.TestSecretKey, WebhookSecret: out.Keys.TestWebhookSecret,
		SettlementAddress: settleTo}
	e.Receiver.SetSecret(m.WebhookSecret)
	return m
}

// CreateSession creates a test-mode session of amount USD with metadata.
func (e *procEnv) CreateSession(api string, m merchant, amount string, metadata map[string]any) string {
	e.t.Helper()
	body := map[string]any{"amount": json.Number(amount), "currency": "USD", "metadata": metadata}
	var out struct {
		Session struct {
			ExternalID string `json:"external_id"`
			Livemode   bool   `json:"livemode"`
		} `json:"session"`
	}
	e.call(http.MethodPost, api+"/checkout/sessions", m.TestSecretKey, body, http.StatusCreated, &out)
	require.False(e.t, out.Session.Livemode)
	return out.Session.ExternalID
}

// deposit is the answer of select: where and how much to pay.
type deposit struct {
	Address         string      `json:"address"`
	Chain           string      `json:"chain"`
	AmountBaseUnits json.Number `json:"amount_base_units"`
}

// Select picks USDC on base for the session, as the hosted page does.
func (e *procEnv) Select(api, externalID string) deposit {
	e.t.Helper()
	var d deposit
	e.call(http.MethodPost, api+"/checkout/pay/"+externalID+"/select", "",
		map[string]any{"chain": "base", "token": "USDC"}, http.StatusOK, &d)
	require.Equal(e.t, "base", d.Chain)
	return d
}

// Status is the checkout page's status read.
func (e *procEnv) Status(api, externalID string) string {
	e.t.Helper()
	var out struct {
		Status string `json:"status"`
	}
	e.call(http.MethodGet, api+"/checkout/pay/"+externalID+"/status", "", nil, http.StatusOK, &out)
	return out.Status
}

// webhookLogEvent is one event of the merchant's webhook log.
type webhookLogEvent struct {
	ID                string `json:"id"`
	Event             string `json:"event"`
	SessionExternalID string `json:"session_external_id"`
	Deliveries        []struct {
		Status string `json:"status"`
	} `json:"deliveries"`
}

// WebhookLog lists the merchant's test-mode events, newest first.
func (e *procEnv) WebhookLog(api string, m merchant) []webhookLogEvent {
	e.t.Helper()
	var out struct {
		Data []webhookLogEvent `json:"data"`
	}
	e.call(http.MethodGet, api+"/checkout/webhooks/events?limit=100", m.TestSecretKey, nil, http.StatusOK, &out)
	return out.Data
}

// call makes one REST request and decodes the answer, requiring status.
func (e *procEnv) call(method, url, secretKey string, body any, status int, out any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(e.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	if secretKey != "" {
		req.Header.Set("X-Checkout-Secret-Key", secretKey)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	require.Equal(e.t, status, resp.StatusCode, "%s %s: %s", method, url, raw)
	if out != nil {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		require.NoError(e.t, d.Decode(out), "%s", raw)
	}
}

// ---- the webhook receiver ----

// receivedWebhook is one delivery as the receiver saw it.
type receivedWebhook = testenv.Request

// webhookReceiver is a healthy merchant endpoint on loopback (the bundle's
// receiver, answering 200 at once) that also checks signatures with the
// merchant's webhook secret.
type webhookReceiver struct {
	*testenv.Receiver

	mu     sync.Mutex
	secret string
}

func newWebhookReceiver(t testing.TB) *webhookReceiver {
	return &webhookReceiver{Receiver: testenv.NewReceiver(t, http.StatusOK)}
}

// URL is the merchant's webhook URL.
func (r *webhookReceiver) URL() string { return r.Receiver.URL + "/hooks" }

func (r *webhookReceiver) SetSecret(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = s
}

// Acked returns the acknowledged deliveries of the session's events.
func (r *webhookReceiver) Acked(sessionExternalID string) []receivedWebhook {
	var out []receivedWebhook
	for _, w := range r.Requests() {
		if w.Acked && webhookSession(w) == sessionExternalID {
			out = append(out, w)
		}
	}
	return out
}

// HasAcked reports whether an event of kind for the session was acknowledged.
func (r *webhookReceiver) HasAcked(sessionExternalID, kind string) bool {
	for _, w := range r.Acked(sessionExternalID) {
		if w.Event == kind {
			return true
		}
	}
	return false
}

// ValidSignature checks both signatures of a delivery, as a receiver does,
// with the webhook secret the merchant got at registration. The timestamp
// may be up to an hour old: tests look at deliveries after the fact.
func (r *webhookReceiver) ValidSignature(w receivedWebhook) bool {
	r.mu.Lock()
	secret := r.secret
	r.mu.Unlock()
	return secret != "" && webhook.Verify(secret, w.Body, w.Header.Get("X-Checkout-Signature")) == nil &&
		webhook.VerifyStandard(secret, w.Header, w.Body, time.Hour, time.Now()) == nil
}

func webhookSession(w receivedWebhook) string {
	var env struct {
		Data struct {
			SessionExternalID string `json:"session_external_id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(w.Body, &env)
	return env.Data.SessionExternalID
}
