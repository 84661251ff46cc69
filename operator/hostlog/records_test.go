package hostlog

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
)

// docKind is one kind as doc.go's list of record kinds gives it.
type docKind struct {
	kind string
	keys []string
}

// docRecordKinds parses the "# Record kinds" section of a package
// doc: a kind's line is a tab-indented comment line whose text starts with
// the kind, then its body keys in braces, which may run on over the
// indented lines after it.
func docRecordKinds(src string) ([]docKind, error) {
	const heading = "// # Record kinds"
	lines := strings.Split(src, "\n")
	start := slices.Index(lines, heading)
	if start < 0 {
		return nil, fmt.Errorf("no %q section", heading)
	}
	var out []docKind
	var keys strings.Builder // the key list of out's last kind, while its brace is open
	open := false
	for _, line := range lines[start+1:] {
		if strings.HasPrefix(line, "// # ") {
			break
		}
		text, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			continue
		}
		if text != "" && text[0] != ' ' { // a kind's line
			if open {
				break
			}
			kind, rest, _ := strings.Cut(text, " ")
			_, after, ok := strings.Cut(rest, "{")
			if !ok {
				return nil, fmt.Errorf("kind %s: no {keys} on its line", kind)
			}
			out = append(out, docKind{kind: kind})
			open, text = true, after
			keys.Reset()
		}
		if !open {
			continue // what the kind means
		}
		inside, _, closed := strings.Cut(text, "}")
		keys.WriteString(inside + " ")
		if !closed {
			continue
		}
		last := &out[len(out)-1]
		for _, k := range strings.Split(keys.String(), ",") {
			if k = strings.TrimSpace(k); k != "" {
				last.keys = append(last.keys, k)
			}
		}
		open = false
	}
	if open {
		return nil, fmt.Errorf("kind %s: its keys have no closing brace", out[len(out)-1].kind)
	}
	return out, nil
}

// bodyKeys are the CBOR keys of a kind's body type, in field order.
func bodyKeys(k kind) (reflect.Type, []string) {
	t := reflect.TypeOf(k.newBody()).Elem()
	return t, structKeys(t)
}

// structKeys are the CBOR keys of struct type t in field order, an
// embedded struct's in its place (CBOR flattens it, as encoding/json does).
func structKeys(t reflect.Type) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			keys = append(keys, structKeys(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("cbor"), ",")
		if name == "" {
			name = f.Name
		}
		if name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// recordKindDrift compares doc.go's list with the table both ways and
// returns every difference, one line each.
func recordKindDrift(doc []docKind, table []kind) []string {
	var drift []string
	inTable := map[string]kind{}
	for _, k := range table {
		inTable[k.name] = k
	}
	seen := map[string]bool{}
	for _, d := range doc {
		if seen[d.kind] {
			drift = append(drift, fmt.Sprintf("doc.go lists record kind %s twice", d.kind))
		}
		seen[d.kind] = true
		k, ok := inTable[d.kind]
		if !ok {
			drift = append(drift, fmt.Sprintf("doc.go lists record kind %s, which the table kinds does not have", d.kind))
			continue
		}
		if t, keys := bodyKeys(k); !slices.Equal(keys, d.keys) {
			drift = append(drift, fmt.Sprintf("doc.go gives %s the body {%s}, but its type %s has {%s}",
				d.kind, strings.Join(d.keys, ", "), t.Name(), strings.Join(keys, ", ")))
		}
	}
	for _, k := range table {
		if !seen[k.name] {
			drift = append(drift, fmt.Sprintf("the table kinds has record kind %s, which doc.go's list does not name", k.name))
		}
	}
	return drift
}

// TestDocListsEveryRecordKind: doc.go's list of record kinds is the table
// replay and verify use: the same kinds, each with its body type's keys.
func TestDocListsEveryRecordKind(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := docRecordKinds(string(src))
	if err != nil {
		t.Fatalf("doc.go: %v", err)
	}
	for _, d := range recordKindDrift(doc, kinds) {
		t.Error(d)
	}
	for _, k := range kinds {
		if k.visit == nil || k.newBody == nil {
			t.Errorf("record kind %s has no visit step or no body type: replay and the audit could not read it", k.name)
		}
	}
}

// TestRecordKindDriftFound: the doc check finds a kind missing from either
// side and a body whose keys changed, and refuses a list it cannot parse.
func TestRecordKindDriftFound(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src), "//\tpurse-thaw      {controller}\n", "", 1)
	edited = strings.Replace(edited, "//\tgrant-revoke    {id}", "//\tgrant-revoke    {id, why}\n//\tgrant-renew     {id}", 1)
	edited = strings.Replace(edited, "requestSha256, charge, consent", "requestSha256, consent, charge", 1)
	doc, err := docRecordKinds(edited)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"doc.go gives grant-revoke the body {id, why}, but its type GrantRevoke has {id}",
		"doc.go lists record kind grant-renew, which the table kinds does not have",
		"doc.go gives reserve the body {attempt, controller, grant, application, operation, kind, requestSha256, consent, charge, day, ledger}, " +
			"but its type Reserve has {attempt, controller, grant, application, operation, kind, requestSha256, charge, consent, day, ledger}",
		"the table kinds has record kind purse-thaw, which doc.go's list does not name",
	}
	if got := recordKindDrift(doc, kinds); !slices.Equal(got, want) {
		t.Errorf("drift:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	unclosed := strings.Replace(string(src), "day, ledger}\n", "day, ledger\n", 1)
	if _, err := docRecordKinds(unclosed); err == nil || err.Error() != "kind reserve: its keys have no closing brace" {
		t.Errorf("unclosed keys: %v", err)
	}
}

// TestReplayAndVerifyRefuseWhatTheTableDoesNot: a record of a kind the
// table does not name, or a body with a key its type lacks, is refused by
// Decode, which replay (package operator) and `receipts verify` (package
// operator/audit) read every record through. Their own halves, Open naming
// the record and verify calling it a receipt fault, are
// TestReplayRefusesWhatTheTableDoesNot (operator/store_test.go) and
// TestVerifyRefusesWhatTheTableDoesNot (operator/audit/verify_test.go).
func TestReplayAndVerifyRefuseWhatTheTableDoesNot(t *testing.T) {
	cases := []struct {
		name, kind string
		body       any
		want       string
	}{
		{"unknown kind", "grant-renew", GrantRevoke{ID: "g"}, `unknown record kind "grant-renew"`},
		{"unknown key", KindPurseFreeze, map[string]any{"controller": "ctl", "why": "x"},
			`wire: malformed: cbor decode: cbor: found unknown field at map element index 0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, err := wire.Marshal(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := Decode(journal.Record{Seq: 7, Kind: tc.kind, Body: body})
			if err == nil || err.Error() != tc.want || rec != nil {
				t.Errorf("decode: %v, %v\nwant: %s", rec, err, tc.want)
			}
			err = Visit(nil, journal.Record{Seq: 7, Kind: tc.kind, Body: body})
			if err == nil || err.Error() != tc.want {
				t.Errorf("visit: %v\nwant: %s", err, tc.want)
			}
		})
	}
}
