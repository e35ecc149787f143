package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/metrics"
	"agentpay/rest"
	"agentpay/worker"
)

// defaultDevMetricsAddr is where `agentpay dev` serves /metrics when
// METRICS_ADDR is unset. Not Prometheus's own 9090: a developer running a
// Prometheus beside dev would collide with it; 9464 is the port
// OpenTelemetry's Prometheus exporters use. When it is taken, dev serves
// on a free port instead and prints which.
const defaultDevMetricsAddr = "127.0.0.1:9464"

// metricsAddr is where this command serves /metrics: METRICS_ADDR, else
// defaultDevMetricsAddr under `dev` and nowhere under serve and worker;
// "off" turns it off everywhere.
func metricsAddr(cfg config, dev bool) string {
	switch {
	case cfg.MetricsAddr == "off":
		return ""
	case cfg.MetricsAddr != "":
		return cfg.MetricsAddr
	case dev:
		return defaultDevMetricsAddr
	}
	return ""
}

// startMetrics builds the process's series on a registry of its own and
// serves them at http://<addr>/metrics until ctx ends. It answers nil (and
// serves nothing) when addr is "". Under dev, a taken default address falls
// back to a free port.
func startMetrics(ctx context.Context, cfg config, dev bool, logger *slog.Logger) (*metrics.Metrics, string, error) {
	addr := metricsAddr(cfg, dev)
	if addr == "" {
		return nil, "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil && dev && cfg.MetricsAddr == "" {
		logger.Warn("the default metrics address is taken; serving metrics on a free port (set METRICS_ADDR to choose)", "addr", addr, "err", err)
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return nil, "", fmt.Errorf("METRICS_ADDR: %w", err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	modes := []string{string(agentpay.ModeLive), string(agentpay.ModeTest)}
	names := make([]string, len(chains.All))
	for i, c := range chains.All {
		names[i] = string(c)
	}
	m.Touch(modes, names)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(reg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: maxHeaderBytes}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	url := "http://" + ln.Addr().String() + "/metrics"
	logger.Info("metrics", "addr", url)
	return m, url, nil
}

// The observers of each layer: nil interfaces (not typed nils) without
// metrics.

func serviceObserver(m *metrics.Metrics) agentpay.Observer {
	if m == nil {
		return nil
	}
	return m
}

func httpObserver(m *metrics.Metrics) rest.HTTPObserver {
	if m == nil {
		return nil
	}
	return m
}

func workerObserver(m *metrics.Metrics) worker.Observer {
	if m == nil {
		return nil
	}
	return m
}
