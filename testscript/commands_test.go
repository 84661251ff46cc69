package testscript_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// TestCommandsAreTheMains checks that each command registered in commands
// runs exactly the statements of its cmd main, so that the journeys keep
// running what users run.
func TestCommandsAreTheMains(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main_test.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]*ast.BlockStmt{}
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		lit, ok1 := kv.Key.(*ast.BasicLit)
		fn, ok2 := kv.Value.(*ast.FuncLit)
		if ok1 && ok2 && lit.Kind == token.STRING {
			name, _ := strconv.Unquote(lit.Value)
			registered[name] = fn.Body
		}
		return true
	})
	for _, name := range []string{"steward-operator", "steward-controller", "steward-installer", "steward-appliance", "steward-dev"} {
		body, ok := registered[name]
		if !ok {
			t.Errorf("%s is not registered in commands", name)
			continue
		}
		mf, err := parser.ParseFile(fset, filepath.Join("..", "cmd", name, "main.go"), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var mainBody *ast.BlockStmt
		for _, d := range mf.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "main" && fd.Recv == nil {
				mainBody = fd.Body
			}
		}
		if mainBody == nil {
			t.Errorf("cmd/%s/main.go has no func main", name)
			continue
		}
		if got, want := stmts(t, body), stmts(t, mainBody); got != want {
			t.Errorf("%s: the registered command runs\n%s\nbut cmd/%s/main.go runs\n%s", name, got, name, want)
		}
	}
}

// stmts prints a block's statements, one per line, without positions.
func stmts(t *testing.T, b *ast.BlockStmt) string {
	var buf bytes.Buffer
	for _, s := range b.List {
		if err := printer.Fprint(&buf, token.NewFileSet(), s); err != nil {
			t.Fatal(err)
		}
		buf.WriteByte('\n')
	}
	return buf.String()
}
