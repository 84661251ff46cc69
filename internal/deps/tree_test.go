package deps

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"
)

// srcFile is one non-test .go file of the module.
type srcFile struct {
	path  string // module-relative, with slashes
	lines int    // as wc -l counts them, plus a last line without its newline
	ast   *ast.File
}

// srcPkg is the non-test files of one directory.
type srcPkg struct {
	dir   string // module-relative ("." for the module's root)
	name  string // its package clause
	files []*srcFile
	vars  map[string]bool // its exported package-level variables, error sentinels aside
}

// tree is every package of a module, parsed.
type tree struct {
	module string
	fset   *token.FileSet
	pkgs   map[string]*srcPkg // by dir
}

var (
	treeOnce   sync.Once
	loadedTree *tree
	errTree    error
)

// loadModuleTree parses the module the test runs in (once per test binary).
func loadModuleTree(t *testing.T) *tree {
	t.Helper()
	treeOnce.Do(func() {
		var root string
		if root, errTree = moduleRoot(); errTree == nil {
			loadedTree, errTree = loadTree(root, module)
		}
	})
	if errTree != nil {
		t.Fatal(errTree)
	}
	if loadedTree.pkgs["journal"] == nil {
		t.Fatalf("no journal package in the tree: not %s", module)
	}
	return loadedTree
}

// moduleRoot is the directory of the go.mod of the module the test runs in.
func moduleRoot() (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(gomod))), nil
}

// loadTree parses every non-test .go file under root, the module named
// modulePath, whatever their build constraints.
// Like the go command it leaves out testdata, directories whose names
// begin with "." or "_" and, as other modules, directories with a go.mod.
func loadTree(root, modulePath string) (*tree, error) {
	tr := &tree{module: modulePath, fset: token.NewFileSet(), pkgs: map[string]*srcPkg{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p == root {
				return nil
			}
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return tr.add(p, filepath.ToSlash(rel))
	})
	if err != nil {
		return nil, err
	}
	for _, pkg := range tr.pkgs {
		pkg.vars = exportedVars(pkg.files)
	}
	return tr, nil
}

// add parses the file at p, module-relative rel, into its package.
func (tr *tree) add(p, rel string) error {
	src, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	// Mode 0 resolves each identifier declared in the file to its
	// declaration (ast.Ident.Obj): checkShared tells by it a local that
	// shadows an import's name from the import.
	f, err := parser.ParseFile(tr.fset, rel, src, 0)
	if err != nil {
		return err
	}
	lines := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		lines++
	}
	dir := path.Dir(rel)
	pkg := tr.pkgs[dir]
	if pkg == nil {
		pkg = &srcPkg{dir: dir, name: f.Name.Name}
		tr.pkgs[dir] = pkg
	} else if pkg.name != f.Name.Name {
		return fmt.Errorf("%s: package %s, but %s holds package %s", rel, f.Name.Name, dir, pkg.name)
	}
	pkg.files = append(pkg.files, &srcFile{path: rel, lines: lines, ast: f})
	return nil
}

// exportedVars are the exported variables the files declare at package
// level, error sentinels aside.
func exportedVars(files []*srcFile) map[string]bool {
	vars := map[string]bool{}
	for _, f := range files {
		for _, d := range f.ast.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if n.IsExported() && !isSentinel(n.Name) {
						vars[n.Name] = true
					}
				}
			}
		}
	}
	return vars
}

// isSentinel reports whether a variable's name is an error sentinel's, an
// errors.Is target such as journal.ErrLocked: Err and an upper-case letter.
func isSentinel(name string) bool {
	rest, ok := strings.CutPrefix(name, "Err")
	r, _ := utf8.DecodeRuneInString(rest)
	return ok && unicode.IsUpper(r)
}

// files are every file of the tree, sorted by path.
func (tr *tree) files() []*srcFile {
	var out []*srcFile
	for _, pkg := range tr.pkgs {
		out = append(out, pkg.files...)
	}
	slices.SortFunc(out, func(a, b *srcFile) int { return strings.Compare(a.path, b.path) })
	return out
}

// violation is one broken size or shared-state rule.
type violation struct {
	rule  string // "file", "func", "package" or "shared"
	key   string // what a pending entry names: see sizePend
	lines int    // the offender's length (0 for "shared")
	msg   string
}

