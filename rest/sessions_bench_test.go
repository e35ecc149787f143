package rest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"agentpay"
	"agentpay/internal/testdb"
)

// pgbenchPath is the pgbench the creates benchmark compares against.
const pgbenchPath = "/usr/bin/pgbench"

// BenchmarkCreateSession: POST /checkout/sessions on PostgreSQL, 16
// concurrent clients over real HTTP (each request authenticated with a
// merchant's secret key and carrying its own idempotency key), with the
// open-sessions cap on at its default (MAX_OPEN_SESSIONS 1,000: each create
// counts the merchant's open sessions under its lock; a merchant takes
// sessionsPerMerchant creates, so the count reads up to that many), against
// pgbench inserting one row per transaction into a table like
// checkout_sessions (same columns, types, defaults and indexes) on the same
// database, 16 clients, -j 2, in the same run: rounds of createRound inserts
// by the API, each followed by pgbench for as long (-T, whole seconds, at
// least 2).
// Reports both rates (pgbench's from its own tps, without connection time)
// and the API's share of pgbench's.
//
//	TEST_DATABASE_URL=postgres://... go test ./rest -run '^$' -bench BenchmarkCreateSession -benchtime 3000x
func BenchmarkCreateSession(b *testing.B) {
	if !testdb.IsPostgres() {
		b.Skip("PostgreSQL only: set TEST_DATABASE_URL")
	}
	if _, err := os.Stat(pgbenchPath); err != nil {
		b.Skipf("%s is not installed (Debian package postgresql-client): %v", pgbenchPath, err)
	}
	ctx := context.Background()
	// The IP limits off: the benchmark is one client IP.
	inst := newTestAPI(b, testAPIConfig{Config: agentpay.Config{MaxOpenSessions: 1000}})
	svc, srv, db := inst.Svc, inst.Server, inst.DB
	var (
		secrets []string
		reg     *agentpay.MerchantRegistration
	)
	for range (b.N + sessionsPerMerchant - 1) / sessionsPerMerchant {
		name, email := "Shop", "shop@example.com"
		var err error
		reg, err = svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
		if err != nil {
			b.Fatal(err)
		}
		secrets = append(secrets, reg.Keys.TestSecretKey)
	}

	// pgbench's table: checkout_sessions' columns with their types,
	// defaults and indexes (the unique idempotency index included).
	if _, err := db.SQL.ExecContext(ctx, `CREATE TABLE bench_checkout_sessions (LIKE checkout_sessions INCLUDING ALL)`); err != nil {
		b.Fatal(err)
	}
	script := filepath.Join(b.TempDir(), "insert.sql")
	if err := os.WriteFile(script, []byte(pgbenchInsertScript(reg.Merchant.ID.String())), 0o600); err != nil {
		b.Fatal(err)
	}

	run := time.Now().UnixNano()
	newRequest := func(i int) *http.Request {
		body := fmt.Sprintf(`{"amount":25.5,"currency":"USD","description":"Order %d","metadata":{"order_id":"%d"},"idempotency_key":"bench-%d-%d"}`, i, i, run, i)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/checkout/sessions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Checkout-Secret-Key", secrets[i/sessionsPerMerchant])
		return req
	}
	// Interleaved rounds of the same number of inserts each, so a machine
	// whose load changes during the run affects both sides alike.
	client := benchHTTPClient()
	defer client.CloseIdleConnections()
	latencies := make([]time.Duration, b.N)
	var (
		apiTime, pgTime time.Duration
		pgInserts       float64
	)
	b.ResetTimer()
	for lo := 0; lo < b.N; lo += createRound {
		hi := min(lo+createRound, b.N)
		took := runLoadRange(b, client, latencies, lo, hi, http.StatusCreated, newRequest)
		apiTime += took
		b.StopTimer()
		// At least 2 s: under load pgbench's 16 connections can take most
		// of a second, and -T counts them.
		seconds := max(2, int(took.Seconds()+0.5))
		n, tps, err := runPgbench(ctx, db.URL, script, seconds)
		if err != nil {
			b.Fatal(err)
		}
		// The time pgbench spent on its transactions, connections excluded.
		pgInserts += float64(n)
		pgTime += time.Duration(float64(n) / tps * float64(time.Second))
		b.StartTimer()
	}
	b.StopTimer()
	api := summarize(apiTime, latencies)
	pgRate := pgInserts / pgTime.Seconds()
	b.ReportMetric(api.perSecond(b.N), "creates/s")
	b.ReportMetric(float64(api.p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(pgRate, "pgbench-tps")
	b.ReportMetric(100*api.perSecond(b.N)/pgRate, "%-of-pgbench")
}

// sessionsPerMerchant is how many sessions the creates benchmark gives one
// merchant: below the default cap, which it would otherwise reach.
const sessionsPerMerchant = 900

// createRound is how many sessions the API creates per round: a few
// seconds of work, so pgbench's whole-second rounds match it closely.
const createRound = 2000

// pgbenchInsertScript inserts one session-like row per transaction, with
// the values a create writes.
func pgbenchInsertScript(merchantID string) string {
	return `\set n random(1, 2000000000)
INSERT INTO bench_checkout_sessions (id, created_at, updated_at, external_id, livemode, amount_usd, currency,
  description, success_url, cancel_url, metadata, idempotency_key, status, expires_at, merchant_id)
VALUES (gen_random_uuid(), now(), now(), 'cs_test_' || md5(random()::text), false, 25.5, 'USD',
  'Order ' || :n, NULL, NULL, jsonb_build_object('order_id', :n::text), md5(random()::text), 'pending',
  now() + interval '30 minutes', '` + merchantID + `');
`
}

var (
	pgbenchTPS       = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
)

// runPgbench runs script with 16 clients and 2 threads for seconds against
// the database at url and returns how many transactions it ran and its
// transactions per second without the connection time.
func runPgbench(ctx context.Context, url, script string, seconds int) (int, float64, error) {
	cmd := exec.CommandContext(ctx, pgbenchPath, "-n", "-f", script, "-c", strconv.Itoa(benchClients), "-j", "2",
		"-T", strconv.Itoa(seconds), url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	tps, processed := pgbenchTPS.FindSubmatch(out), pgbenchProcessed.FindSubmatch(out)
	if tps == nil || processed == nil {
		return 0, 0, fmt.Errorf("pgbench printed no tps:\n%s", out)
	}
	n, err := strconv.Atoi(string(processed[1]))
	if err != nil {
		return 0, 0, err
	}
	rate, err := strconv.ParseFloat(string(tps[1]), 64)
	if err != nil || n == 0 || rate <= 0 {
		return 0, 0, fmt.Errorf("pgbench ran no transaction (%v):\n%s", err, out)
	}
	return n, rate, nil
}
