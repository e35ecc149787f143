package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/deploy"
)

// sample is one line of Prometheus's text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrape reads url's /metrics.
func scrape(t *testing.T, url string) (string, []sample) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out []sample
	for line := range strings.Lines(string(raw)) {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err, line)
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[p[1]] = p[2]
		}
		out = append(out, s)
	}
	return string(raw), out
}

// sum adds the samples of name whose labels include want; found is
// whether any matched.
func sum(samples []sample, name string, want map[string]string) (total float64, found bool) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.value
			found = true
		}
	}
	return total, found
}

func requirePositive(t *testing.T, samples []sample, name string, labels map[string]string) float64 {
	t.Helper()
	v, found := sum(samples, name, labels)
	require.True(t, found, "%s%v is exported", name, labels)
	require.Positive(t, v, "%s%v", name, labels)
	return v
}

var metricsURLRE = regexp.MustCompile(`metrics:\s+(http://\S+/metrics)`)

// requireCheckoutMetrics checks the /metrics of the `agentpay dev` whose
// banner is in logs after one test-mode payment per chain (paidOn: chain
// -> amount USD), each confirmed, delivered and settled: the series every
// part of the flow reports, and every metric the Grafana dashboard and the
// alert rules name. The answer goes to leaks, searched for secrets with
// the others.
func requireCheckoutMetrics(t *testing.T, logs string, paidOn map[string]string, leaks *leakWatch) {
	m := metricsURLRE.FindStringSubmatch(logs)
	require.NotNil(t, m, "the dev banner names the metrics address")
	raw, samples := scrape(t, m[1])
	leaks.mu.Lock()
	leaks.answers = append(leaks.answers, recordedAnswer{method: http.MethodGet, path: "/metrics", status: http.StatusOK, body: []byte(raw)})
	leaks.mu.Unlock()

	// HTTP by route pattern, never by raw path.
	requirePositive(t, samples, "agentpay_http_requests_total", map[string]string{"route": "/checkout/sessions", "method": "POST", "status": "201"})
	requirePositive(t, samples, "agentpay_http_requests_total", map[string]string{"route": "/checkout/pay/{external_id}/select", "method": "POST", "status": "200"})
	requirePositive(t, samples, "agentpay_http_request_duration_seconds_count", map[string]string{"route": "/checkout/sessions"})
	for _, s := range samples {
		if r, ok := s.labels["route"]; ok {
			require.NotContains(t, r, "cs_", "a route label holds a pattern, not an id: %v", s.labels)
		}
	}
	// River jobs by kind and state, their latency, the queues' depth.
	for _, kind := range []string{"scan_chain", "deliver_webhook", "settle_payment"} {
		requirePositive(t, samples, "agentpay_jobs_total", map[string]string{"kind": kind, "state": "completed"})
		requirePositive(t, samples, "agentpay_job_latency_seconds_count", map[string]string{"kind": kind})
		requirePositive(t, samples, "agentpay_job_duration_seconds_count", map[string]string{"kind": kind})
	}
	_, found := sum(samples, "agentpay_queue_jobs", map[string]string{"queue": "webhooks", "state": "available"})
	require.True(t, found, "the queues' depth is sampled")

	// A try is counted once it is recorded, which follows the receiver's
	// answer (a batch records its tries in shared statements): the
	// receiver may have every webhook a moment before the count does.
	webhooks := requirePositive(t, samples, "agentpay_webhook_attempts_total", map[string]string{"mode": "test", "result": "succeeded"})
	for deadline := time.Now().Add(15 * time.Second); webhooks < float64(3*len(paidOn)) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		_, samples = scrape(t, m[1])
		webhooks, _ = sum(samples, "agentpay_webhook_attempts_total", map[string]string{"mode": "test", "result": "succeeded"})
	}
	require.GreaterOrEqual(t, webhooks, float64(3*len(paidOn)), "detected, confirmed and settled per payment")
	requirePositive(t, samples, "agentpay_webhook_attempt_duration_seconds_count", map[string]string{"mode": "test", "result": "succeeded"})

	for chain, amount := range paidOn {
		test := map[string]string{"chain": chain, "mode": "test"}
		requirePositive(t, samples, "agentpay_scans_total", map[string]string{"chain": chain, "mode": "test", "result": "ok"})
		requirePositive(t, samples, "agentpay_scan_last_success_timestamp_seconds", test)
		lag, found := sum(samples, "agentpay_scan_lag_blocks", test)
		require.True(t, found, "scan lag of %s", chain)
		require.GreaterOrEqual(t, lag, 0.0)
		_, found = sum(samples, "agentpay_scan_lag_seconds", test)
		require.True(t, found, "scan lag in seconds of %s", chain)
		requirePositive(t, samples, "agentpay_deposits_seen_total", test)
		for _, status := range []string{"detected", "confirmed"} {
			requirePositive(t, samples, "agentpay_payments_total", map[string]string{"chain": chain, "mode": "test", "status": status})
		}
		gross := decimal.RequireFromString(amount)
		net := gross.Sub(gross.Div(decimal.NewFromInt(1000)).Round(6))
		swept := requirePositive(t, samples, "agentpay_sweep_amount_usd_total", test)
		require.InDelta(t, gross.InexactFloat64(), swept, 1e-6, "swept on %s", chain)
		settled := requirePositive(t, samples, "agentpay_settlement_amount_usd_total", map[string]string{"chain": chain, "mode": "test", "type": "crypto_usdc"})
		require.InDelta(t, net.InexactFloat64(), settled, 1e-6, "settled from %s", chain)
		// The sweep on the paid chain; the payouts all go out on base.
		requirePositive(t, samples, "agentpay_gas_spent_total", test)
		refunded, found := sum(samples, "agentpay_refund_amount_usd_total", test)
		require.True(t, found, "the refund series exists before refunds do")
		require.Zero(t, refunded)
	}
	_, found = sum(samples, "agentpay_sends_total", map[string]string{"chain": "base", "status": "completed"})
	require.True(t, found)

	// Every metric the dashboard and the alerts read is there.
	dash, err := deploy.DashboardExprs()
	require.NoError(t, err)
	alerts, err := deploy.AlertExprs()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, s := range samples {
		exported[s.name] = true
	}
	for _, name := range deploy.MetricNames(append(dash, alerts...)) {
		require.True(t, exported[name], "%s (deploy/grafana, deploy/prometheus) is not in /metrics", name)
	}
}

