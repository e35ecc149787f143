package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// axeScript is axe-core as `make deps` installs it (testdata/axe, pinned
// by its package-lock.json), under the module's root.
const axeScript = "testdata/axe/node_modules/axe-core/axe.min.js"

// AxeTags are the rules CheckAccessibility runs: WCAG 2.0 and 2.1, levels
// A and AA.
var AxeTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa"}

// AxeViolation is one rule a page breaks, with where.
type AxeViolation struct {
	ID      string   `json:"id"`
	Impact  string   `json:"impact"`
	Help    string   `json:"help"`
	Targets []string `json:"targets"`
}

func (v AxeViolation) String() string {
	return fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(v.Targets, ", "))
}

// CheckAccessibility runs axe-core in the tab's page as it is now (every
// state a test reaches can be checked) and fails the test on any serious
// or critical violation of AxeTags, naming the page (what). The script is
// injected through the DevTools protocol, which the page's
// Content-Security-Policy does not govern, so the page's own policy stays
// as strict as it is. Without `make deps` having installed axe-core the
// test fails, saying so: an accessibility check skipped in silence would
// pass every page.
func CheckAccessibility(t *testing.T, tab context.Context, what string) []AxeViolation {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), axeScript))
	require.NoError(t, err, "axe-core is not installed: run `make deps` (npm ci in testdata/axe)")
	_, err = chromedp.Run(tab, chromedp.Evaluate[chromedp.Void](string(src)+";undefined"))
	require.NoError(t, err, "inject axe-core")
	tags := `["` + strings.Join(AxeTags, `","`) + `"]`
	all, err := chromedp.Run(tab, chromedp.Evaluate[[]AxeViolation](`axe.run(document, {runOnly: {type: "tag", values: `+tags+`}, resultTypes: ["violations"]})
		.then(r => r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help,
			targets: v.nodes.map(n => n.target.join(" ") + (n.failureSummary ? " [" + n.failureSummary.replace(/\s+/g, " ") + "]" : ""))})))`,
		chromedp.EvalAwaitPromise))
	require.NoError(t, err, "run axe-core")
	var serious []string
	for _, v := range all {
		if v.Impact == "serious" || v.Impact == "critical" {
			serious = append(serious, v.String())
		}
	}
	require.Empty(t, serious, "%s: serious or critical WCAG 2 A/AA violations (axe-core)", what)
	return all
}

// moduleRoot is the directory of the module's go.mod, above the test's
// working directory (its package's).
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}
