package agentpay

import (
	"testing"

	"agentpay/internal/testenv"
)

// newTestService builds a test's service from env (nil: a fresh database and
// vault, no chains), cfg's non-zero fields kept (testenv.Env.Fill).
func newTestService(tb testing.TB, env *testenv.Env, cfg Config) *Service {
	tb.Helper()
	if env == nil {
		env = testenv.New(tb, testenv.Options{})
	}
	env.Fill(&cfg)
	svc, err := NewService(cfg)
	if err != nil {
		tb.Fatalf("newTestService: %v", err)
	}
	return svc
}