// requireJSONLogIDs checks a LOG_FORMAT=json run's log: every log line is
// a JSON object, each request's line carries its request_id and each
// line a job wrote its job_id and job_kind; there were lines of both.
func requireJSONLogIDs(t *testing.T, logs string) {
	var requests, jobLines int
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue // the dev banner (stdout)
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		require.Contains(t, rec, "time")
		require.Contains(t, rec, "level")
		require.Contains(t, rec, "msg")
		switch {
		case rec["msg"] == "request":
			require.NotEmpty(t, rec["request_id"], line)
			require.NotEmpty(t, rec["route"], line)
			requests++
		case rec["msg"] == "payment recorded" || rec["msg"] == "deposit":
			require.NotEmpty(t, rec["job_id"], "written in the scan job: %s", line)
			require.Equal(t, "scan_chain", rec["job_kind"], line)
			jobLines++
		}
		if _, ok := rec["job_kind"]; ok {
			require.NotEmpty(t, rec["job_id"], line)
		}
	}
	require.NoError(t, sc.Err())
	require.Positive(t, requests, "request lines (LOG_LEVEL=debug)")
	require.Positive(t, jobLines, "lines written in jobs")
}

// TestMetricsAddrByCommand: /metrics is off under serve and worker unless
// METRICS_ADDR says where, on in dev at its default, off anywhere with
// METRICS_ADDR=off; a malformed address stops the start.
func TestMetricsAddrByCommand(t *testing.T) {
	tests := []struct {
		env        map[string]string
		dev, serve string
	}{
		{map[string]string{}, defaultDevMetricsAddr, ""},
		{map[string]string{"METRICS_ADDR": "off"}, "", ""},
		{map[string]string{"METRICS_ADDR": "0.0.0.0:9100"}, "0.0.0.0:9100", "0.0.0.0:9100"},
		{map[string]string{"METRICS_ADDR": ":9100"}, ":9100", ":9100"},
	}
	for _, tt := range tests {
		cfg, err := loadConfig(func(k string) string { return tt.env[k] })
		require.NoError(t, err)
		require.Equal(t, tt.dev, metricsAddr(cfg, true), "dev with %v", tt.env)
		require.Equal(t, tt.serve, metricsAddr(cfg, false), "serve and worker with %v", tt.env)
	}
	for _, bad := range []string{"9100", "localhost", "on"} {
		_, err := loadConfig(func(k string) string { return map[string]string{"METRICS_ADDR": bad}[k] })
		require.ErrorContains(t, err, "METRICS_ADDR", bad)
	}
	_, err := loadConfig(func(k string) string { return map[string]string{"LOG_FORMAT": "xml"}[k] })
	require.ErrorContains(t, err, "LOG_FORMAT")
}
