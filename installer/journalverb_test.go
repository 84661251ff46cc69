package installer

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stewardrt/steward/canonjson"
)

func TestControllerJournal(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	a, b := f.configBytes(t), f.configBytes(t, 7)
	f.install(t, a)
	j := f.start(t, a)
	if _, err := j.Append("begin", testBegin{Attempt: "a1", Tool: "oracle_call", Application: "appliance", RequestID: "r1", Route: "appliance", Kind: "invoke"}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Rebind(canonical(t, b)); err != nil {
		t.Fatal(err)
	}

	j.Close()
	f.install(t, b)

	code, out, errs := run(t, f.env, "controller-journal")
	if code != ExitOK || errs != "" {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	type line struct {
		Seq  uint64         `json:"seq"`
		Prev string         `json:"prev"`
		Kind string         `json:"kind"`
		At   int64          `json:"at"`
		Body map[string]any `json:"body"`
	}
	var recs []line
	for _, l := range lines {
		var r line
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		recs = append(recs, r)
	}
	if recs[0].Kind != "bind" || recs[0].Prev != strings.Repeat("0", 64) || recs[0].Body["owner"] != "steward-controller" {
		t.Errorf("record 1: %+v", recs[0])
	}
	if recs[1].Kind != "begin" || recs[1].Body["attempt"] != "a1" || recs[1].Body["requestId"] != "r1" || recs[1].At <= 0 {
		t.Errorf("record 2: %+v", recs[1])
	}
	// Byte strings are hex: the rebind's configs are the canonical JSON,
	// and its binding their hash.
	ca, _ := canonjson.CanonicalJSON(a)
	cb, _ := canonjson.CanonicalJSON(b)
	r3 := recs[2]
	if r3.Seq != 3 || r3.Kind != "rebind" || r3.Body["before"] != hex.EncodeToString(ca) || r3.Body["after"] != hex.EncodeToString(cb) ||
		r3.Body["binding"] != binding(t, b) {
		t.Errorf("record 3: %+v", r3)
	}

	// --from starts there; past the end prints nothing.
	code, out, _ = run(t, f.env, "controller-journal", "--from", "3")
	if code != ExitOK || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, `{"seq":3,`) {
		t.Fatalf("--from 3: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, f.env, "controller-journal", "--from", "4")
	if code != ExitOK || out != "" {
		t.Fatalf("--from 4: exit %d %q", code, out)
	}
	// Read-only: it works while the controller holds the lock.
	jj := f.start(t, b)
	defer jj.Close()
	if code, out, errs := run(t, f.env, "controller-journal", "--from", "2"); code != ExitOK || strings.Count(out, "\n") != 2 {
		t.Fatalf("while running: exit %d\n%s%s", code, out, errs)
	}
}

func TestCBORToJSON(t *testing.T) {
	for _, c := range []struct {
		hex, want string
	}{
		{"a2616101616242ff00", `{"a":1,"b":"ff00"}`},
		{"83f5f6f7", `[true,null,null]`},
		{"3903e7", `-1000`},
		{"1bffffffffffffffff", `18446744073709551615`},
		{"c249010000000000000000", `18446744073709551616`},
		{"d8 2a 43 010203", `{"tag":42,"value":"010203"}`},
		{"fb3ff8000000000000", `1.5`},
	} {
		b, _ := hex.DecodeString(strings.ReplaceAll(c.hex, " ", ""))
		got, err := cborToJSON(b)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.hex, got, err, c.want)
		}
	}
	for _, bad := range []string{"a1010203" /* int key */, "fb7ff8000000000000" /* NaN */, "a2616101616102" /* duplicate key */, "5f41004100ff" /* indefinite */, "" /* empty */} {
		b, _ := hex.DecodeString(bad)
		if got, err := cborToJSON(b); err == nil {
			t.Errorf("%s: %s, want an error", bad, got)
		}
	}
}
