package installer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/journal"
)

// enrollSetup is a controller that ran with config A (its journal bound to
// A) and has config B installed now: the state enrollment expects.
type enrollSetup struct {
	f    *ctlFixture
	a, b []byte
}

func newEnrollSetup(t *testing.T) *enrollSetup {
	t.Helper()
	f := newCtlFixture(t, "ctl")
	s := &enrollSetup{f: f, a: f.configBytes(t), b: f.configBytes(t, 1234)}
	f.install(t, s.a)
	f.start(t, s.a).Close()
	f.install(t, s.b)
	return s
}

func enrollRequestFile(t *testing.T, expected, target string) string {
	t.Helper()
	req := fmt.Sprintf(`{"protocol": %q, "mode": "application", "expectedBindingSha256": %q, "targetConfigSha256": %q}`,
		EnrollProtocol, expected, target)
	return writeOperatorFile(t, "enroll.json", []byte(req))
}

// journalState opens the journal read-only: last seq and binding.
func (s *enrollSetup) journalState(t *testing.T) (uint64, string) {
	t.Helper()
	j, err := journal.Open(s.f.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	b := j.Binding()
	return j.LastSeq(), hexOf(b[:])
}

func decodeEnroll(t *testing.T, out string) EnrollResult {
	t.Helper()
	var r EnrollResult
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	return r
}

// TestEnrollAndRepeat: a good request rebinds the journal to the installed
// config, retaining both configs; the same request again prints the same
// result with changed false and writes nothing.
func TestEnrollAndRepeat(t *testing.T) {
	s := newEnrollSetup(t)
	ha, hb := binding(t, s.a), binding(t, s.b)
	req := enrollRequestFile(t, ha, hb)

	code, out, errs := run(t, s.f.env, "controller-enroll", req)
	if code != ExitOK || errs != "" {
		t.Fatalf("enroll: exit %d\n%s%s", code, out, errs)
	}
	r := decodeEnroll(t, out)
	want := EnrollResult{Protocol: EnrollProtocol, BindingBefore: ha, BindingAfter: hb, Seq: 2, Changed: true}
	if r != want {
		t.Fatalf("result %+v, want %+v", r, want)
	}
	last, bound := s.journalState(t)
	if last != 2 || bound != hb {
		t.Fatalf("journal: last seq %d, binding %s; want 2, %s", last, bound, hb)
	}
	// The rebind record keeps the config before and after, canonical.
	j, err := journal.Open(s.f.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var rb rebindBody
	err = j.Iterate(2, func(rec journal.Record) error {
		if rec.Kind != "rebind" {
			return fmt.Errorf("record 2 is %q", rec.Kind)
		}
		return cbor.Unmarshal(rec.Body, &rb)
	})
	j.Close()
	ca, _ := canonjson.CanonicalJSON(s.a)
	cb, _ := canonjson.CanonicalJSON(s.b)
	if err != nil || !bytes.Equal(rb.Before, ca) || !bytes.Equal(rb.After, cb) {
		t.Fatalf("rebind record: %v: before %q after %q", err, rb.Before, rb.After)
	}
	// The controller now starts with config B: its binding matches.
	s.f.start(t, s.b).Close()

	code, out2, errs := run(t, s.f.env, "controller-enroll", req)
	if code != ExitOK || errs != "" {
		t.Fatalf("repeat: exit %d\n%s%s", code, out2, errs)
	}
	want.Changed = false
	if r := decodeEnroll(t, out2); r != want {
		t.Fatalf("repeat result %+v, want %+v", r, want)
	}
	if last, _ := s.journalState(t); last != 2 {
		t.Fatalf("the repeat wrote: last seq %d", last)
	}
}

// TestEnrollRefusals: each mismatch is refused naming the field, and
// nothing is written.
func TestEnrollRefusals(t *testing.T) {
	s := newEnrollSetup(t)
	ha, hb := binding(t, s.a), binding(t, s.b)
	other := strings.Repeat("ab", 32)
	for _, c := range []struct {
		name, expected, target, want string
	}{
		{"wrong expected binding", other, hb, "expectedBindingSha256 " + other + " is not the journal's binding " + ha},
		{"wrong target hash", ha, other, "targetConfigSha256 " + other + " is not the installed config " + s.f.config + ", whose canonical SHA-256 is " + hb},
		{"target is the binding", hb, ha, "targetConfigSha256 " + ha + " is not the installed config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := enrollRequestFile(t, c.expected, c.target)
			code, out, errs := run(t, s.f.env, "controller-enroll", req)
			if code != ExitRefused || out != "" || !strings.Contains(errs, "refused: "+req+": "+c.want) {
				t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errs, c.want)
			}
			if last, bound := s.journalState(t); last != 1 || bound != ha {
				t.Fatalf("journal changed: %d %s", last, bound)
			}
		})
	}

	// After a good enrollment, a request from another binding to the same
	// target is no repeat: refused, naming the field.
	if code, out, errs := run(t, s.f.env, "controller-enroll", enrollRequestFile(t, ha, hb)); code != ExitOK {
		t.Fatalf("enroll: exit %d\n%s%s", code, out, errs)
	}
	req := enrollRequestFile(t, other, hb)
	code, out, errs := run(t, s.f.env, "controller-enroll", req)
	want := "refused: " + req + ": expectedBindingSha256 " + other + ": the journal is already bound to the target config, but the last rebind (seq 2) was from " + ha
	if code != ExitRefused || out != "" || !strings.Contains(errs, want) {
		t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errs, want)
	}
}

