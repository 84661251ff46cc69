package audit_test

import (
	"testing"

	"github.com/stewardrt/steward/journal/journaltest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/hostlog"
)

// TestGoldenHostJournal: each version of the golden host journal (two runs of the dev
// stack: a controller pinned, its purse funded, a grant, a route, then
// four paid operations, each reserved, delivered and checkpointed) opens
// as an operator store and every receipt verifies: signatures, chain,
// checkpoints, the consents and the purse arithmetic, and the exported
// chain once more against the operator's public key alone.
func TestGoldenHostJournal(t *testing.T) {
	for _, v := range journaltest.Versions(t) {
		t.Run(v, func(t *testing.T) { checkGoldenHost(t, v) })
	}
}

func checkGoldenHost(t *testing.T, version string) {
	dir := journaltest.CopyGolden(t, version, "host")
	st, err := operator.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := audit.VerifyStore(dir)
	if err != nil {
		t.Fatalf("receipts verify: %v", err)
	}
	if rep.Receipts != 4 || rep.Checkpoints != 4 || rep.CoveredThrough != 4 || rep.Uncovered != 0 {
		t.Errorf("report: %+v", rep)
	}
	if len(rep.Purses) != 1 || rep.Purses[0].Controller != "dev" || rep.Purses[0].Funded != 1_000_000 ||
		rep.Purses[0].Charged != 2 || rep.Purses[0].Balance != 999_998 || rep.Purses[0].Receipts != 4 {
		t.Errorf("purses: %+v", rep.Purses)
	}
	exported, err := audit.ExportStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := audit.VerifyFile(exported, st.PublicKey()); err != nil || again.Head != rep.Head {
		t.Errorf("exported receipts: %+v, %v (head %s)", again, err, rep.Head)
	}

	if c := st.Controllers(); len(c) != 1 || c[0].Name != "dev" {
		t.Errorf("controllers: %+v", c)
	}
	p, err := st.PurseShow("dev")
	if err != nil || p.Funded != 1_000_000 || p.Balance != 999_998 || p.Charged != 2 || p.Holds != 0 || p.Frozen {
		t.Errorf("purse: %+v, %v", p, err)
	}
	if g := st.Grants(); len(g) != 1 || g[0].Controller != "dev" || g[0].Application != "appliance" ||
		g[0].Price != 1 || g[0].PerDay != 100_000 || g[0].Revoked {
		t.Errorf("grants: %+v", g)
	}
	// a route registered before route states (a first-version
	// route-register, no state record) is active
	if r := st.Routes(); len(r) != 1 || r[0].Route != "appliance" || r[0].Revision != 1 || r[0].Controller != "dev" ||
		r[0].State != hostlog.RouteActive || r[0].StateBy != "" {
		t.Errorf("routes: %+v", r)
	}
}
