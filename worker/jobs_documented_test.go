package worker

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJobsDocumented holds docs/operations.md's list of jobs ("Jobs and
// their schedules") to the code: every job kind the worker runs (each
// JobArgs' Kind in this package and internal/jobs) is named there, and the
// list names no job that does not exist. A job added without its line in
// the operators' reference, or a renamed one, fails here.
func TestJobsDocumented(t *testing.T) {
	kinds := jobKinds(t, ".", filepath.Join("..", "internal", "jobs"))
	require.NotEmpty(t, kinds)

	doc, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	require.NoError(t, err)
	var list string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "- Jobs and their schedules:") {
			list = line
		}
	}
	require.NotEmpty(t, list, "docs/operations.md has no line \"- Jobs and their schedules:\"")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z]+(?:_[a-z]+)+)`").FindAllStringSubmatch(list, -1) {
		named[m[1]] = true
	}
	for _, k := range kinds {
		require.True(t, named[k], "job %q is not in docs/operations.md's \"Jobs and their schedules\"", k)
	}
	known := map[string]bool{}
	for _, k := range kinds {
		known[k] = true
	}
	for n := range named {
		if strings.ToUpper(n) == n { // a setting such as LATE_PAYMENT_WINDOW
			continue
		}
		require.True(t, known[n], "docs/operations.md's \"Jobs and their schedules\" names %q, which is no job", n)
	}
}

// jobKinds reads the job kinds declared in dirs: the string each
// `func (X) Kind() string { return "..." }` of a non-test file returns.
func jobKinds(t *testing.T, dirs ...string) []string {
	t.Helper()
	var kinds []string
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			require.NoError(t, err)
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv == nil || fn.Name.Name != "Kind" || fn.Body == nil || len(fn.Body.List) != 1 {
					continue
				}
				ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
				if !ok || len(ret.Results) != 1 {
					continue
				}
				lit, ok := ret.Results[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				k, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				kinds = append(kinds, k)
			}
		}
	}
	sort.Strings(kinds)
	return kinds
}
