package deps

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// module is the import path every rule's names are relative to.
const module = "github.com/stewardrt/steward"

// rule is one line of the table in deps_test.go.
type rule struct {
	pkg     string   // a package, "x/..." or "..." (module-relative)
	may     []string // when not nil: the only steward packages pkg may reach
	mayNot  []string // steward packages or trees pkg must not reach
	modules []string // when not nil: the only other modules pkg may reach
}

// pend is a known violation: the import edge from -> to (module-relative),
// or a package the rules name that does not exist yet.
type pend struct {
	from, to string
	missing  string
	why      string
}

// pkg is one package of `go list -deps -json`.
type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string // non-test imports, resolved
	Deps       []string // every package it links, recursively
	Module     *struct{ Path string }
}

// graph is every package ./... links, by import path.
type graph map[string]*pkg

var (
	loadOnce   sync.Once
	loaded     graph
	errLoading error
)

// loadGraph runs `go list -deps -json ./...` at the module's root (once
// per test binary).
func loadGraph(t *testing.T) graph {
	t.Helper()
	loadOnce.Do(func() { loaded, errLoading = listModule() })
	if errLoading != nil {
		t.Fatal(errLoading)
	}
	return loaded
}

func listModule() (graph, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "list", "-deps", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps -json ./... in %s: %w: %s", cmd.Dir, err, stderr.Bytes())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		g[p.ImportPath] = &p
	}
	if _, ok := g[module+"/journal"]; !ok {
		return nil, fmt.Errorf("go list in %s found no %s/journal: not this module", cmd.Dir, module)
	}
	return g, nil
}

// rel is path relative to the module, and whether it is the module's.
func rel(path string) (string, bool) {
	return strings.CutPrefix(path, module+"/")
}

// matches reports whether the module-relative name is the pattern p, or
// under it when p ends in "/...".
func matches(p, name string) bool {
	if p == "..." {
		return true
	}
	if tree, ok := strings.CutSuffix(p, "/..."); ok {
		return name == tree || strings.HasPrefix(name, tree+"/")
	}
	return name == p
}

// moduleOf is the module a non-standard package belongs to.
func (g graph) moduleOf(path string) string {
	if p := g[path]; p != nil && p.Module != nil {
		return p.Module.Path
	}
	return path
}

// report is the outcome of checking the rules.
type report struct {
	violations []string // broken rules: the test fails
	pending    []string // broken rules a pending entry explains: logged
	stale      []string // pending entries that explain nothing any more: the test fails
}

// check applies the rules to g. A violation is pending when it goes away
// with the pending edges cut from the graph, or is the absence of a
// pending missing package; a pending entry that explains no violation is
// stale.
func (g graph) check(rules []rule, pending []pend) report {
	cut := map[[2]string]bool{}
	missing := map[string]bool{}
	for _, p := range pending {
		if p.missing != "" {
			missing[p.missing] = true
		} else {
			cut[[2]string{module + "/" + p.from, module + "/" + p.to}] = true
		}
	}
	all := g.violations(rules, nil)
	real := g.violations(rules, cut)
	var rep report
	for _, v := range real {
		if name, ok := strings.CutSuffix(v, ": no such package"); ok && missing[name] {
			continue
		}
		rep.violations = append(rep.violations, v)
	}
	for _, v := range all {
		if !slices.Contains(real, v) {
			rep.pending = append(rep.pending, v)
		} else if name, ok := strings.CutSuffix(v, ": no such package"); ok && missing[name] {
			rep.pending = append(rep.pending, v)
		}
	}
	for _, p := range pending {
		switch {
		case p.missing != "":
			if !slices.Contains(all, p.missing+": no such package") {
				rep.stale = append(rep.stale, fmt.Sprintf("%s exists now; delete its entry from pending (%s)", p.missing, p.why))
			}
		case !g.hasEdge(module+"/"+p.from, module+"/"+p.to):
			rep.stale = append(rep.stale, fmt.Sprintf("%s no longer imports %s; delete its entry from pending (%s)", p.from, p.to, p.why))
		case len(g.violations(rules, map[[2]string]bool{{module + "/" + p.from, module + "/" + p.to}: true})) == len(all):
			rep.stale = append(rep.stale, fmt.Sprintf("%s -> %s breaks no rule now; delete its entry from pending (%s)", p.from, p.to, p.why))
		}
	}
	return rep
}

