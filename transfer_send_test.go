package agentpay

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSendRefusalsListed holds Send's doc comment to the code: the
// refusals it lists are sendRefusals, in order, and each is made somewhere
// in transfer_send.go (a refuse call naming it), and no refusal is made
// there that the list lacks.
func TestSendRefusalsListed(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "transfer_send.go", nil, parser.ParseComments)
	require.NoError(t, err)

	consts := map[string]sendRefusal{} // refuseX -> its name
	var doc []sendRefusal
	made := map[sendRefusal]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.Name == "Send" && d.Recv != nil {
				for _, m := range regexp.MustCompile(`(?m)^\s*- (\w+): `).FindAllStringSubmatch(d.Doc.Text(), -1) {
					doc = append(doc, sendRefusal(m[1]))
				}
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				v, ok := spec.(*ast.ValueSpec)
				if !ok || len(v.Values) != 1 {
					continue
				}
				if lit, ok := v.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					name, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					consts[v.Names[0].Name] = sendRefusal(name)
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if fn, ok := call.Fun.(*ast.Ident); ok && fn.Name == "refuse" && len(call.Args) == 2 {
			id, ok := call.Args[0].(*ast.Ident)
			require.True(t, ok, "refuse names its refusal by a constant")
			name, ok := consts[id.Name]
			require.True(t, ok, "%s is a refusal constant", id.Name)
			made[name] = true
		}
		return true
	})

	require.Equal(t, sendRefusals, doc, "Send's doc lists every refusal, in order")
	for _, r := range sendRefusals {
		require.True(t, made[r], "refusal %s is made in transfer_send.go", r)
	}
	require.Len(t, made, len(sendRefusals), "every refusal made is listed")
}
