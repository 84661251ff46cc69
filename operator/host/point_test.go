package host_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// everyEventWorld is a stopped host whose journal holds every kind of
// event the audit weighs: funding of two controllers, calls charged,
// free, refused before reserving, not sent, uncertain then released and
// uncertain then redelivered, asks approved by a human, denied by a human
// and expired to their deny, and the checkpoints of a serving host. Its
// journal is one segment.
func everyEventWorld(t *testing.T) *hosttest.World {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 1000, Price: 5, RefusalPrice: 1, NoApp: true, SegmentSize: 1 << 20})
	clk := peertest.NewClock(time.Now().Add(time.Minute))
	w.Now = clk.Now
	hangUp := hangUpApp(t, w.Route.Upstream)
	w.Serve(t)
	cl := w.Dial(t)
	everyOutcome(t, w, cl, hangUp)
	adm := openAdmin(t, w.Store)
	defer adm.Close()
	do := adminDo(t, adm)
	other := peertest.NewPeer(t, "ctl2")
	do(admin.Request{Op: admin.OpControllerAdd, Name: "ctl2", UID: 4242, Keys: other.KeysFile(), Control: filepath.Join(w.Dir, "control-ctl2.sock")})
	do(admin.Request{Op: admin.OpPurseFund, Name: "ctl2", Amount: 77})
	for _, id := range []string{"d3", "d4"} {
		hosttest.WantAnswer(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"2+2"}`)))
	}
	do(admin.Request{Op: admin.OpAgentSet, Agent: &views.AgentSpec{Controller: "ctl", Agent: "alice", Approval: hosttest.HumansOnly()}})
	alice := "alice"
	w.Peer.Principal.Store(&alice)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a0", "alice", "c0")))
	if _, err := w.HostStore().AnswerAsk(tk.ID, hosttest.Human(msg.VerdictDeny, 1001, "ann")); err != nil {
		t.Fatal(err)
	}
	peertest.WantRefusal(t, hosttest.CollectCall(t, cl, "a0"), msg.CodeDenied, "")
	do(admin.Request{Op: admin.OpPurseFund, Name: "ctl", Amount: 10})
	allKindsApprovals(t, w, clk, do)
	allKindsNotSent(t, w, clk, do)
	w.Stop()
	return w
}

// markAt is the mark of journal record n of the store's journal, made
// from the place of record n+1 (in the same segment, where n's frame ends).
func markAt(t *testing.T, store string, n uint64) journal.Mark {
	t.Helper()
	j, _, err := hostlog.OpenReadOnly(store)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	m := j.Mark()
	var seg uint64
	err = j.Iterate(n, func(r journal.Record) error {
		if r.Seq == n {
			seg = r.Place.Segment
			return nil
		}
		if r.Place.Segment != seg {
			t.Fatalf("record %d starts a segment", r.Seq)
		}
		m.Seq, m.Head, m.Segment, m.End = n, r.Prev, seg, r.Place.Offset
		return errors.ErrUnsupported
	})
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("no record after %d: %v", n, err)
	}
	return m
}

// sameReport is a report as JSON, less what says where its records were
// read from.
func sameReport(t *testing.T, rep audit.ReceiptReport, err error) string {
	t.Helper()
	rep.Records, rep.Point, rep.Archives = 0, nil, nil
	b, jerr := json.Marshal(rep)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if err != nil {
		return string(b) + " error: " + err.Error()
	}
	return string(b)
}

func signWith(key *wire.HybridSigningKey) audit.SignFunc {
	return func(d []byte) ([]byte, error) { return wire.SignHybrid(key, d) }
}

// TestVerifiedPointEveryCut: for every record N of a journal with every
// kind of event, the verified point at N (as `history archive` makes it)
// and a verify of the records after it give exactly the report of a
// verify from record 1: what the point carries (open reservations, the
// purses' unsettled changes, the chain's end, the asks not done, the
// agents' counts) is all the rest needs.
func TestVerifiedPointEveryCut(t *testing.T) {
	w := everyEventWorld(t)
	key, err := operator.ReadKey(w.Store)
	if err != nil {
		t.Fatal(err)
	}
	full, _, ferr := audit.Verify(w.Store, audit.VerifyOptions{})
	if ferr != nil || len(full.Purses) != 2 || full.Receipts < 10 || full.Checkpoints == 0 {
		t.Fatalf("full verify: %+v %v", full, ferr)
	}
	want := sameReport(t, full, ferr)
	for n := uint64(1); n < full.Records; n++ {
		_, p, _, err := audit.ExportVerifiedPoint(w.Store, markAt(t, w.Store, n), signWith(key))
		if err != nil {
			t.Fatalf("point at %d: %v", n, err)
		}
		rep, _, err := audit.Verify(w.Store, audit.VerifyOptions{Point: p, PointName: "p"})
		if got := sameReport(t, rep, err); got != want {
			t.Fatalf("from the point at record %d:\n%s\nwant\n%s", n, got, want)
		}
		if rep.Point == nil || rep.Point.Through != n || rep.Records != full.Records {
			t.Fatalf("from the point at record %d: read %+v to %d", n, rep.Point, rep.Records)
		}
	}
	t.Logf("%d cut points over %d records, %d receipts", full.Records-1, full.Records, full.Receipts)
}

// runVerify runs `receipts verify` with args on store.
func runVerify(store string, args ...string) (int, string, string) {
	return hosttest.RunCLI(append([]string{"receipts", "verify", "--store", store}, args...)...)
}

// TestVerifiedPointRefused: a point whose file is altered, of another
// store, signed by another key, or whose mark the journal does not hold
// is refused with one line, exit 1; a verify with a finding saves none.
func TestVerifiedPointRefused(t *testing.T) {
	w, _ := paidWorldHost(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.point")
	if code, out, errs := runVerify(w.Store, "--save-point", good); code != 0 || !strings.Contains(out, "verified point at journal record ") {
		t.Fatalf("save-point: exit %d %q %q", code, out, errs)
	}
	if fi, err := os.Stat(good); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the point file: %v %v", fi, err)
	}
	b, _ := os.ReadFile(good)
	pub, _ := hostlog.ReadPub(w.Store)
	altered := filepath.Join(dir, "altered.point")
	a := append([]byte(nil), b...)
	a[len(a)-40] ^= 1 // in the signed content
	os.WriteFile(altered, a, 0o600)

	w2, _ := paidWorldHost(t)
	foreign := filepath.Join(dir, "foreign.point")
	if code, _, errs := runVerify(w2.Store, "--save-point", foreign); code != 0 {
		t.Fatal(errs)
	}
	pub2, _ := hostlog.ReadPub(w2.Store)
	otherKey, err := wire.GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	forged := filepath.Join(dir, "forged.point")
	m := markAt(t, w.Store, 3)
	_, fp, _, err := audit.ExportVerifiedPoint(w.Store, m, signWith(otherKey))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(forged, fp, 0o600)
	// a point of a copy of the store that went on past this journal's end
	ahead := filepath.Join(dir, "ahead.point")
	cp := filepath.Join(t.TempDir(), "copy")
	copyTree(t, w.Store, cp)
	hosttest.Append(t, cp, pub, hostlog.KindPurseFreeze, hostlog.Purse{Controller: "ctl"})
	if code, _, errs := runVerify(cp, "--save-point", ahead); code != 0 {
		t.Fatal(errs)
	}
	for _, c := range []struct{ file, want string }{
		{altered, "point " + altered + ": its signature does not verify under the store's operator key " + pub.KID().String()},
		{foreign, "point " + foreign + " is of another store ({\"operatorKid\":\"" + pub2.KID().String() + "\"}), not this one ({\"operatorKid\":\"" + pub.KID().String() + "\"})"},
		{forged, "point " + forged + ": its signature does not verify under the store's operator key " + pub.KID().String()},
		{ahead, "point " + ahead + ": its mark at journal record "},
	} {
		code, out, errs := runVerify(w.Store, "--from", c.file)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 || out != "" {
			t.Errorf("verify --from %s: exit %d, %q %q; want %q", filepath.Base(c.file), code, out, errs, c.want)
		}
	}
	// a finding: nothing saved, and said so
	hosttest.Append(t, w.Store, pub, hostlog.KindReserve, hostlog.Reserve{Attempt: "held", Controller: "ctl", Grant: w.Grant,
		Application: "app", Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: make([]byte, 32), Ledger: hosttest.NextLedger(t, w.Store)})
	none := filepath.Join(dir, "none.point")
	if code, _, errs := runVerify(w.Store, "--from", good, "--save-point", none); code != 1 || !strings.Contains(errs, "no verified point written to "+none) {
		t.Fatalf("a verify with a finding: exit %d %q", code, errs)
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Fatalf("a point was written: %v", err)
	}
}

// paidWorldHost is a stopped host that made three paid calls.
func paidWorldHost(t *testing.T) (*hosttest.World, *wire.HybridPublicKey) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 10})
	w.Serve(t)
	cl := w.Dial(t)
	for _, id := range []string{"a1", "a2", "a3"} {
		hosttest.WantAnswer(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"1+1"}`)))
	}
	w.Stop()
	return w, w.Pub
}

