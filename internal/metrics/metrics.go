// Package metrics defines every Prometheus series the service exports and
// records into them. One Metrics is built per process by cmd/agentpay on a
// registry of its own (never Prometheus's global one), so tests build as
// many independent ones as they like.
//
// The packages that see an event report it through a small interface of
// their own, which Metrics implements: rest's HTTPObserver (the route
// pattern, never the raw path, so a label never holds an id), worker's
// Observer (River jobs, queue depth, scans, webhook attempts) and root's
// agentpay.Observer (payments, sends, settlements, sweeps, refunds, gas).
// So the rules never import Prometheus, and a nil observer costs nothing.
//
// Amounts are counters of USD (1 USDC = 1 USD) and gas of the chain's
// native coin (ETH, POL, SOL): floats, as every Prometheus sample is. They
// are for dashboards and alerts; the exact figures stay in the database.
//
// docs/operations.md lists the series, their labels and the alerts worth
// having; deploy/grafana/agentpay.json draws them.
package metrics

import (
	"math/big"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/shopspring/decimal"
)

// Namespace prefixes every series of the service.
const Namespace = "agentpay"

// Metrics holds the service's series.
type Metrics struct {
	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	jobs        *prometheus.CounterVec
	jobDuration *prometheus.HistogramVec
	jobLatency  *prometheus.HistogramVec
	queueDepth  *prometheus.GaugeVec

	scans          *prometheus.CounterVec
	scanLagBlocks  *prometheus.GaugeVec
	scanLagSeconds *prometheus.GaugeVec
	scanLastOK     *prometheus.GaugeVec
	depositsSeen   *prometheus.CounterVec
	payments       *prometheus.CounterVec

	webhookAttempts *prometheus.CounterVec
	webhookDuration *prometheus.HistogramVec

	sends      *prometheus.CounterVec
	settled    *prometheus.CounterVec
	swept      *prometheus.CounterVec
	refunded   *prometheus.CounterVec
	gasSpent   *prometheus.CounterVec
	clockNow   func() time.Time
	caughtUpMu sync.Mutex
	caughtUp   map[[2]string]time.Time
}

// New creates the series and registers them, with the Go runtime's and the
// process's own collectors, on reg.
func New(reg prometheus.Registerer) *Metrics {
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
		f(c)
		return c
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
		f(g)
		return g
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
		f(h)
		return h
	}
	// Requests and webhook tries: a few ms to the 30 s a send may wait.
	latency := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	// Jobs wait from ms (a poll) to minutes (a backlog).
	wait := []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900}

	m := &Metrics{
		httpRequests: counter("http_requests_total", "HTTP requests answered, by route pattern, method and status code.", "route", "method", "status"),
		httpDuration: histogram("http_request_duration_seconds", "Time to answer an HTTP request, by route pattern and method.", latency, "route", "method"),

		jobs:        counter("jobs_total", "River jobs worked, by kind and outcome (completed, failed, cancelled, snoozed).", "kind", "state"),
		jobDuration: histogram("job_duration_seconds", "Time one River job run took, by kind.", latency, "kind"),
		jobLatency:  histogram("job_latency_seconds", "Time from when a River job was due to when a worker started it, by kind.", wait, "kind"),
		queueDepth:  gauge("queue_jobs", "River jobs not yet finished, by queue and state (available, scheduled, retryable, running), sampled by each worker.", "queue", "state"),

		scans:          counter("scans_total", "Deposit scans of a chain, by chain, mode and result (ok, error).", "chain", "mode", "result"),
		scanLagBlocks:  gauge("scan_lag_blocks", "Blocks (slots on Solana) between the chain's head and the last block the deposit scan has read.", "chain", "mode"),
		scanLagSeconds: gauge("scan_lag_seconds", "Seconds since the deposit scan last reached the chain's head (0 while it is there).", "chain", "mode"),
		scanLastOK:     gauge("scan_last_success_timestamp_seconds", "Unix time of the chain's last successful deposit scan.", "chain", "mode"),
		depositsSeen:   counter("deposits_seen_total", "Deposits to watched addresses first seen on chain, by chain and mode.", "chain", "mode"),
		payments:       counter("payments_total", "Payment status changes, by chain, mode and the status reached (detected, confirming, confirmed, failed).", "chain", "mode", "status"),

		webhookAttempts: counter("webhook_attempts_total", "Webhook delivery tries, by mode and result (succeeded, retrying, failed: the last try failed).", "mode", "result"),
		webhookDuration: histogram("webhook_attempt_duration_seconds", "Time one webhook try took, by mode and result.", latency, "mode", "result"),

		sends:    counter("sends_total", "Custodial sends (agent payments, withdrawals), by chain and status (pending: recorded and about to be broadcast; completed; failed).", "chain", "status"),
		settled:  counter("settlement_amount_usd_total", "USD paid out to merchants by completed settlements (net of the fee), by mode, paid chain and settlement type.", "mode", "chain", "type"),
		swept:    counter("sweep_amount_usd_total", "USD swept from deposit addresses to the treasury by completed settlements, by mode and chain.", "mode", "chain"),
		refunded: counter("refund_amount_usd_total", "USD refunded to payers (counted when a refund is included on chain), by mode and chain.", "mode", "chain"),
		gasSpent: counter("gas_spent_total", "Native coin (ETH, POL, SOL) the treasury paid in fees for included transactions it relayed, by mode and chain.", "mode", "chain"),
		clockNow: time.Now,
		caughtUp: map[[2]string]time.Time{},
	}
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the series of g in Prometheus's text format (/metrics).
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// HTTPRequest records one answered request; route is the router's pattern
// ("/checkout/sessions/{id}"), "unmatched" for a 404 on no route.
func (m *Metrics) HTTPRequest(route, method string, status int, took time.Duration) {
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route, method).Observe(took.Seconds())
}

