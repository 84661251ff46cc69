package deps

import (
	"slices"
	"testing"
)

// testGraph is a small module: a -> b -> c, b -> ext.org/m/p (a package of
// another module), c -> fmt.
func testGraph() graph {
	m := func(name string) string { return module + "/" + name }
	return graph{
		m("a"):        {ImportPath: m("a"), Imports: []string{m("b")}},
		m("b"):        {ImportPath: m("b"), Imports: []string{m("c"), "ext.org/m/p"}},
		m("c"):        {ImportPath: m("c"), Imports: []string{"C", "fmt"}},
		"ext.org/m/p": {ImportPath: "ext.org/m/p", Module: &struct{ Path string }{"ext.org/m"}},
		"fmt":         {ImportPath: "fmt", Standard: true},
	}
}

// TestCheckerReportsChains: each kind of rule reports what it refuses with
// the shortest chain to it, and what it allows passes.
func TestCheckerReportsChains(t *testing.T) {
	g := testGraph()
	for _, c := range []struct {
		r    rule
		want []string
	}{
		{rule{pkg: "a", mayNot: []string{"c"}}, []string{"a reaches c, which it must not (c): a -> b -> c"}},
		{rule{pkg: "b", may: none}, []string{"b reaches c, not among what it may reach []: b -> c"}},
		{rule{pkg: "a", may: []string{"b"}}, []string{"a reaches c, not among what it may reach [b]: a -> b -> c"}},
		{rule{pkg: "a", modules: []string{"other.org/x"}},
			[]string{"a module ext.org/m is not among the modules it may link [other.org/x]: a -> b -> ext.org/m/p"}},
		{rule{pkg: "...", mayNot: []string{"c/..."}},
			[]string{"a reaches c, which it must not (c/...): a -> b -> c", "b reaches c, which it must not (c/...): b -> c"}},
		{rule{pkg: "z"}, []string{"z: no such package"}},
		{rule{pkg: "a", may: []string{"b", "c"}, modules: []string{"ext.org/m"}}, nil},
	} {
		got := g.violations([]rule{c.r}, nil)
		if !slices.Equal(got, c.want) {
			t.Errorf("%+v:\n got %q\nwant %q", c.r, got, c.want)
		}
	}
	// may reaches through the rules of what it lists.
	rules := []rule{{pkg: "a", may: []string{"b"}}, {pkg: "b", may: []string{"c"}}}
	if got := g.violations(rules, nil); len(got) != 0 {
		t.Errorf("a may reach b, b may reach c: %q", got)
	}
}

// TestCheckerPending: a pending edge turns the violations it causes into
// pending ones, and is stale once it is gone or causes nothing; so is a
// pending missing package once it exists.
func TestCheckerPending(t *testing.T) {
	g := testGraph()
	rules := []rule{{pkg: "a", mayNot: []string{"c"}}, {pkg: "z", may: none}}
	rep := g.check(rules, []pend{{from: "a", to: "b", why: "w"}, {missing: "z", why: "y"}})
	if len(rep.violations) != 0 || len(rep.stale) != 0 ||
		!slices.Equal(rep.pending, []string{"a reaches c, which it must not (c): a -> b -> c", "z: no such package"}) {
		t.Fatalf("pending: %+v", rep)
	}
	// Not explained by the pending edge: b -> c stays a violation.
	rep = g.check([]rule{{pkg: "b", mayNot: []string{"c"}}}, []pend{{from: "a", to: "b", why: "w"}})
	if !slices.Equal(rep.violations, []string{"b reaches c, which it must not (c): b -> c"}) ||
		!slices.Equal(rep.stale, []string{"a -> b breaks no rule now; delete its entry from pending (w)"}) {
		t.Fatalf("b -> c with a -> b pending: %+v", rep)
	}
	// The edge is gone.
	rep = g.check(rules[:1], []pend{{from: "a", to: "c", why: "w"}})
	if !slices.Equal(rep.stale, []string{"a no longer imports c; delete its entry from pending (w)"}) || len(rep.violations) != 1 {
		t.Fatalf("pending a -> c: %+v", rep)
	}
	// The missing package exists.
	rep = g.check(nil, []pend{{missing: "b", why: "y"}})
	if !slices.Equal(rep.stale, []string{"b exists now; delete its entry from pending (y)"}) {
		t.Fatalf("pending missing b: %+v", rep)
	}
}

// TestRulesNamePackages: every package a rule names exists or is pending
// as missing, so a rename cannot silently turn a rule off, and every
// module it allows is one the module links.
func TestRulesNamePackages(t *testing.T) {
	g := loadGraph(t)
	known := map[string]bool{}
	for _, p := range g {
		if p.Module != nil {
			known[p.Module.Path] = true
		}
	}
	names := func(r rule) []string {
		return append(append([]string{r.pkg}, r.may...), r.mayNot...)
	}
	for _, r := range rules {
		for _, n := range names(r) {
			if len(g.packages(n)) == 0 && !slices.ContainsFunc(pending, func(p pend) bool { return p.missing == n }) {
				t.Errorf("rule %q names %q, which matches no package", r.pkg, n)
			}
		}
		for _, m := range r.modules {
			if !known[m] {
				t.Errorf("rule %q allows module %q, which nothing in the module links", r.pkg, m)
			}
		}
	}
}