// TestEnrollControllerRunning: while the controller holds its journal's
// lock, enrollment is refused and nothing is written. The lock is a flock
// on its own open file description, which the installer's Open cannot take
// whether the holder is this process or another.
func TestEnrollControllerRunning(t *testing.T) {
	s := newEnrollSetup(t)
	ha, hb := binding(t, s.a), binding(t, s.b)
	// The controller runs with config A (as it would until restarted).
	j := s.f.start(t, s.a)
	defer j.Close()
	code, out, errs := run(t, s.f.env, "controller-enroll", enrollRequestFile(t, ha, hb))
	if code != ExitFail || out != "" || !strings.Contains(errs, "the controller is running (its journal "+s.f.cfg.JournalDir()+" is locked)") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if j.LastSeq() != 1 || j.Binding() != mustBinding(t, s.a) {
		t.Fatal("journal changed")
	}
}

func mustBinding(t *testing.T, b []byte) [32]byte {
	h, err := canonjson.Sum256(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// testBegin is the part of the controller's begin record its attempt index
// reads. A begin without a result is what a controller killed between
// journaling an attempt and its outcome leaves (see controller's
// crash_test.go); appended directly here.
type testBegin struct {
	Attempt     string `cbor:"attempt"`
	Tool        string `cbor:"tool"`
	Application string `cbor:"application"`
	RequestID   string `cbor:"requestId"`
	Route       string `cbor:"route"`
	Kind        string `cbor:"kind"`
}

// TestEnrollUnresolvedAttempt: an uncertain attempt blocks enrollment.
func TestEnrollUnresolvedAttempt(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	a, b := f.configBytes(t), f.configBytes(t, 1234)
	f.install(t, a)
	j := f.start(t, a)
	if _, err := j.Append("begin", testBegin{Attempt: "a1b2", Tool: "oracle_call", Application: "appliance",
		RequestID: "req-1", Route: "appliance", Kind: "invoke"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	f.install(t, b)
	code, out, errs := run(t, f.env, "controller-enroll", enrollRequestFile(t, binding(t, a), binding(t, b)))
	if code != ExitFail || out != "" || !strings.Contains(errs, "1 unresolved attempt(s) block enrollment (a1b2)") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	s := &enrollSetup{f: f}
	if last, bound := s.journalState(t); last != 2 || bound != binding(t, a) {
		t.Fatalf("journal changed: %d %s", last, bound)
	}
}

// TestEnrollRequestShape: the request is read as a private file of at most
// 8 KiB and decoded strictly; every refusal names the file and the field.
func TestEnrollRequestShape(t *testing.T) {
	s := newEnrollSetup(t)
	ha, hb := binding(t, s.a), binding(t, s.b)
	good := fmt.Sprintf(`{"protocol":%q,"mode":"application","expectedBindingSha256":%q,"targetConfigSha256":%q}`, EnrollProtocol, ha, hb)
	for _, c := range []struct{ name, body, want string }{
		{"unknown field", strings.TrimSuffix(good, "}") + `,"force":true}`, `unknown field "force"`},
		{"duplicate key", strings.TrimSuffix(good, "}") + `,"mode":"application"}`, `duplicate key "mode"`},
		{"wrong protocol", strings.Replace(good, EnrollProtocol, "steward-controller-enrollment-v2", 1), `protocol "steward-controller-enrollment-v2"`},
		{"wrong mode", strings.Replace(good, `"application"`, `"operator"`, 1), `mode "operator", want "application"`},
		{"upper-case hex", strings.Replace(good, ha, strings.ToUpper(ha), 1), "expectedBindingSha256 \"" + strings.ToUpper(ha) + "\" is not 64 lowercase hex digits"},
		{"missing target", fmt.Sprintf(`{"protocol":%q,"mode":"application","expectedBindingSha256":%q}`, EnrollProtocol, ha), `targetConfigSha256 "" is not 64`},
		{"trailing data", good + ` {}`, "unexpected '{' after the value"},
		{"not JSON", `protocol=v1`, "enrollment request refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := writeOperatorFile(t, "enroll.json", []byte(c.body))
			code, out, errs := run(t, s.f.env, "controller-enroll", req)
			if code != ExitRefused || out != "" || !strings.HasPrefix(errs, "steward-installer controller-enroll: refused: "+req+": ") || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errs, c.want)
			}
		})
	}
	if last, _ := s.journalState(t); last != 1 {
		t.Fatalf("a refused request wrote: last seq %d", last)
	}

	// The bound: exactly EnrollRequestLimit bytes is read (and enrolls);
	// one more is refused before it is parsed.
	pad := func(n int) []byte { return append([]byte(good), bytes.Repeat([]byte(" "), n-len(good))...) }
	over := writeOperatorFile(t, "enroll.json", pad(EnrollRequestLimit+1))
	code, out, errs := run(t, s.f.env, "controller-enroll", over)
	if code != ExitRefused || out != "" || !strings.Contains(errs, "refused: "+over+": too large: 8193 bytes, the limit is 8192") {
		t.Fatalf("one byte over: exit %d\n%s%s", code, out, errs)
	}
	if last, _ := s.journalState(t); last != 1 {
		t.Fatalf("an oversize request wrote: last seq %d", last)
	}
	at := writeOperatorFile(t, "enroll.json", pad(EnrollRequestLimit))
	if code, out, errs := run(t, s.f.env, "controller-enroll", at); code != ExitOK || decodeEnroll(t, out).Seq != 2 {
		t.Fatalf("at the limit: exit %d\n%s%s", code, out, errs)
	}

	// Root without sudo reads a file of its own: the operator's is refused.
	env := s.f.env
	env.SudoUID = ""
	if code, _, errs := run(t, env, "controller-enroll", at); os.Geteuid() == 0 && (code != ExitRefused || !strings.Contains(errs, at+": ") || !strings.Contains(errs, "owned by uid 4242")) {
		t.Fatalf("without SUDO_UID: exit %d %s", code, errs)
	}
	// A file the operator does not own is refused, naming it.
	if os.Geteuid() == 0 {
		chown(t, at, 0)
		if code, _, errs := run(t, s.f.env, "controller-enroll", at); code != ExitRefused || !strings.Contains(errs, at+": wrong owner") {
			t.Fatalf("root-owned request: exit %d %s", code, errs)
		}
	}
}

// TestEnrollNeedsAStartedController: no journal, or no config, is refused.
func TestEnrollNeedsAStartedController(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	a, b := f.configBytes(t), f.configBytes(t, 1234)
	req := enrollRequestFile(t, binding(t, a), binding(t, b))
	code, _, errs := run(t, f.env, "controller-enroll", req)
	if code != ExitFail || !strings.Contains(errs, f.config+": no controller config is installed") {
		t.Fatalf("no config: exit %d %s", code, errs)
	}
	f.install(t, b)
	code, _, errs = run(t, f.env, "controller-enroll", req)
	if code != ExitFail || !strings.Contains(errs, "the controller creates it at its first start") {
		t.Fatalf("no journal: exit %d %s", code, errs)
	}
	if _, err := os.Lstat(filepath.Join(f.cfg.StateDir, "journal")); err == nil {
		t.Fatal("enrollment created a journal")
	}
}