// JobWorked records one River job run: how it ended, how long it ran, and
// how long it waited after it was due.
func (m *Metrics) JobWorked(kind, state string, waited, took time.Duration) {
	m.jobs.WithLabelValues(kind, state).Inc()
	m.jobDuration.WithLabelValues(kind).Observe(took.Seconds())
	m.jobLatency.WithLabelValues(kind).Observe(max(waited, 0).Seconds())
}

// QueueDepth sets the jobs waiting or running in each queue and state; the
// states absent from depth are set to 0, so a drained queue reads 0.
func (m *Metrics) QueueDepth(depth map[[2]string]int) {
	m.queueDepth.Reset()
	for k, n := range depth {
		m.queueDepth.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}

// Scanned records a successful deposit scan: head is the chain's head as
// the scan read it, next the first block not yet scanned, seen how many
// deposits it saw for the first time.
func (m *Metrics) Scanned(mode, chain string, head, next uint64, seen int) {
	now := m.clockNow()
	m.scans.WithLabelValues(chain, mode, "ok").Inc()
	m.scanLastOK.WithLabelValues(chain, mode).Set(float64(now.UnixNano()) / 1e9)
	if seen > 0 {
		m.depositsSeen.WithLabelValues(chain, mode).Add(float64(seen))
	}
	var lag uint64
	if next > 0 && head+1 > next {
		lag = head + 1 - next
	}
	m.scanLagBlocks.WithLabelValues(chain, mode).Set(float64(lag))
	key := [2]string{mode, chain}
	m.caughtUpMu.Lock()
	since, ok := m.caughtUp[key]
	if lag == 0 || !ok {
		// The first scan a process makes counts from itself: what came
		// before is not known here.
		since = now
		m.caughtUp[key] = now
	}
	m.caughtUpMu.Unlock()
	m.scanLagSeconds.WithLabelValues(chain, mode).Set(now.Sub(since).Seconds())
}

// ScanFailed records a deposit scan that failed.
func (m *Metrics) ScanFailed(mode, chain string) {
	m.scans.WithLabelValues(chain, mode, "error").Inc()
}

// WebhookAttempt records one webhook try: result is succeeded, retrying
// (failed, another try is due) or failed (the last try failed).
func (m *Metrics) WebhookAttempt(mode, result string, took time.Duration) {
	m.webhookAttempts.WithLabelValues(mode, result).Inc()
	m.webhookDuration.WithLabelValues(mode, result).Observe(took.Seconds())
}

// PaymentStatus records a payment reaching a status.
func (m *Metrics) PaymentStatus(mode, chain, status string) {
	m.payments.WithLabelValues(chain, mode, status).Inc()
}

// SendStatus records a custodial send reaching a status.
func (m *Metrics) SendStatus(chain, status string) {
	m.sends.WithLabelValues(chain, status).Inc()
}

// Settled records a completed settlement's payout (net, USD).
func (m *Metrics) Settled(mode, chain, settlementType string, net decimal.Decimal) {
	m.settled.WithLabelValues(mode, chain, settlementType).Add(net.InexactFloat64())
}

// Swept records a completed sweep (gross, USD).
func (m *Metrics) Swept(mode, chain string, gross decimal.Decimal) {
	m.swept.WithLabelValues(mode, chain).Add(gross.InexactFloat64())
}

// Refunded records a refund (USD). Nothing calls it yet: refunds do not
// exist; the series is exported (at 0 once touched) so dashboards and
// alerts can be written now.
func (m *Metrics) Refunded(mode, chain string, amount decimal.Decimal) {
	m.refunded.WithLabelValues(mode, chain).Add(amount.InexactFloat64())
}

// GasSpent records the fee of one included transaction the treasury paid,
// in the chain's smallest native unit (wei, lamports), converted with
// decimals (18 on EVM, 9 on Solana).
func (m *Metrics) GasSpent(mode, chain string, fee *big.Int, decimals int32) {
	if fee == nil || fee.Sign() <= 0 {
		return
	}
	m.gasSpent.WithLabelValues(mode, chain).Add(decimal.NewFromBigInt(fee, -decimals).InexactFloat64())
}

// Touch creates the series of every chain and mode given, at 0, so that
// dashboards and alerts see them before the first event (a counter that
// does not exist yet is no rate of 0).
func (m *Metrics) Touch(modes, chains []string) {
	for _, mode := range modes {
		for _, chain := range chains {
			m.refunded.WithLabelValues(mode, chain)
			m.swept.WithLabelValues(mode, chain)
			m.gasSpent.WithLabelValues(mode, chain)
			m.depositsSeen.WithLabelValues(chain, mode)
			for _, typ := range []string{"crypto_usdc", "fiat_pix"} {
				m.settled.WithLabelValues(mode, chain, typ)
			}
			for _, status := range []string{"detected", "confirming", "confirmed", "failed"} {
				m.payments.WithLabelValues(chain, mode, status)
			}
		}
		for _, result := range []string{"succeeded", "retrying", "failed"} {
			m.webhookAttempts.WithLabelValues(mode, result)
		}
	}
	for _, chain := range chains {
		for _, status := range []string{"pending", "completed", "failed"} {
			m.sends.WithLabelValues(chain, status)
		}
	}
}