// copyTree copies the directory src to dst (new), files and modes.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case fi.IsDir():
			return os.MkdirAll(to, 0o700)
		case !fi.Mode().IsRegular():
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestVerifiedPointAfterArchive: `history archive` writes the verified
// point at the archive's mark beside it; with the archive moved away,
// receipts verify --from needs none of it and gives the report a verify
// reading the archive gives, while a verify without the point fails
// naming the archive. --save-point rolls the point forward.
func TestVerifiedPointAfterArchive(t *testing.T) {
	w := archiveWorld(t)
	w.Serve(t)
	answers := map[string][]byte{}
	serveCalls(t, w, answers, 0, 60)
	to := filepath.Join(t.TempDir(), "archive-1")
	out := historyArchive(t, w.Store, to)
	point := audit.PointFileOf(to)
	if !strings.Contains(out, "verified point at journal record ") || !strings.Contains(out, point) {
		t.Fatalf("history archive: %q", out)
	}
	if fi, err := os.Stat(point); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", point, fi, err)
	}
	serveCalls(t, w, answers, 60, 10)
	w.Stop()
	a, err := journal.OpenArchive(to)
	if err != nil {
		t.Fatal(err)
	}
	last := a.Archived().Last
	code, whole, stderr := runVerify(w.Store, "--json")
	if code != 0 {
		t.Fatalf("verify reading the archive: exit %d %q", code, stderr)
	}
	moved := filepath.Join(t.TempDir(), "away")
	if err := os.Rename(to, moved); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runVerify(w.Store)
	if code != 1 || !strings.Contains(stderr, "are archived in archive-1, which does not open") {
		t.Fatalf("verify without the archive or the point: exit %d %q", code, stderr)
	}
	code, out, stderr = runVerify(w.Store, "--from", point)
	if code != 0 || !strings.Contains(out, "journal records 1..") || !strings.Contains(out, "from the verified point "+point+", ") ||
		!strings.Contains(out, "from the live journal") || !strings.Contains(out, "70 receipts verified") {
		t.Fatalf("verify --from: exit %d %q %q", code, out, stderr)
	}
	code, fromPoint, stderr := runVerify(w.Store, "--from", point, "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var r1, r2 audit.ReceiptReport
	if json.Unmarshal([]byte(whole), &r1) != nil || json.Unmarshal([]byte(fromPoint), &r2) != nil {
		t.Fatalf("%q %q", whole, fromPoint)
	}
	if r2.Point == nil || r2.Point.Through < last {
		t.Fatalf("the point covers %+v, the archive to %d", r2.Point, last)
	}
	if a, b := sameReport(t, r1, nil), sameReport(t, r2, nil); a != b {
		t.Fatalf("from the point:\n%s\nreading the archive:\n%s", b, a)
	}
	next := filepath.Join(t.TempDir(), "next.point")
	if code, _, stderr := runVerify(w.Store, "--from", point, "--save-point", next); code != 0 {
		t.Fatal(stderr)
	}
	code, out, stderr = runVerify(w.Store, "--from", next)
	if code != 0 || !strings.Contains(out, "none after them in the live journal") {
		t.Fatalf("verify --from rolled forward: exit %d %q %q", code, out, stderr)
	}
}
