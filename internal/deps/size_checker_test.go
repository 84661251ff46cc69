package deps

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pad is n comment lines.
func pad(n int) string { return strings.Repeat("// pad\n", n) }

// fn is a function n lines long, the signature sig.
func fn(sig string, n int) string {
	return "func " + sig + " {\n" + strings.Repeat("\t_ = 0\n", n-2) + "}\n"
}

// rows is n lines of a []string literal's elements.
func rows(n int) string { return strings.Repeat("\t\t\"x\",\n", n) }

// writeTree writes the files (slash paths) under a temporary root and
// parses it as module example.com/m.
func writeTree(t *testing.T, files map[string]string) *tree {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := loadTree(root, "example.com/m")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// sizeTree is a module with a file one line past the file bound, one at
// it, a function at the function bound and a method one past it, tables
// of data, and what the rules leave out: test files, testdata, another
// module, a directory beginning with ".", a file beginning with "_".
func sizeTree(t *testing.T) *tree {
	edge := "package a\n\n" + // 1-2
		"type T[K any] struct{}\n\n" + // 3-4
		"// At is at the bound; this comment is not counted.\n" + // 5
		fn("At()", 100) + // 6-105
		fn("(t *T[K]) Past()", 101) // 106-206
	edge += pad(600 - strings.Count(edge, "\n"))
	table := "package a\n\n" + // 1-2
		"func Table() []string {\n\ttype row = string\n\treturn []row{\n" + rows(96) + "\t}\n}\n" + // 3-103
		"func Code() []string {\n\tx := []string{\n" + rows(96) + "\t}\n\treturn x\n}\n" + // 104-204
		"func Small() []string {\n\treturn []string{\n" + rows(96) + "\t}\n}\n" // 205-304
	return writeTree(t, map[string]string{
		"go.mod":             "module example.com/m\n",
		"a/big.go":           "package a\n" + pad(600),
		"a/edge.go":          edge,
		"a/table.go":         table,
		"a/big_test.go":      "package a\n" + pad(700) + fn("Long()", 200),
		"a/testdata/x.go":    "package x\n" + pad(700),
		"a/_skip.go":         "package a\n" + pad(700),
		"a/b/b.go":           "package b",
		".hidden/x.go":       "package x\n" + pad(700),
		"other/go.mod":       "module example.com/other\n",
		"other/x.go":         "package x\n" + pad(700) + fn("Long()", 200),
		"cmd/tool/main.go":   "package main\n\n" + fn("main()", 101),
		"cmd/tool/README.md": pad(700),
	})
}

// TestFileBound: a file one line past the bound is reported with its
// length, one at the bound is not, nor what the rules leave out; a last
// line without its newline counts.
func TestFileBound(t *testing.T) {
	tr := sizeTree(t)
	want := []string{"a/big.go: 601 lines, the bound is 600"}
	if got := msgs(tr.checkFiles(600)); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := tr.checkFiles(601); len(got) != 0 {
		t.Errorf("at the bound: %q", msgs(got))
	}
	if n := tr.pkgs["a/b"].files[0].lines; n != 1 {
		t.Errorf("a/b/b.go, one line without its newline: %d lines", n)
	}
	var paths []string
	for _, f := range tr.files() {
		paths = append(paths, f.path)
	}
	if want := []string{"a/b/b.go", "a/big.go", "a/edge.go", "a/table.go", "cmd/tool/main.go"}; !slices.Equal(paths, want) {
		t.Errorf("files:\n got %q\nwant %q", paths, want)
	}
}

// TestFuncBound: a function at the bound passes, a method one past it is
// named Recv.Method at its func line with its length; a table of data is
// exempt when named, an exemption of code fails, and one within the bound
// or gone is stale.
func TestFuncBound(t *testing.T) {
	tr := sizeTree(t)
	tables := []table{
		{"a/table.go", "Table", "t"},
		{"a/table.go", "Code", "c"},
		{"a/table.go", "Small", "s"},
		{"a/table.go", "Gone", "g"},
	}
	vs, exempt, stale := tr.checkFuncs(100, tables)
	want := []string{
		"a/edge.go:106 T.Past: 101 lines, the bound is 100",
		"a/table.go:104 Code is exempt as a table of data (c), but its body is code, not types, consts and one returned composite literal",
		"cmd/tool/main.go:3 main: 101 lines, the bound is 100",
	}
	if got := msgs(vs); !slices.Equal(got, want) {
		t.Errorf("violations:\n got %q\nwant %q", got, want)
	}
	if want := []string{"a/table.go:3 Table: 101 lines, a table of data (t)"}; !slices.Equal(exempt, want) {
		t.Errorf("exempt:\n got %q\nwant %q", exempt, want)
	}
	wantStale := []string{
		"a/table.go Small is 100 lines, within the bound of 100; delete its entry from tables (s)",
		"a/table.go declares no function Gone; delete its entry from tables (g)",
	}
	if !slices.Equal(stale, wantStale) {
		t.Errorf("stale:\n got %q\nwant %q", stale, wantStale)
	}
	if vs[0].key != "a/edge.go T.Past" || vs[0].lines != 101 {
		t.Errorf("pending key and length: %+v", vs[0])
	}
	// Without the exemptions the tables are plain functions.
	vs, _, _ = tr.checkFuncs(100, nil)
	want = []string{
		"a/edge.go:106 T.Past: 101 lines, the bound is 100",
		"a/table.go:3 Table: 101 lines, the bound is 100",
		"a/table.go:104 Code: 101 lines, the bound is 100",
		"cmd/tool/main.go:3 main: 101 lines, the bound is 100",
	}
	if got := msgs(vs); !slices.Equal(got, want) {
		t.Errorf("no exemptions:\n got %q\nwant %q", got, want)
	}
}

// TestIsTable: what counts as a table of data.
func TestIsTable(t *testing.T) {
	for body, want := range map[string]bool{
		`return []int{1, 2}`:                                     true,
		`return &T{A: 1, B: f(2)}`:                               true,
		"type r = struct{ a int }\nconst n = 2\nreturn []r{{n}}": true,
		`return []func(){func() {}}`:                             false,
		"var x = []int{1}\nreturn x":                             false,
		"x := []int{1}\nreturn x":                                false,
		`return f([]int{1})`:                                     false,
		`return []int{1}, nil`:                                   false,
		"if ok {\n\treturn []int{1}\n}\nreturn nil":              false,
		"":                                       false,
		"type r = int\nreturn r(1)":              false,
		"type r = int\nvar v = 1\nreturn []r{v}": false,
		"const ( a = iota; b )\nreturn map[int]string{a: \"a\"}": true,
	} {
		src := "package p\nfunc F() T {\n" + body + "\n}\n"
		f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if got := isTable(f.Decls[0].(*ast.FuncDecl)); got != want {
			t.Errorf("%q: isTable %v, want %v", body, got, want)
		}
	}
}

// TestPackageBudget: a package at its budget passes, one line past it
// fails with its length; each package under a pattern counts on its own,
// its test files left out; a pattern that names no package fails.
func TestPackageBudget(t *testing.T) {
	tr := sizeTree(t)
	const a = 601 + 600 + 304
	if got := tr.checkBudget("a/...", a); len(got) != 0 {
		t.Errorf("at the budget: %q", msgs(got))
	}
	want := []string{"a: 1505 lines in 3 non-test files, the budget is 1504"}
	if got := msgs(tr.checkBudget("a/...", a-1)); !slices.Equal(got, want) {
		t.Errorf("one past the budget:\n got %q\nwant %q", got, want)
	}
	// a/b/b.go is one line: at a budget of 1 only a is over it.
	want = []string{"a: 1505 lines in 3 non-test files, the budget is 1"}
	if got := msgs(tr.checkBudget("a/...", 1)); !slices.Equal(got, want) {
		t.Errorf("budget 1:\n got %q\nwant %q", got, want)
	}
	want = []string{"z/...: no such package"}
	if got := msgs(tr.checkBudget("z/...", 1)); !slices.Equal(got, want) {
		t.Errorf("no package:\n got %q\nwant %q", got, want)
	}
}

// sharedTree: package vals in directory v declares variables, an error
// sentinel, a constant and a function; package r uses them.
func sharedTree(t *testing.T) *tree {
	return writeTree(t, map[string]string{
		"go.mod": "module example.com/m\n",
		"v/v.go": `package vals

import "errors"

var Counter int
var ErrGone = errors.New("gone")
var unexported int
var (
	Errand       = 1 // not a sentinel: Err and a lower-case letter
	Named, Other = 2, 3
)

const Max = 1

func F() {}

var own = Counter + unexported
`,
		"r/r.go": `package r

import "example.com/m/v"

func Use(vals struct{ Counter int }) int { return vals.Counter }

func Read() int {
	vals.Counter = 2
	vals.Counter++
	_ = vals.ErrGone
	_ = vals.Max + vals.Errand
	vals.F()
	return vals.Counter + vals.Other
}
`,
		"r/w.go":      "package r\n\nimport w \"example.com/m/v\"\n\nvar x = &w.Named\n",
		"r/dot.go":    "package r\n\nimport . \"example.com/m/v\"\n\nvar y = Counter\n",
		"r/r_test.go": "package r\n\nimport \"example.com/m/v\"\n\nvar z = vals.Counter\n",
		"r/ext.go":    "package r\n\nimport vals \"example.org/v\"\n\nvar e = vals.Counter\n",
	})
}

// TestSharedChecker: reads and writes of another package's variables are
// reported by the name the file gives the import, resolved from the
// imported package's clause; sentinels, constants, functions, a shadowing
// parameter, test files and other modules' packages are not; a dot import
// is refused.
func TestSharedChecker(t *testing.T) {
	tr := sharedTree(t)
	vs := tr.checkShared()
	want := []string{
		"r/dot.go:3 imports v with a dot, which hides what it reads of it",
		"r/r.go:8 writes vals.Counter, a package-level variable of v",
		"r/r.go:9 writes vals.Counter, a package-level variable of v",
		"r/r.go:11 reads vals.Errand, a package-level variable of v",
		"r/r.go:13 reads vals.Counter, a package-level variable of v",
		"r/r.go:13 reads vals.Other, a package-level variable of v",
		"r/w.go:5 reads w.Named, a package-level variable of v",
	}
	if got := msgs(vs); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if vs[1].key != "r/r.go v.Counter" {
		t.Errorf("pending key: %q", vs[1].key)
	}
}

// TestSizeCheckerPending: a violation a pending entry names is pending
// while no longer than the entry's length and fails one line past it; an
// entry that names no violation is stale.
func TestSizeCheckerPending(t *testing.T) {
	vs := []violation{
		{"file", "f.go", 612, "f.go: 612 lines, the bound is 600"},
		{"func", "g.go F", 117, "g.go:3 F: 117 lines, the bound is 100"},
		{"shared", "h.go v.X", 0, "h.go:1 reads v.X, a package-level variable of v"},
		{"shared", "h.go v.X", 0, "h.go:2 reads v.X, a package-level variable of v"},
		{"file", "new.go", 601, "new.go: 601 lines, the bound is 600"},
	}
	pending := []sizePend{
		{"file", "f.go", 612, "a"},
		{"func", "g.go F", 116, "b"},
		{"shared", "h.go v.X", 0, "c"},
		{"package", "gone", 7000, "d"},
		{"func", "f.go", 612, "e"},
	}
	rep := applyPending(vs, pending)
	want := report{
		violations: []string{
			"g.go:3 F: 117 lines, the bound is 100; it has grown past the 116 lines its pending entry allows (b)",
			"new.go: 601 lines, the bound is 600",
		},
		pending: []string{
			"f.go: 612 lines, the bound is 600 (a)",
			"h.go:1 reads v.X, a package-level variable of v (c)",
			"h.go:2 reads v.X, a package-level variable of v (c)",
		},
		stale: []string{
			"package gone breaks no rule now; delete its entry from sizePending (d)",
			"func f.go breaks no rule now; delete its entry from sizePending (e)",
		},
	}
	if !slices.Equal(rep.violations, want.violations) || !slices.Equal(rep.pending, want.pending) || !slices.Equal(rep.stale, want.stale) {
		t.Errorf("got  %q\nwant %q", rep, want)
	}
}

func msgs(vs []violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.msg)
	}
	return out
}
