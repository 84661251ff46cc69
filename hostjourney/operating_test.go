package hostjourney_test

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// TestOperatingDocIsTheJourney holds docs/OPERATING.md and the booted
// journey together, as TestReadme does for the README: every command in
// the document's sh blocks is a command of testdata/host.txtar, in the
// same order. The document writes them as root types them; the journey as
// `ct`:
//
//	runuser -u U -- CMD ARGS < FILE   is   ct -u U -stdin FILE CMD ARGS
//	CMD ARGS                          is   ct CMD ARGS
//
// A journey argument $VAR (a value the journey captured) stands for the
// document's placeholder in that place (UID, ATTEMPT). The journey may run
// more than the document shows (its checks), never less.
func TestOperatingDocIsTheJourney(t *testing.T) {
	doc := docCommands(t, "../docs/OPERATING.md")
	if len(doc) < 30 {
		t.Fatalf("only %d commands in docs/OPERATING.md's sh blocks", len(doc))
	}
	script := journeyCommands(t, "testdata/host.txtar")
	at := 0
	for _, d := range doc {
		found := false
		for ; at < len(script); at++ {
			if sameCommand(d.fields, script[at]) {
				found = true
				at++
				break
			}
		}
		if !found {
			t.Fatalf("docs/OPERATING.md line %d: %q is not in testdata/host.txtar after the previous command it shows (as %q)",
				d.line, d.text, strings.Join(d.fields, " "))
		}
	}
}

type docCommand struct {
	line   int
	text   string
	fields []string // in the journey's form
}

// docCommands reads the commands of the sh blocks, converted to the
// journey's form.
func docCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docCommand
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```sh":
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && line != "" && !strings.HasPrefix(line, "#"):
			out = append(out, docCommand{line: n, text: line, fields: asJourney(t, n, strings.Fields(line))})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// asJourney converts a command as root types it to the journey's form.
func asJourney(t *testing.T, n int, f []string) []string {
	out := []string{"ct"}
	var stdin string
	if len(f) >= 2 && f[len(f)-2] == "<" {
		stdin, f = f[len(f)-1], f[:len(f)-2]
	}
	if len(f) >= 4 && f[0] == "runuser" {
		if f[1] != "-u" || f[3] != "--" {
			t.Fatalf("docs/OPERATING.md line %d: write another account's command as runuser -u ACCOUNT -- CMD", n)
		}
		out = append(out, "-u", f[2])
		f = f[4:]
	}
	if stdin != "" {
		out = append(out, "-stdin", stdin)
	}
	return append(out, f...)
}

// journeyCommands returns the ct commands of a journey, each as fields,
// with a leading ! (an expected failure) dropped.
func journeyCommands(t *testing.T, path string) [][]string {
	t.Helper()
	a, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(string(a.Comment), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "!" {
			f = f[1:]
		}
		if len(f) > 0 && f[0] == "ct" {
			out = append(out, f)
		}
	}
	return out
}

func sameCommand(doc, script []string) bool {
	if len(doc) != len(script) {
		return false
	}
	for i := range doc {
		if doc[i] != script[i] && !strings.HasPrefix(script[i], "$") {
			return false
		}
	}
	return true
}
