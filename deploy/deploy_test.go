package deploy

import (
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"agentpay/internal/metrics"
)

// composeService is what the tests read of a compose service.
type composeService struct {
	Build       any               `yaml:"build"`
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Ports []string `yaml:"ports"`
}

// TestComposeFile checks the compose file's shape (yaml.v3 resolves its
// anchors and merge keys as compose does): PostgreSQL, migrate once, two
// serve and two worker processes after it, each exporting metrics and
// logging JSON, Prometheus scraping exactly those. With docker compose (or
// docker-compose) installed, `config` validates it too.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	var f struct {
		Services map[string]composeService `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &f))
	s := f.Services
	for _, name := range []string{"postgres", "migrate", "serve-1", "serve-2", "worker-1", "worker-2", "prometheus", "grafana"} {
		require.Contains(t, s, name)
	}
	require.Equal(t, []string{"migrate"}, s["migrate"].Command)
	require.Equal(t, "service_healthy", s["migrate"].DependsOn["postgres"].Condition)
	var scraped []string
	for name, want := range map[string]string{"serve-1": "serve", "serve-2": "serve", "worker-1": "worker", "worker-2": "worker"} {
		svc := s[name]
		require.Equal(t, []string{want}, svc.Command, name)
		require.Equal(t, "..", svc.Build, "%s builds the repository's Dockerfile", name)
		require.Equal(t, "service_completed_successfully", svc.DependsOn["migrate"].Condition, name)
		require.Equal(t, "0.0.0.0:9464", svc.Environment["METRICS_ADDR"], name)
		require.Equal(t, "json", svc.Environment["LOG_FORMAT"], name)
		require.True(t, strings.HasPrefix(svc.Environment["DATABASE_URL"], "postgres://"), name)
		if want == "serve" {
			require.Equal(t, "0.0.0.0:8080", svc.Environment["HTTP_ADDR"], name)
			require.Len(t, svc.Ports, 1, name)
		} else {
			require.Empty(t, svc.Ports, "%s answers no one", name)
		}
		scraped = append(scraped, name+":9464")
	}
	require.ElementsMatch(t, scraped, prometheusTargets(t), "Prometheus scrapes every serve and worker")

	dir := t.TempDir() // compose needs deploy/.env: the example, filled in
	copyDir(t, ".", dir)
	env, err := os.ReadFile("env.example")
	require.NoError(t, err)
	filled := strings.NewReplacer("MASTER_KEY=\n", "MASTER_KEY="+strings.Repeat("ab", 32)+"\n",
		"POSTGRES_PASSWORD=\n", "POSTGRES_PASSWORD=pw\n", "GRAFANA_ADMIN_PASSWORD=\n", "GRAFANA_ADMIN_PASSWORD=pw\n").Replace(string(env))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".env"), []byte(filled), 0o600))
	var cmd *exec.Cmd
	if _, err := exec.LookPath("docker-compose"); err == nil {
		cmd = exec.Command("docker-compose", "-f", "docker-compose.yml", "config", "-q")
	} else if exec.Command("docker", "compose", "version").Run() == nil {
		// docker without its compose plugin answers "unknown shorthand
		// flag" to compose's flags: ask the plugin itself first.
		cmd = exec.Command("docker", "compose", "-f", "docker-compose.yml", "config", "-q")
	} else {
		t.Skip("neither docker-compose nor docker's compose plugin is installed: the compose file's shape is checked, not validated by compose")
	}
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "compose config:\n%s", out)
}

// prometheusTargets are the targets prometheus.yml scrapes in the
// agentpay jobs.
func prometheusTargets(t *testing.T) []string {
	raw, err := os.ReadFile("prometheus/prometheus.yml")
	require.NoError(t, err)
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &cfg))
	require.Equal(t, []string{"alerts.yml"}, cfg.RuleFiles)
	var out []string
	for _, sc := range cfg.ScrapeConfigs {
		if !strings.HasPrefix(sc.JobName, "agentpay-") {
			continue
		}
		for _, st := range sc.StaticConfigs {
			out = append(out, st.Targets...)
		}
	}
	return out
}

// TestPrometheusConfig runs promtool on the scrape config (which checks
// the alert rules it names too) when promtool is installed (Debian:
// apt-get install prometheus).
func TestPrometheusConfig(t *testing.T) {
	exprs, err := AlertExprs()
	require.NoError(t, err)
	require.NotEmpty(t, exprs)
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed: the rules were only parsed as YAML")
	}
	out, err := exec.Command(promtool, "check", "config", "prometheus/prometheus.yml").CombinedOutput()
	require.NoError(t, err, "promtool:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
}

// TestDashboardAndAlertsUseExportedMetrics holds every metric the
// dashboard and the alerts name to what internal/metrics registers once
// each of its methods has been called. (cmd/agentpay's
// TestCheckoutEndToEndOnEveryChain checks them against a running
// service's /metrics.)
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.Touch([]string{"test"}, []string{"base"})
	m.HTTPRequest("/healthz", "GET", 200, time.Millisecond)
	m.JobWorked("scan_chain", "completed", time.Millisecond, time.Millisecond)
	m.QueueDepth(map[[2]string]int{{"default", "available"}: 1})
	m.Scanned("test", "base", 10, 11, 1)
	m.ScanFailed("test", "base")
	m.WebhookAttempt("test", "succeeded", time.Millisecond)
	m.PaymentStatus("test", "base", "confirmed")
	m.SendStatus("base", "completed")
	m.Settled("test", "base", "crypto_usdc", decimal.RequireFromString("1.5"))
	m.Swept("test", "base", decimal.RequireFromString("1.5"))
	m.Refunded("test", "base", decimal.Zero)
	m.GasSpent("test", "base", big.NewInt(21000), 18)
	families, err := reg.Gather()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				exported[f.GetName()+suffix] = true
			}
		}
	}
	dash, err := DashboardExprs()
	require.NoError(t, err)
	require.NotEmpty(t, dash)
	alerts, err := AlertExprs()
	require.NoError(t, err)
	names := MetricNames(append(dash, alerts...))
	require.NotEmpty(t, names)
	for _, n := range names {
		require.True(t, exported[n], "%s is named by the dashboard or an alert but not exported", n)
	}
	// And the dashboard shows every series of the service.
	shown := MetricNames(dash)
	for name := range exported {
		if strings.HasPrefix(name, metrics.Namespace+"_") && !strings.HasSuffix(name, "_sum") && !strings.HasSuffix(name, "_count") {
			base := strings.TrimSuffix(name, "_bucket")
			if slices.Contains(shown, base+"_bucket") || slices.Contains(shown, name) {
				continue
			}
			if exported[base+"_bucket"] && name == base {
				continue // a histogram: shown through its buckets
			}
			t.Errorf("%s is not on the dashboard", name)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(to, path)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	}))
}
