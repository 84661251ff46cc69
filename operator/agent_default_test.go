package operator

import (
	"bytes"
	"testing"

	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// TestDefaultRecordSnapshot: the default record ("*") is a limits record
// like any other: its second revision replaces its first, a replay and a
// snapshot both carry it, and every principal without a record of its
// own meets it, while one with a record meets that one and "" (an
// attempt reserved before agents) none.
func TestDefaultRecordSnapshot(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": nil})
	for _, n := range []uint64{3, 1} {
		if v, err := a.s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: msg.DefaultAgent, CallsPerDay: &n}); err != nil || v.Agent != msg.DefaultAgent {
			t.Fatalf("set the default: %+v %v", v, err)
		}
	}
	check := func(when string) {
		t.Helper()
		st := a.s.st
		def := st.limitsOf("ctl", "zed")
		if def == nil || def.Limits.Agent != msg.DefaultAgent || def.Limits.Revision != 2 || *def.Limits.CallsPerDay != 1 {
			t.Fatalf("%s: zed meets %+v", when, def)
		}
		if al := st.limitsOf("ctl", "alice"); al == nil || al.Limits.Agent != "alice" {
			t.Fatalf("%s: alice meets %+v", when, al)
		}
		if al := st.limitsOf("ctl", ""); al != nil {
			t.Fatalf("%s: no agent meets %+v", when, al)
		}
		if al := st.limitsOf("ctl2", "zed"); al != nil {
			t.Fatalf("%s: another controller's principal meets %+v", when, al)
		}
	}
	check("set")
	signed := bytes.Clone(a.s.st.limitsOf("ctl", "zed").Signed)
	a.reopen()
	check("replayed")
	if _, err := a.s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	a.reopen()
	check("from the snapshot")
	if !bytes.Equal(a.s.st.limitsOf("ctl", "zed").Signed, signed) {
		t.Fatal("the snapshot's default record is not the signed record")
	}
	if err := a.s.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	hist := ro.st.hist // the index is no part of a snapshot
	ro.st.hist = nil
	wantSameState(t, ro.st)
	ro.st.hist = hist
	ro.Close()
	a.open()
}
