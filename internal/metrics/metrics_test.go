package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestScanLag: the lag in blocks is the head minus the last block read;
// the lag in seconds counts from the last scan that was at the head.
func TestScanLag(t *testing.T) {
	m := New(prometheus.NewRegistry())
	now := time.Unix(1_700_000_000, 0)
	m.clockNow = func() time.Time { return now }
	blocks := func() float64 { return testutil.ToFloat64(m.scanLagBlocks.WithLabelValues("base", "test")) }
	seconds := func() float64 { return testutil.ToFloat64(m.scanLagSeconds.WithLabelValues("base", "test")) }

	m.Scanned("test", "base", 100, 101, 0) // at the head
	require.Zero(t, blocks())
	require.Zero(t, seconds())

	now = now.Add(3 * time.Second)
	m.Scanned("test", "base", 110, 105, 0) // read up to 104: 6 behind
	require.Equal(t, 6.0, blocks())
	require.Equal(t, 3.0, seconds(), "behind since the last scan at the head")

	now = now.Add(2 * time.Second)
	m.Scanned("test", "base", 111, 112, 2)
	require.Zero(t, blocks())
	require.Zero(t, seconds())
	require.Equal(t, 2.0, testutil.ToFloat64(m.depositsSeen.WithLabelValues("base", "test")))
	require.Equal(t, float64(now.Unix()), testutil.ToFloat64(m.scanLastOK.WithLabelValues("base", "test")))
}

// TestRegistriesAreIndependent: two Metrics on two registries (as tests
// and processes build them) do not collide, and none touches Prometheus's
// global registry.
func TestRegistriesAreIndependent(t *testing.T) {
	a, b := prometheus.NewRegistry(), prometheus.NewRegistry()
	ma, mb := New(a), New(b)
	ma.SendStatus("base", "completed")
	require.Equal(t, 1.0, testutil.ToFloat64(ma.sends.WithLabelValues("base", "completed")))
	require.Equal(t, 0.0, testutil.ToFloat64(mb.sends.WithLabelValues("base", "completed")))
	families, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range families {
		require.NotContains(t, f.GetName(), Namespace+"_")
	}
}
