package main

import (
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// jsonLogValue finds the first JSON log line of out whose msg is msg and
// answers its field, "" when there is none yet.
func jsonLogValue(out, msg, field string) string {
	for line := range strings.Lines(out) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		v, _ := rec[field].(string)
		return v
	}
	return ""
}

// TestProcessMetricsAndJSONLogs runs the production shape (PostgreSQL, serve
// and worker apart): a serve without METRICS_ADDR serves no metrics; a serve
// and a worker with it (and LOG_FORMAT=json) export, after a payment,
// what each of them does: the API's requests by route, the worker's jobs,
// queues, scans and payments. Their log lines are JSON; a request's carries
// its request_id, a job's its job_id.
func TestProcessMetricsAndJSONLogs(t *testing.T) {
	e := newProcEnv(t)
	plain, _ := e.Serve("serve-without-metrics")

	shared := e.env
	e.env = append(append([]string(nil), shared...), "METRICS_ADDR=127.0.0.1:0", "LOG_FORMAT=json")
	serve := e.start("serve", "serve")
	worker := e.start("worker", "worker")
	e.env = shared
	var api, serveMetrics, workerMetrics string
	waitFor(t, 60*time.Second, func() bool {
		require.False(t, serve.exited(), "serve exited: %v\n%s", serve.err, serve.output())
		require.False(t, worker.exited(), "worker exited: %v\n%s", worker.err, worker.output())
		api = jsonLogValue(serve.output(), "serving", "addr")
		serveMetrics = jsonLogValue(serve.output(), "metrics", "addr")
		workerMetrics = jsonLogValue(worker.output(), "metrics", "addr")
		return api != "" && serveMetrics != "" && workerMetrics != ""
	}, "serve and worker print their addresses as JSON")
	e.WaitFirstScan()

	m := e.RegisterMerchant(api)
	id := e.CreateSession(api, m, "5", nil)
	d := e.Select(api, id)
	amount, ok := new(big.Int).SetString(d.AmountBaseUnits.String(), 10)
	require.True(t, ok)
	e.Pay(d.Address, amount)
	e.KeepMining(200 * time.Millisecond)
	waitFor(t, processTestTimeout, func() bool { return e.Status(api, id) == "confirmed" }, "the session confirms")
	resp, err := http.Get(api + "/no-such-route") // a 404: logged at info
	require.NoError(t, err)
	_ = resp.Body.Close()

	_, samples := scrape(t, serveMetrics)
	requirePositive(t, samples, "agentpay_http_requests_total", map[string]string{"route": "/checkout/sessions", "method": "POST", "status": "201"})
	requirePositive(t, samples, "agentpay_http_requests_total", map[string]string{"route": "/checkout/pay/{external_id}/status", "method": "GET", "status": "200"})
	requirePositive(t, samples, "agentpay_http_requests_total", map[string]string{"route": "unmatched", "method": "GET", "status": "404"})
	_, found := sum(samples, "agentpay_jobs_total", nil)
	require.False(t, found, "serve works no jobs")

	waitFor(t, processTestTimeout, func() bool {
		_, samples = scrape(t, workerMetrics)
		v, _ := sum(samples, "agentpay_payments_total", map[string]string{"chain": "base", "mode": "test", "status": "confirmed"})
		_, sampled := sum(samples, "agentpay_queue_jobs", map[string]string{"queue": "chains"})
		return v == 1 && sampled
	}, "the worker counts the confirmed payment and samples its queues")
	requirePositive(t, samples, "agentpay_jobs_total", map[string]string{"kind": "scan_chain", "state": "completed"})
	requirePositive(t, samples, "agentpay_job_latency_seconds_count", map[string]string{"kind": "scan_chain"})
	requirePositive(t, samples, "agentpay_deposits_seen_total", map[string]string{"chain": "base", "mode": "test"})
	requirePositive(t, samples, "agentpay_scan_last_success_timestamp_seconds", map[string]string{"chain": "base", "mode": "test"})
	_, found = sum(samples, "agentpay_scan_lag_blocks", map[string]string{"chain": "base", "mode": "test"})
	require.True(t, found)
	_, found = sum(samples, "agentpay_http_requests_total", nil)
	require.False(t, found, "a worker serves no API")

	require.NotContains(t, plain.output(), "msg=metrics", "METRICS_ADDR is off by default under serve")

	var requests, jobLines int
	for name, p := range map[string]*proc{"serve": serve, "worker": worker} {
		for line := range strings.Lines(p.output()) {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), "%s logged a line that is not JSON: %s", name, line)
			if rec["msg"] == "request" {
				require.NotEmpty(t, rec["request_id"], line)
				requests++
			}
			if rec["msg"] == "payment recorded" {
				require.NotEmpty(t, rec["job_id"], line)
				require.Equal(t, "scan_chain", rec["job_kind"], line)
				jobLines++
			}
		}
	}
	require.Positive(t, requests, "the 404's request line")
	require.Equal(t, 1, jobLines, "the payment recorded by the scan job")
}
