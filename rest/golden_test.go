package rest

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files under testdata/golden")

// Values that differ on every run are replaced by stable placeholders, so a
// golden file pins the shape and every other value exactly.
var goldenNormalisers = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uuid>"},
	{regexp.MustCompile(`\bwhsec_[0-9A-Za-z+/]+={0,2}`), "<whsec>"},
	{regexp.MustCompile(`\b(ak|sk_live|pk_live|sk_test|pk_test)_[0-9A-Za-z]+`), "<$1>"},
	{regexp.MustCompile(`0x[0-9a-fA-F]{64}`), "<hash>"},
	{regexp.MustCompile(`0x[0-9a-fA-F]{40}`), "<evm-address>"},
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`), "<time>"},
	{regexp.MustCompile(`"[1-9A-HJ-NP-Za-km-z]{32,44}"`), `"<base58>"`},
	{regexp.MustCompile(`"[1-9A-HJ-NP-Za-km-z]{80,90}"`), `"<signature>"`},
}

// normaliseGolden indents the JSON and replaces run-specific values; extra
// replacements (e.g. a username made unique per test) apply first.
func normaliseGolden(t *testing.T, body []byte, extra map[string]string) []byte {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(body, &v), string(body))
	out, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	for from, to := range extra {
		out = bytes.ReplaceAll(out, []byte(from), []byte(to))
	}
	for _, n := range goldenNormalisers {
		out = n.re.ReplaceAll(out, []byte(n.repl))
	}
	return append(out, '\n')
}

// assertGolden compares a response body with testdata/golden/<name>.json;
// `go test ./rest -run X -update` rewrites the file.
func assertGolden(t *testing.T, name string, body []byte, extra map[string]string) {
	t.Helper()
	got := normaliseGolden(t, body, extra)
	path := filepath.Join("testdata", "golden", name+".json")
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: run go test ./rest -run %s -update", t.Name())
	require.Equal(t, string(want), string(got))
}
