package hostjourney_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
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
// document's placeholder in that place, a word of capitals (UID, ATTEMPT,
// ASK); a $VAR inside an argument (sed's s/REPLACES/$REV1/) is the same
// shell variable in the document, which says where its value comes from.
// Fields are split at blanks outside single quotes, as the shell and
// testscript split them, so a quoted `sh -c '... < FILE'` reads no standard
// input of the document's. The journey may run more than the document
// shows (its checks), never less.
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
			out = append(out, docCommand{line: n, text: line, fields: asJourney(t, n, shellFields(line))})
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
		f := shellFields(line)
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
		if doc[i] != script[i] && !(strings.HasPrefix(script[i], "$") && placeholder.MatchString(doc[i])) {
			return false
		}
	}
	return true
}

// placeholder is how the document writes a value the journey captures.
var placeholder = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// shellFields splits a command line at blanks, as strings.Fields does, but
// keeps a single-quoted span (quotes included) inside one field, as the
// shell and testscript do.
func shellFields(line string) []string {
	var out []string
	var cur strings.Builder
	in, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted = !quoted
			cur.WriteRune(r)
			in = true
		case !quoted && (r == ' ' || r == '\t'):
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// TestOperatingDocShowsTheJourneysFiles holds the files docs/OPERATING.md
// shows to the ones the journey uses, as TestOperatingDocIsTheJourney
// holds its commands (checkDocFiles): a block of the document that is no
// file of testdata/host.txtar fails, naming its line, and so does a file
// the document names that it does not show.
func TestOperatingDocShowsTheJourneysFiles(t *testing.T) {
	doc, err := os.ReadFile("../docs/OPERATING.md")
	if err != nil {
		t.Fatal(err)
	}
	a, err := txtar.ParseFile("testdata/host.txtar")
	if err != nil {
		t.Fatal(err)
	}
	shown, problems := checkDocFiles(string(doc), a, journeyCommands(t, "testdata/host.txtar"))
	for _, p := range problems {
		t.Errorf("docs/OPERATING.md %s", p)
	}
	// What an operator cannot go without: the config (the first and the
	// changed one), the enrollment request and the route.
	for _, name := range []string{"controller.json", "controller-2.json", "enroll.json", "route.json"} {
		if _, ok := shown[name]; !ok {
			t.Errorf("docs/OPERATING.md shows no block that is the journey's %s", name)
		}
	}
}

// writtenFiles are the files docs/OPERATING.md may name without showing
// them: steward writes them itself, from what the document does show.
var writtenFiles = map[string]string{
	"config.json":   "the installed controller config, /var/lib/steward-controller/config.json, which controller-config writes from the file it is given",
	"host-pin.json": "the pin controller-pin-host writes",
}

// fileName finds a name the document uses for a JSON or JSON lines file.
var fileName = regexp.MustCompile(`[A-Za-z0-9_][A-Za-z0-9_.-]*\.jsonl?\b`)

// checkDocFiles checks the fenced blocks of doc, a markdown document,
// against archive a, a journey whose ct commands are script, and returns
// the files of a that doc shows (each at the line of its first block) and
// what is wrong, each naming a line of doc:
//
//   - every block is sh (commands: TestOperatingDocIsTheJourney), json or
//     jsonl (files): a block of another kind would escape both checks;
//   - every json or jsonl block is, byte for byte, a file of a (its lines,
//     each ending in a newline), or passes the one named comparison,
//     mcpClientConfig;
//   - every file of a that doc names, and every name of a .json or .jsonl
//     file it uses, is a file of a that a block shows, or one of
//     writtenFiles.
func checkDocFiles(doc string, a *txtar.Archive, script [][]string) (shown map[string]int, problems []string) {
	files := map[string][]byte{}
	for _, f := range a.Files {
		files[f.Name] = f.Data
	}
	shown = map[string]int{}
	var block bytes.Buffer
	lang, start := "", 0
	lines := strings.Split(doc, "\n")
	for i, raw := range lines {
		n, line := i+1, strings.TrimSpace(raw)
		switch {
		case lang == "" && strings.HasPrefix(line, "```"):
			lang, start = strings.TrimPrefix(line, "```"), n
			block.Reset()
			if lang != "sh" && lang != "json" && lang != "jsonl" {
				problems = append(problems, fmt.Sprintf("line %d: a block of kind %q: this document's blocks are sh (commands the journey runs), json or jsonl (files it uses)", n, lang))
			}
		case lang != "" && line == "```":
			if lang == "json" || lang == "jsonl" {
				if p := checkBlock(block.Bytes(), files, script, start, shown); p != "" {
					problems = append(problems, p)
				}
			}
			lang = ""
		case lang != "":
			block.WriteString(raw + "\n")
		}
	}
	if lang != "" {
		problems = append(problems, fmt.Sprintf("line %d: a block that never ends", start))
	}
	for i, line := range lines {
		for _, name := range namedFiles(line, files) {
			if _, ok := shown[name]; ok {
				continue
			}
			if _, ok := files[name]; ok {
				problems = append(problems, fmt.Sprintf("line %d names %s, a file of the journey, but no block shows it", i+1, name))
			} else if _, ok := writtenFiles[name]; !ok {
				problems = append(problems, fmt.Sprintf("line %d names %s, which is neither a file of the journey nor one steward writes (writtenFiles)", i+1, name))
			}
		}
	}
	return shown, problems
}

// checkBlock checks one json or jsonl block, starting at line n, and
// records the file it shows; it returns what is wrong, or "".
func checkBlock(b []byte, files map[string][]byte, script [][]string, n int, shown map[string]int) string {
	var names []string
	for name, data := range files {
		if bytes.Equal(b, data) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) > 0 {
		for _, name := range names {
			if _, ok := shown[name]; !ok {
				shown[name] = n
			}
		}
		return ""
	}
	ok, err := mcpClientConfig(b, script)
	if ok {
		return ""
	}
	why := "it is no file of testdata/host.txtar, byte for byte"
	if err != nil {
		why += ", and " + err.Error()
	}
	return fmt.Sprintf("line %d: the block's file is not one the journey uses: %s", n, why)
}

// mcpClientConfig is the one named comparison. A block that configures an
// MCP client ({"mcpServers": {NAME: {"command": C, "args": [...]}}},
// exactly) is no file of the journey, which runs no MCP client but the
// command the client would launch: it must be a command the journey runs
// as an account of its own (ct -u ACCOUNT, with a file of the script on
// its standard input for the client's lines), exactly C and its args. It
// returns false with a nil error for a block that is not such a config.
func mcpClientConfig(b []byte, script [][]string) (bool, error) {
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if dec.Decode(&cfg) != nil || dec.More() || cfg.MCPServers == nil {
		return false, nil
	}
	if len(cfg.MCPServers) != 1 {
		return false, fmt.Errorf("an MCP client config of %d servers, not one", len(cfg.MCPServers))
	}
	for name, s := range cfg.MCPServers {
		want := append([]string{s.Command}, s.Args...)
		for _, f := range script {
			user, stdin, cmd := ctParts(f)
			if user != "" && user != "root" && stdin != "" && slices.Equal(cmd, want) {
				return true, nil
			}
		}
		return false, fmt.Errorf("its MCP client config's server %q launches %q, which the journey never runs as an account with the client's lines on its standard input", name, strings.Join(want, " "))
	}
	panic("unreachable")
}

// ctParts splits a journey command `ct [-u USER] [-stdin FILE] CMD ARGS`.
func ctParts(f []string) (user, stdin string, cmd []string) {
	f = f[1:]
	for len(f) >= 2 && (f[0] == "-u" || f[0] == "-stdin") {
		if f[0] == "-u" {
			user = f[1]
		} else {
			stdin = f[1]
		}
		f = f[2:]
	}
	return user, stdin, f
}

// namedFiles returns the file names line uses: every file of the journey
// it names as a word of its own, and every name of a .json or .jsonl
// file (the last element of a path).
func namedFiles(line string, files map[string][]byte) []string {
	var out []string
	for _, m := range fileName.FindAllStringIndex(line, -1) {
		if m[0] > 0 && isNameByte(line[m[0]-1]) {
			continue // inside a longer word
		}
		out = append(out, line[m[0]:m[1]])
	}
	for name := range files {
		for at := 0; ; {
			i := strings.Index(line[at:], name)
			if i < 0 {
				break
			}
			i += at
			end := i + len(name)
			if (i == 0 || !isNameByte(line[i-1])) && (end == len(line) || !isNameByte(line[end]) || line[end] == '.') {
				out = append(out, name)
			}
			at = end
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// TestCheckDocFiles pins what checkDocFiles finds, on a small document and
// archive: each kind of problem once, and what it lets through.
func TestCheckDocFiles(t *testing.T) {
	a := txtar.Parse([]byte("ct -u agent -stdin call.jsonl steward-controller mcp --socket /s/mcp.sock\n" +
		"-- route.json --\n{\"a\": 1}\n-- call.jsonl --\n{\"b\": 2}\n-- watchdog.conf --\n[Service]\n"))
	script := [][]string{shellFields(strings.TrimSpace(string(a.Comment)))}
	doc := strings.Join([]string{
		"route.json, as the journey has it:", // 1
		"```json",                            // 2
		`{"a": 1}`,                           // 3
		"```",                                // 4
		"A byte off:",                        // 5
		"```json",                            // 6
		`{"a":  1}`,                          // 7
		"```",                                // 8
		"```json",                            // 9
		`{"mcpServers": {"s": {"command": "steward-controller", "args": ["mcp", "--socket", "/s/mcp.sock"]}}}`, // 10
		"```", // 11
		"```json",
		`{"mcpServers": {"s": {"command": "steward-controller", "args": ["mcp", "--socket", "/other.sock"]}}}`, // 13
		"```",
		"```text", // 15
		"```",
		"It reads call.jsonl and watchdog.conf (17); mywatchdog.conf is no name of the journey's",
		"and so is watchdog.conf. config.json is steward's; other.json is not (19).",
		"/var/lib/x/route.json is shown.",
	}, "\n")
	shown, problems := checkDocFiles(doc, a, script)
	want := []string{
		"line 6: the block's file is not one the journey uses: it is no file of testdata/host.txtar, byte for byte",
		`line 12: the block's file is not one the journey uses: it is no file of testdata/host.txtar, byte for byte, and its MCP client config's server "s" launches "steward-controller mcp --socket /other.sock", which the journey never runs as an account with the client's lines on its standard input`,
		`line 15: a block of kind "text": this document's blocks are sh (commands the journey runs), json or jsonl (files it uses)`,
		"line 17 names call.jsonl, a file of the journey, but no block shows it",
		"line 17 names watchdog.conf, a file of the journey, but no block shows it",
		"line 18 names other.json, which is neither a file of the journey nor one steward writes (writtenFiles)",
		"line 18 names watchdog.conf, a file of the journey, but no block shows it",
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if len(shown) != 1 || shown["route.json"] != 2 {
		t.Errorf("shown %v, want route.json at line 2", shown)
	}
	if _, p := checkDocFiles("```json\n{}\n", a, script); len(p) != 1 || p[0] != "line 1: a block that never ends" {
		t.Errorf("an open block: %q", p)
	}
}

// TestShellFields pins how a command line is split: at blanks outside
// single quotes, the quotes kept.
func TestShellFields(t *testing.T) {
	got := shellFields(`ct -u rev sh -c 'steward-controller mcp  < /home/rev/a.jsonl' --approve-ops 'app/calc.*'	x`)
	want := []string{"ct", "-u", "rev", "sh", "-c", "'steward-controller mcp  < /home/rev/a.jsonl'", "--approve-ops", "'app/calc.*'", "x"}
	if !slices.Equal(got, want) {
		t.Fatalf("shellFields = %q, want %q", got, want)
	}
	if !sameCommand([]string{"ct", "controller-attempt-inspect", "ATTEMPT"}, []string{"ct", "controller-attempt-inspect", "$A2"}) ||
		sameCommand([]string{"ct", "controller-attempt-inspect", "some-id"}, []string{"ct", "controller-attempt-inspect", "$A2"}) {
		t.Fatal("a $VAR of the journey stands for a placeholder of capitals, and only for one")
	}
}