func (g graph) hasEdge(from, to string) bool {
	p := g[from]
	return p != nil && slices.Contains(p.Imports, to)
}

// violations lists, for every package each rule names, what it reaches
// against the rule, with the shortest import chain that reaches it; the
// edges in cut are left out of the graph.
func (g graph) violations(rules []rule, cut map[[2]string]bool) []string {
	var out []string
	for _, r := range rules {
		subjects := g.packages(r.pkg)
		if len(subjects) == 0 {
			out = append(out, r.pkg+": no such package")
			continue
		}
		allowed := closure(rules, r.may)
		for _, s := range subjects {
			out = append(out, g.reachAgainst(s, r, allowed, cut)...)
		}
	}
	return out
}

// packages are the module's packages the pattern names, sorted.
func (g graph) packages(pattern string) []string {
	var out []string
	for path := range g {
		if name, ok := rel(path); ok && matches(pattern, name) {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

// closure is the set of steward packages may allows: each listed package
// and, through its own rule's may, what it may reach. nil for nil.
func closure(rules []rule, may []string) map[string]bool {
	if may == nil {
		return nil
	}
	set := map[string]bool{}
	var add func(names []string)
	add = func(names []string) {
		for _, n := range names {
			if set[n] {
				continue
			}
			set[n] = true
			for _, r := range rules {
				if r.pkg == n && r.may != nil {
					add(r.may)
				}
			}
		}
	}
	add(may)
	return set
}

// reachAgainst walks from subject breadth-first. A package the rule
// refuses is reported with the chain to it and not walked further, so
// only the first refused package on each path is reported; one module is
// reported once.
func (g graph) reachAgainst(subject string, r rule, allowed map[string]bool, cut map[[2]string]bool) []string {
	var out []string
	prev := map[string]string{subject: ""}
	seenModule := map[string]bool{}
	queue := []string{subject}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g[p].Imports {
			// "C" (cgo) is in Imports but is no package of its own.
			if _, seen := prev[imp]; seen || g[imp] == nil || cut[[2]string{p, imp}] {
				continue
			}
			prev[imp] = p
			why := g.refusal(imp, r, allowed)
			if why == "" {
				queue = append(queue, imp)
				continue
			}
			if mod := g.moduleOf(imp); strings.HasPrefix(why, "module") {
				if seenModule[mod] {
					continue
				}
				seenModule[mod] = true
			}
			out = append(out, fmt.Sprintf("%s %s: %s", short(subject), why, chain(prev, imp)))
		}
	}
	return out
}

// refusal says why rule r refuses reaching path, or "".
func (g graph) refusal(path string, r rule, allowed map[string]bool) string {
	if name, ok := rel(path); ok {
		for _, p := range r.mayNot {
			if matches(p, name) {
				return "reaches " + name + ", which it must not (" + p + ")"
			}
		}
		if allowed != nil && !allowed[name] {
			return "reaches " + name + ", not among what it may reach " + fmt.Sprint(sortedKeys(allowed))
		}
		return ""
	}
	if p := g[path]; p == nil || p.Standard || r.modules == nil {
		return ""
	}
	if mod := g.moduleOf(path); !slices.Contains(r.modules, mod) {
		return "module " + mod + " is not among the modules it may link " + fmt.Sprint(r.modules)
	}
	return ""
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// chain is the import chain that reached to, as "a -> b -> c".
func chain(prev map[string]string, to string) string {
	var path []string
	for p := to; p != ""; p = prev[p] {
		path = append(path, short(p))
	}
	slices.Reverse(path)
	return strings.Join(path, " -> ")
}

// short names a steward package relative to the module.
func short(path string) string {
	if name, ok := rel(path); ok {
		return name
	}
	return path
}

// counts are what a command links.
type counts struct {
	dotted      int // packages with a '.' in their path (grep -c '\.')
	steward     int // of them, steward's own
	nonStandard int // packages outside the standard library and steward
}

// count counts what `go list -deps` prints for the package path: its Deps
// and itself.
func (g graph) count(path string) counts {
	var n counts
	for _, d := range append(slices.Clone(g[path].Deps), path) {
		if strings.Contains(d, ".") {
			n.dotted++
		}
		if _, ok := rel(d); ok {
			n.steward++
		} else if p := g[d]; p != nil && !p.Standard {
			n.nonStandard++
		}
	}
	return n
}
