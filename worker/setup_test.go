package worker

import (
	"context"
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

// runWorker starts the worker until the test ends, then checks it stopped
// cleanly. Its periodic scans wait an hour: the tests using it are about
// the jobs the service enqueues.
func (h *harness) runWorker(tb testing.TB) {
	tb.Helper()
	w, err := New(Config{DB: h.db, Service: h.svc, Logger: h.env.Logger, ScanInterval: time.Hour})
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(tb, err)
		case <-time.After(40 * time.Second):
			tb.Error("worker did not stop")
		}
	})
}
