package deps

import "testing"

// The size rules, beside the import rules (issue P2.1 item 3): over the
// module's non-test .go files (cmd/ included; _test.go files, testdata
// and other modules left out),
//
//   - no file is over fileBound lines;
//   - no top-level function or method is over funcBound lines, counted
//     from the line of its func keyword to the line of its closing brace,
//     both included (its doc comment is not counted), tables of data aside
//     (tables, below);
//   - no package that budgets names is over packageBudget lines, its
//     non-test files together.
//
// An offender is named with its length in the failure.
const (
	fileBound     = 600
	funcBound     = 100
	packageBudget = 6000
)

// budgets are the packages (patterns, as the import rules name them) held
// to packageBudget: the operator and the packages it is split into.
var budgets = []string{"operator/..."}

// tables are the functions exempt from funcBound because they are tables
// of data: the body is type or const declarations and then return and one
// composite literal with no function literal in it. An entry for a
// function that is not one fails, and an entry for a function that is gone
// or within the bound is stale and fails.
var tables = []table{
	{"appliance/catalog.go", "definitions", "the descriptor, input schema and examples of each of the appliance's operations"},
}

// sizePending are the size and shared-state rules today's tree breaks.
// Their violations are logged, not failed, as long as the offender is no
// longer than the entry's lines; an entry whose violation no longer occurs
// fails the test, so whoever fixes it must delete the entry.
var sizePending = []sizePend{}

// TestFileSizes: no non-test file over fileBound lines.
func TestFileSizes(t *testing.T) {
	tr := loadModuleTree(t)
	reportRule(t, "file", tr.checkFiles(fileBound))
}

// TestFunctionSizes: no top-level function over funcBound lines, tables
// of data aside.
func TestFunctionSizes(t *testing.T) {
	tr := loadModuleTree(t)
	vs, exempt, stale := tr.checkFuncs(funcBound, tables)
	reportRule(t, "func", vs)
	for _, e := range exempt {
		t.Logf("exempt: %s", e)
	}
	for _, s := range stale {
		t.Errorf("exemption is stale: %s", s)
	}
}

// TestPackageBudgets: no package budgets names over packageBudget lines.
func TestPackageBudgets(t *testing.T) {
	tr := loadModuleTree(t)
	var vs []violation
	for _, b := range budgets {
		vs = append(vs, tr.checkBudget(b, packageBudget)...)
	}
	reportRule(t, "package", vs)
}

// TestSharedState: no package reads or writes, in non-test code, an
// exported package-level variable of another package of the module (a
// var, not a const or func), so no package's mutable state is another's.
// Error sentinels (Err and an upper-case letter, errors.Is targets such
// as journal.ErrLocked) are exempt.
func TestSharedState(t *testing.T) {
	tr := loadModuleTree(t)
	reportRule(t, "shared", tr.checkShared())
}

// reportRule fails the rule's violations and stale pending entries and
// logs its pending ones.
func reportRule(t *testing.T, rule string, vs []violation) {
	t.Helper()
	var pending []sizePend
	for _, p := range sizePending {
		if p.rule == rule {
			pending = append(pending, p)
		}
	}
	rep := applyPending(vs, pending)
	for _, v := range rep.violations {
		t.Errorf("%s rule broken: %s", rule, v)
	}
	for _, p := range rep.pending {
		t.Logf("pending: %s", p)
	}
	for _, s := range rep.stale {
		t.Errorf("pending entry is stale: %s", s)
	}
}

// TestSizePendingRules: every pending entry names one of the rules, so a
// misspelt rule cannot hide an entry from its test.
func TestSizePendingRules(t *testing.T) {
	for _, p := range sizePending {
		switch p.rule {
		case "file", "func", "package", "shared":
		default:
			t.Errorf("pending entry %q names no rule: %q", p.key, p.rule)
		}
	}
}