// sizePend is a known violation of a size or shared-state rule: the file,
// the function ("FILE FUNC") or the package (its directory) over its
// bound, or the variable a file reads or writes ("FILE PKG.Name", PKG the
// variable's package, module-relative; "FILE PKG." for a dot import of
// PKG). lines is the offender's length when the entry was written: while
// pending it may not grow.
type sizePend struct {
	rule, key string
	lines     int
	why       string
}

// checkFiles reports every file over bound lines.
func (tr *tree) checkFiles(bound int) []violation {
	var out []violation
	for _, f := range tr.files() {
		if f.lines > bound {
			out = append(out, violation{"file", f.path, f.lines,
				fmt.Sprintf("%s: %d lines, the bound is %d", f.path, f.lines, bound)})
		}
	}
	return out
}

// table is a function exempt from the function bound because it is a
// table of data (isTable).
type table struct {
	file, fn, why string
}

// checkFuncs reports every top-level function or method over bound
// lines, counted from the line of its func keyword to the line of its
// closing brace, both included (its doc comment is not counted). The
// functions tables names are exempt (and listed in exempt); an exemption
// that is not a table of data is itself a violation, and one that is gone
// or within the bound is stale.
func (tr *tree) checkFuncs(bound int, tables []table) (out []violation, exempt, stale []string) {
	byName := map[[2]string]table{}
	for _, tb := range tables {
		byName[[2]string{tb.file, tb.fn}] = tb
	}
	seen := map[[2]string]bool{}
	for _, f := range tr.files() {
		for _, d := range f.ast.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := funcName(fd)
			start := tr.fset.Position(fd.Pos()).Line
			n := tr.fset.Position(fd.End()).Line - start + 1
			k := [2]string{f.path, name}
			if tb, ok := byName[k]; ok {
				seen[k] = true
				switch {
				case !isTable(fd):
					out = append(out, violation{"func", f.path + " " + name, n,
						fmt.Sprintf("%s:%d %s is exempt as a table of data (%s), but its body is code, not types, consts and one returned composite literal", f.path, start, name, tb.why)})
				case n <= bound:
					stale = append(stale, fmt.Sprintf("%s %s is %d lines, within the bound of %d; delete its entry from tables (%s)", f.path, name, n, bound, tb.why))
				default:
					exempt = append(exempt, fmt.Sprintf("%s:%d %s: %d lines, a table of data (%s)", f.path, start, name, n, tb.why))
				}
				continue
			}
			if n > bound {
				out = append(out, violation{"func", f.path + " " + name, n,
					fmt.Sprintf("%s:%d %s: %d lines, the bound is %d", f.path, start, name, n, bound)})
			}
		}
	}
	for _, tb := range tables {
		if !seen[[2]string{tb.file, tb.fn}] {
			stale = append(stale, fmt.Sprintf("%s declares no function %s; delete its entry from tables (%s)", tb.file, tb.fn, tb.why))
		}
	}
	return out, exempt, stale
}

// funcName is F for a function and T.M for a method of T or *T.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.ParenExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		default:
			return fmt.Sprintf("%T.%s", t, fd.Name.Name)
		}
	}
}

// isTable reports whether the function's body is data, not code: type or
// const declarations, then return and one composite literal (or its
// address) that holds no function literal.
func isTable(fd *ast.FuncDecl) bool {
	if fd.Body == nil || len(fd.Body.List) == 0 {
		return false
	}
	body := fd.Body.List
	for _, s := range body[:len(body)-1] {
		d, ok := s.(*ast.DeclStmt)
		if !ok {
			return false
		}
		if tok := d.Decl.(*ast.GenDecl).Tok; tok != token.TYPE && tok != token.CONST {
			return false
		}
	}
	ret, ok := body[len(body)-1].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return false
	}
	e := ret.Results[0]
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = u.X
	}
	if _, ok := e.(*ast.CompositeLit); !ok {
		return false
	}
	code := false
	ast.Inspect(e, func(n ast.Node) bool {
		_, fn := n.(*ast.FuncLit)
		code = code || fn
		return !code
	})
	return !code
}

