// Package deploy holds the production deployment's files, which are not Go:
// docker-compose.yml (PostgreSQL, migrate, two serve, two worker,
// Prometheus, Grafana), prometheus/ (scrape config and alert rules),
// grafana/ (the dashboard and its provisioning) and env.example.
// docs/operations.md says how to use them.
//
// The Go here embeds the dashboard and the alert rules and lists the
// metrics they name, so that tests can hold them to what a running service
// exports (cmd/agentpay's end-to-end test reads its /metrics);
// deploy_test.go checks the compose file and the Prometheus config.
package deploy

import (
	_ "embed"
	"encoding/json"
	"regexp"
	"sort"

	"gopkg.in/yaml.v3"
)

//go:embed grafana/agentpay.json
var dashboard []byte

//go:embed prometheus/alerts.yml
var alerts []byte

// seriesName matches the metric names an expression uses: the service's
// own and the Go runtime's and process's, which it exports too.
var seriesName = regexp.MustCompile(`\b(?:agentpay|go|process)_[a-z0-9_]+\b`)

// DashboardExprs are the PromQL expressions of the Grafana dashboard's
// panels.
func DashboardExprs() ([]string, error) {
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, t.Expr)
		}
	}
	return out, nil
}

// AlertExprs are the expressions of the Prometheus alert rules.
func AlertExprs() ([]string, error) {
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(alerts, &f); err != nil {
		return nil, err
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out, nil
}

// MetricNames are the metric names exprs use, sorted, each once. A
// histogram is named by the series it is read through (_bucket).
func MetricNames(exprs []string) []string {
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, n := range seriesName.FindAllString(e, -1) {
			seen[n] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
