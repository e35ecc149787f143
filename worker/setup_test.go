package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/internal/store"
	"agentpay/internal/testenv"
)

// harness is a service built from the bundle, which the real worker runs
// jobs for (as `agentpay worker` does).
type harness struct {
	env *testenv.Env
	db  *store.DB
	svc *agentpay.Service
}

// newHarness builds the service from env, cfg's non-zero fields kept
// (testenv.Env.Fill).
func newHarness(tb testing.TB, env *testenv.Env, cfg agentpay.Config) *harness {
	tb.Helper()
	env.Fill(&cfg)
	svc, err := agentpay.NewService(cfg)
	require.NoError(tb, err)
	return &harness{env: env, db: cfg.DB, svc: svc}
}

// runWorker starts the worker until the test ends. Its periodic scans wait
// an hour and it does not watch the heads: the tests using it are about the
// jobs the service enqueues, and scan when they choose.
func (h *harness) runWorker(tb testing.TB) {
	tb.Helper()
	h.startWorker(tb, Config{ScanInterval: time.Hour, HeadPollInterval: -1})
}

// startWorker starts the worker on the harness's service (cfg's DB,
// Service and Logger are set here); stop, also run when the test ends,
// stops it and checks it stopped cleanly.
func (h *harness) startWorker(tb testing.TB, cfg Config) (stop func()) {
	tb.Helper()
	_, stop = h.runningWorker(tb, cfg)
	return stop
}

// runningWorker is startWorker that also answers the worker.
func (h *harness) runningWorker(tb testing.TB, cfg Config) (w *Worker, stop func()) {
	tb.Helper()
	cfg.DB, cfg.Service, cfg.Logger = h.db, h.svc, h.env.Logger
	w, err := New(cfg)
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(tb, err)
			case <-time.After(40 * time.Second):
				tb.Error("worker did not stop")
			}
		})
	}
	tb.Cleanup(stop)
	return w, stop
}