// checkBudget reports every package the pattern names (module-relative,
// as the import rules name them) whose non-test files hold more than
// budget lines together.
func (tr *tree) checkBudget(pattern string, budget int) []violation {
	var dirs []string
	for dir := range tr.pkgs {
		if matches(pattern, dir) {
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) == 0 {
		return []violation{{"package", pattern, 0, pattern + ": no such package"}}
	}
	slices.Sort(dirs)
	var out []violation
	for _, dir := range dirs {
		pkg := tr.pkgs[dir]
		n := 0
		for _, f := range pkg.files {
			n += f.lines
		}
		if n > budget {
			out = append(out, violation{"package", dir, n,
				fmt.Sprintf("%s: %d lines in %d non-test files, the budget is %d", dir, n, len(pkg.files), budget)})
		}
	}
	return out
}

// checkShared reports every use, in a package's non-test files, of an
// exported package-level variable of another package of the module: a
// selector PKG.Name whose PKG is, in that file, the name of an import of
// the module's package whose files declare the variable Name. An
// import's name is the one it gives or the imported package's clause;
// a local declaration that shadows it is resolved by the parser.
func (tr *tree) checkShared() []violation {
	var out []violation
	for _, f := range tr.files() {
		imports := map[string]*srcPkg{}
		for _, imp := range f.ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			dir, ok := strings.CutPrefix(p, tr.module+"/")
			if p == tr.module {
				dir, ok = ".", true
			}
			pkg := tr.pkgs[dir]
			if !ok || pkg == nil {
				continue
			}
			name := pkg.name
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name == "." {
				line := tr.fset.Position(imp.Pos()).Line
				out = append(out, violation{"shared", f.path + " " + dir + ".", 0,
					fmt.Sprintf("%s:%d imports %s with a dot, which hides what it reads of it", f.path, line, dir)})
			}
			imports[name] = pkg
		}
		out = append(out, tr.sharedUses(f, imports)...)
	}
	return out
}

// sharedUses are the file's uses of the variables of the packages it
// imports, by their names in the file.
func (tr *tree) sharedUses(f *srcFile, imports map[string]*srcPkg) []violation {
	written := map[*ast.SelectorExpr]bool{}
	var out []violation
	ast.Inspect(f.ast, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			for _, l := range s.Lhs {
				if sel, ok := l.(*ast.SelectorExpr); ok {
					written[sel] = true
				}
			}
		case *ast.IncDecStmt:
			if sel, ok := s.X.(*ast.SelectorExpr); ok {
				written[sel] = true
			}
		case *ast.SelectorExpr:
			id, ok := s.X.(*ast.Ident)
			if !ok || id.Obj != nil {
				return true
			}
			pkg := imports[id.Name]
			if pkg == nil || !pkg.vars[s.Sel.Name] {
				return true
			}
			verb := "reads"
			if written[s] {
				verb = "writes"
			}
			line := tr.fset.Position(s.Pos()).Line
			out = append(out, violation{"shared", f.path + " " + pkg.dir + "." + s.Sel.Name, 0,
				fmt.Sprintf("%s:%d %s %s.%s, a package-level variable of %s", f.path, line, verb, id.Name, s.Sel.Name, pkg.dir)})
		}
		return true
	})
	return out
}

// applyPending sorts violations into the report: a violation a pending
// entry names is pending, unless it has grown past the entry's length;
// an entry that names no violation is stale.
func applyPending(vs []violation, pending []sizePend) report {
	var rep report
	used := map[[2]string]bool{}
	for _, v := range vs {
		i := slices.IndexFunc(pending, func(p sizePend) bool { return p.rule == v.rule && p.key == v.key })
		switch {
		case i < 0:
			rep.violations = append(rep.violations, v.msg)
		case pending[i].lines != 0 && v.lines > pending[i].lines:
			used[[2]string{v.rule, v.key}] = true
			rep.violations = append(rep.violations, fmt.Sprintf("%s; it has grown past the %d lines its pending entry allows (%s)", v.msg, pending[i].lines, pending[i].why))
		default:
			used[[2]string{v.rule, v.key}] = true
			rep.pending = append(rep.pending, fmt.Sprintf("%s (%s)", v.msg, pending[i].why))
		}
	}
	for _, p := range pending {
		if !used[[2]string{p.rule, p.key}] {
			rep.stale = append(rep.stale, fmt.Sprintf("%s %s breaks no rule now; delete its entry from sizePending (%s)", p.rule, p.key, p.why))
		}
	}
	return rep
}
