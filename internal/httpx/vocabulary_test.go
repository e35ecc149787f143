package httpx

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFacadesShareTheVocabulary: the app and the MCP server take what they
// answer alike with REST (error statuses, amounts, the answer shapes) from
// this package, never from the REST facade: neither they nor their tests
// depend on agentpay/rest, directly or through another package. (Before
// the vocabulary moved here, app/app.go and mcp/*.go imported rest.)
func TestFacadesShareTheVocabulary(t *testing.T) {
	// The go command that runs this test is on PATH (make test, CI).
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is not on PATH")
	for _, pkg := range []string{"agentpay/app", "agentpay/mcp"} {
		out, err := exec.Command(goTool, "list", "-deps", "-test", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
		require.NoError(t, err, "go list %s: %s", pkg, out)
		deps := strings.Fields(string(out))
		require.Contains(t, deps, pkg, "go list answered the packages of %s", pkg)
		require.NotContains(t, deps, "agentpay/rest", "%s depends on the REST facade: take the shared vocabulary from internal/httpx", pkg)
	}
}
