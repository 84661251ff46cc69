package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// TestClockAcceptPayerDay: the controller's clock is set a year forward
// and the payer consents on that day (10 of the day's 12 credits: one
// call settled, one in flight); the clock is set back and the payer keeps
// counting on the forward day. clock accept journals its record and the
// payer counts on today from then on with nothing refilled (2 credits
// left: a call of 5 is refused naming today), the consent in flight still
// settles against today, a second accept is refused with nothing
// journaled, and a replay of the journal counts on today too.
func TestClockAcceptPayerDay(t *testing.T) {
	rig := newConsentRig(t, &ctlconf.Payer{MaxPerCall: 10, PerDay: 12}, 5)
	c := rig.c
	j, err := journal.Open(filepath.Join(t.TempDir(), "journal"), journal.Options{Owner: ledger.JournalOwner, Format: ledger.JournalFormat, Config: []byte(`{}`), SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c.j = j
	today := rig.now
	rig.now = today.AddDate(1, 0, 0)
	rig.grant = signTestGrant(t, rig.host, 5, rig.now)
	consent := func(id string) (string, any) {
		t.Helper()
		r := rig.begin(t, id, "uid:1000", 5)
		_, b, _ := c.led.Open(id)
		if _, err := j.Append(ledger.KindBegin, b); err != nil {
			t.Fatal(err)
		}
		return c.reserve(r)
	}
	for _, id := range []string{"f1", "f2"} {
		if typ, body := consent(id); typ != msg.TypeConsent {
			t.Fatalf("%s on the forward day: %s %+v", id, typ, body)
		}
	}
	c.pay.settle("f1", &ledger.Result{Attempt: "f1", Outcome: msg.StateDefinite, Charge: 5, Receipt: []byte{1}})

	rig.now = today // the wall clock corrected
	rig.grant = signTestGrant(t, rig.host, 5, rig.now)
	if d := c.pay.today(rig.now); d != utcDay(today.AddDate(1, 0, 0)) {
		t.Fatalf("before the accept the payer counts on %s", dayString(d))
	}
	rep, err := c.AcceptClock()
	if err != nil || rep.Day != "2030-01-02" || rep.Was != "2031-01-02" {
		t.Fatalf("clock accept: %+v %v", rep, err)
	}
	if _, left, day, _ := c.pay.budget("uid:1000"); left != 2 || day != utcDay(today) {
		t.Fatalf("after the accept: %d left on %s, want 2 on 2030-01-02", left, dayString(day))
	}
	typ, body := consent("n1")
	wantRefused(t, typ, body, msg.CodePayerLimit, "the payer's budget of 12 credits a day has 2 left today (UTC 2030-01-02), this call asks for 5; it refills at 00:00 UTC")
	// The consent in flight since the forward day settles against today.
	c.pay.settle("f2", &ledger.Result{Attempt: "f2", Outcome: msg.StateNotSent, Receipt: []byte{2}})
	if typ, body := consent("n2"); typ != msg.TypeConsent {
		t.Fatalf("n2 once f2 settled for nothing: %s %+v", typ, body)
	}

	seq := j.LastSeq()
	_, err = c.AcceptClock()
	const notBehind = "refused: the wall clock's UTC day (2030-01-02) is not behind the latest day the controller recorded (2030-01-02): there is nothing to accept, and nothing was recorded"
	if err == nil || err.Error() != notBehind || j.LastSeq() != seq {
		t.Fatalf("a second accept: %v (%d records)", err, j.LastSeq()-seq)
	}

	// Replayed: the latest day is today, and the attempts begun on the
	// forward day and found without a result count on it.
	l := ledger.New()
	if err := l.Replay(j); err != nil {
		t.Fatal(err)
	}
	day, _, unsettled := l.Spending()
	if day != utcDay(today) || unsettled["uid:1000"] != 4 {
		t.Fatalf("replayed: day %s, unsettled %v; want 2030-01-02 and 4", dayString(day), unsettled)
	}
}

// TestClockAcceptCLI: on a stopped controller whose journal recorded a
// begin a day ahead, `clock accept` accepts the wall clock's day (exit 0)
// and a second one is refused (exit 2), as is a usage error; the same
// through the running controller's foreground socket.
func TestClockAcceptCLI(t *testing.T) {
	s := newStack(t, stackOpts{})
	raw, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(s.cfg, raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	today := utcDay(time.Now())
	b := ledger.Begin{Attempt: "f1", Tool: ToolCall, Application: "appliance", RequestID: "r1", Agent: "uid:1000", Principal: "uid:1000", Day: today + 1}
	if _, err := j.Append(ledger.KindBegin, b); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("clock", "accept", "--config", s.cfgPath)
	want := fmt.Sprintf("clock accepted: the payer counts on %s from now on (it had recorded %s); that day's spending carries to it\n", dayString(today), dayString(today+1))
	if code != ExitOK || out != want {
		t.Fatalf("clock accept: exit %d %q %q", code, out, errs)
	}
	code, out, errs = runCLI("clock", "accept", "--config", s.cfgPath)
	refusal := fmt.Sprintf("steward-controller: refused: the wall clock's UTC day (%s) is not behind the latest day the controller recorded (%s): there is nothing to accept, and nothing was recorded\n", dayString(today), dayString(today))
	if code != ExitRefused || out != "" || !strings.HasSuffix(errs, refusal) { // after the log lines of the open
		t.Fatalf("a second accept: exit %d %q %q", code, out, errs)
	}
	if code, _, _ := runCLI("clock", "set", "--config", s.cfgPath); code != ExitRefused {
		t.Fatalf("clock set: exit %d", code)
	}

	// Through the running controller's foreground socket: a begin two days
	// ahead, the daemon started on it, accepted (exit 0), then refused.
	j, err = openJournal(s.cfg, raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	b.Attempt, b.RequestID, b.Day = "f2", "r2", today+2
	if _, err := j.Append(ledger.KindBegin, b); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	s.startController()
	defer s.stopController()
	want = fmt.Sprintf("clock accepted: the payer counts on %s from now on (it had recorded %s); that day's spending carries to it\n", dayString(today), dayString(today+2))
	if code, out, errs := runCLI("clock", "accept", "--config", s.cfgPath); code != ExitOK || out != want {
		t.Fatalf("clock accept through the daemon: exit %d %q %q", code, out, errs)
	}
	// Refused now, naming today as the running payer's day.
	if code, _, errs := runCLI("clock", "accept", "--config", s.cfgPath); code != ExitRefused || !strings.HasSuffix(errs, refusal) {
		t.Fatalf("a second accept through the daemon: exit %d %q", code, errs)
	}
}
