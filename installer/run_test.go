package installer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets the test binary be steward-installer itself: copied into a
// bin dir under that name and run (by the test, or by sudo), it does what
// the real binary does.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "steward-installer" {
		env := EnvFromOS()
		// Test-only: the crash tests point the child at a test controller.
		// The real binary has no such variable.
		if v := os.Getenv(testControllerEnv); v != "" {
			if err := json.Unmarshal([]byte(v), &env.Controller); err != nil {
				panic(err)
			}
		}
		os.Exit(Run(context.Background(), os.Args[1:], env, os.Stdout, os.Stderr))
	}
	// A real-install test re-executed by itself: everything it runs is
	// inside a private /etc, /var/lib and /run, or it does not run.
	if scratch := os.Getenv(privateRootEnv); scratch != "" {
		if err := enterPrivateRoot(scratch); err != nil {
			fmt.Fprintf(os.Stderr, "installer tests: private root: %v\n", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// testControllerEnv carries a JSON ControllerEnv to a child test binary.
const testControllerEnv = "STEWARD_INSTALLER_TEST_CONTROLLER"

// run calls Run in process with env and returns exit status and output.
func run(t *testing.T, env Env, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(t.Context(), args, env, &out, &errb)
	return code, out.String(), errb.String()
}

// nonRoot is an Env that cannot install for real: every test here that
// reaches a verb's work refuses before touching the system.
var nonRoot = Env{EUID: 1000, Executable: "/nonexistent/bin/steward-installer"}

func TestRunUnknownVerb(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"INSTALL"}, {"--help"}, {""}, {"install;status"}, {"sh", "-c", "id"}} {
		code, out, errs := run(t, nonRoot, args...)
		if code != ExitUsage || out != "" || !strings.Contains(errs, "unknown verb") || !strings.Contains(errs, "usage:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and 'unknown verb'", args, code, out, errs)
		}
	}
	code, out, errs := run(t, nonRoot)
	if code != ExitUsage || out != "" || !strings.Contains(errs, "no verb") {
		t.Errorf("no arguments: exit %d, %q, %q", code, out, errs)
	}
}

// TestOperatorVerbsRefuseWithoutSudo: the verbs that read an operator's
// file need SUDO_UID to know whose it is; ids are checked before anything
// is sent; without a controller config path nothing is looked for.
func TestOperatorVerbsRefuseWithoutSudo(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bundle-install", "/tmp/bundle"}, ExitRefused, "refused: SUDO_UID is not set: run this verb through sudo"},
		{[]string{"controller-tool", "/tmp/req"}, ExitRefused, "refused: SUDO_UID is not set: run this verb through sudo"},
		{[]string{"controller-tool-result", "01/ABC"}, ExitRefused, `refused: ID "01/ABC" has byte '/' at offset 2, not one of A-Za-z0-9_-`},
		{[]string{"controller-tool-ack", strings.Repeat("a", 81)}, ExitRefused, `refused: ID "` + strings.Repeat("a", 81) + `" must be 1 to 80 characters`},
		{[]string{"controller-tool-ack", strings.Repeat("a", 80)}, ExitFail, "no controller config path is set"},
		{[]string{"controller-tool-result", "01ABC"}, ExitFail, "no controller config path is set"},
		{[]string{"controller-journal", "--from", "17"}, ExitFail, "no controller config path is set"},
	} {
		code, out, errs := run(t, nonRoot, c.args...)
		want := "steward-installer " + c.args[0] + ": " + c.want
		if code != c.code || out != "" || !strings.HasPrefix(errs, want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errs, c.code, want)
		}
	}
}

func TestRunRefusesArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"install", "extra"}, `unexpected argument "extra"`},
		{[]string{"install", "--purge"}, "flag provided but not defined: -purge"},
		{[]string{"install", "--root"}, "flag needs an argument"},
		{[]string{"install", "--root="}, "--root needs a directory"},
		{[]string{"install", "--bin-dir", ""}, "--bin-dir needs a directory"},
		{[]string{"uninstall", "--bin-dir", "/x"}, "flag provided but not defined: -bin-dir"},
		{[]string{"status", "--json=maybe"}, "invalid boolean value"},
		{[]string{"bundle-install"}, "missing BUNDLE"},
		{[]string{"bundle-install", "a", "b"}, `unexpected argument "b" after BUNDLE`},
		{[]string{"bundle-install", ""}, "is empty"},
		{[]string{"controller-journal", "--from", "-1"}, "invalid value"},
		{[]string{"controller-journal", "5"}, `unexpected argument "5"`},
		{[]string{"controller-tool-result"}, "missing ID"},
	} {
		code, out, errs := run(t, nonRoot, c.args...)
		if code != ExitUsage || out != "" || !strings.Contains(errs, c.want) || !strings.Contains(errs, "usage: steward-installer "+c.args[0]) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestOperatorVerbsTakeNoRootOptions: the sudoers rule lets the operator
// pass anything after a '*' verb, so no verb it can reach may accept an
// option that points the installer at another tree or bin dir.
func TestOperatorVerbsTakeNoRootOptions(t *testing.T) {
	for _, v := range verbTable() {
		if len(v.sudo) == 0 {
			continue
		}
		wild := false
		for _, s := range v.sudo {
			wild = wild || strings.Contains(s, "*")
		}
		for _, f := range v.flags {
			if wild && (f == "root" || f == "bin-dir" || f == "purge") {
				t.Errorf("verb %s is reachable with '*' and takes --%s", v.name, f)
			}
		}
		for _, flag := range []string{"--root", "--bin-dir"} {
			args := []string{flag, "/tmp"}
			if v.operand != "" {
				args = append(args, "x")
			}
			if _, err := parseArgs(v, args); err == nil && wild {
				t.Errorf("verb %s accepted %s", v.name, flag)
			}
		}
	}
}

func TestRunRealInstallNeedsRoot(t *testing.T) {
	for _, verb := range []string{"install", "uninstall", "status"} {
		code, out, errs := run(t, nonRoot, verb)
		if code != ExitFail || out != "" || !strings.Contains(errs, "must run as root (euid is 1000)") {
			t.Errorf("%s as uid 1000: exit %d, %q, %q", verb, code, out, errs)
		}
	}
}

func TestInvokingUID(t *testing.T) {
	for in, want := range map[string]uint32{"0": 0, "1001": 1001, "4294967295": 4294967295} {
		got, err := Env{SudoUID: in}.InvokingUID()
		if err != nil || got != want {
			t.Errorf("SUDO_UID=%q: %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "x", "-1", "+5", "007", "4294967296", " 5", "5\n"} {
		if _, err := (Env{SudoUID: bad}).InvokingUID(); err == nil {
			t.Errorf("SUDO_UID=%q accepted", bad)
		}
	}
}

// FuzzParseArgs: arguments arrive from the operator account through sudo.
// Whatever they are, parsing never panics, and an accepted parse yields
// only what the verb declares.
func FuzzParseArgs(f *testing.F) {
	f.Add("status\x00--json")
	f.Add("controller-journal\x00--from\x0012")
	f.Add("bundle-install\x00/tmp/b")
	f.Add("install\x00--root\x00/tmp/x\x00--bin-dir=/usr/bin")
	f.Add("controller-tool\x00--\x00-x")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		v, ok := lookupVerb(args[0])
		if !ok {
			return
		}
		o, err := parseArgs(v, args[1:])
		if err != nil {
			return
		}
		declared := map[string]bool{}
		for _, fl := range v.flags {
			declared[fl] = true
		}
		if (o.root != "" && !declared["root"]) || (o.binDir != "" && !declared["bin-dir"]) ||
			(o.json && !declared["json"]) || (o.purge && !declared["purge"]) || (o.from != 0 && !declared["from"]) {
			t.Fatalf("%q parsed to %+v, beyond what %s declares", args, o, v.name)
		}
		if (v.operand != "") != (o.operand != "") || strings.ContainsRune(o.operand, 0) {
			t.Fatalf("%q: operand %q for verb %s", args, o.operand, v.name)
		}
	})
}
