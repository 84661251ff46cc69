package installer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Exit statuses of Run.
const (
	ExitOK    = 0 // done, or status found everything in place
	ExitFail  = 1 // failed, or (install, uninstall, status) refused
	ExitUsage = 2 // unknown verb or malformed arguments; see also ExitRefused
)

// Env is what Run needs to know about the process it runs in. EnvFromOS
// fills it for the real binary; tests fill it themselves.
type Env struct {
	// EUID is the effective uid; install and uninstall without --root need 0.
	EUID int
	// SudoUID is SUDO_UID as sudo set it: the invoking operator, owner of
	// every file the installer reads for it. "" when not run through sudo.
	SudoUID string
	// Executable is the absolute path of the running installer. The default
	// bin dir (where the units' binaries and the sudoers rule point) is its
	// directory.
	Executable string
	// Controller locates the installed controller for the controller-*
	// and bundle-install verbs.
	Controller ControllerEnv
}

// EnvFromOS describes the current process.
func EnvFromOS() Env {
	exe, err := os.Executable()
	if err != nil {
		exe = ""
	}
	return Env{EUID: os.Geteuid(), SudoUID: os.Getenv("SUDO_UID"), Executable: exe, Controller: DefaultControllerEnv()}
}

// InvokingUID returns the uid in SUDO_UID: the operator on whose behalf the
// installer runs.
func (e Env) InvokingUID() (uint32, error) {
	if e.SudoUID == "" {
		return 0, errors.New("SUDO_UID is not set: run this verb through sudo")
	}
	u, err := strconv.ParseUint(e.SudoUID, 10, 32)
	if err != nil || strconv.FormatUint(u, 10) != e.SudoUID {
		return 0, fmt.Errorf("SUDO_UID %q is not a uid", e.SudoUID)
	}
	return uint32(u), nil
}

// options holds every option any verb takes; parseArgs fills only those the
// verb declares.
type options struct {
	root    string // --root
	binDir  string // --bin-dir
	json    bool   // --json
	purge   bool   // --purge
	from    uint64 // --from
	operand string // the one positional argument, if the verb has one
}

// verb is one row of the table: the only things steward-installer does.
type verb struct {
	name     string
	synopsis string
	// flags this verb accepts: any of "root", "bin-dir", "json", "purge", "from".
	flags []string
	// operand names the one required positional argument, or "".
	operand string
	// sudo lists the argument lists (after the binary) that the sudoers
	// drop-in lets the operator account run, in sudoers syntax; nil means
	// root only. A '*' there matches anything, spaces included, so a verb
	// reachable with '*' must accept no root-only flag.
	sudo []string
	// run does the work.
	run func(ctx context.Context, c *call, o options) int
}

// verbTable is the one table Run dispatches through. (A function rather
// than a variable: the verbs refer back to the table to render the sudoers
// rule, which a package-level variable could not do.)
func verbTable() []verb {
	return []verb{
		{name: "install", synopsis: "install [--root DIR] [--bin-dir DIR]",
			flags: []string{"root", "bin-dir"}, run: runInstall},
		{name: "uninstall", synopsis: "uninstall [--root DIR] [--purge]",
			flags: []string{"root", "purge"}, run: runUninstall},
		{name: "status", synopsis: "status [--root DIR] [--bin-dir DIR] [--json]",
			flags: []string{"root", "bin-dir", "json"},
			sudo:  []string{"status", "status --json"}, run: runStatus},
		{name: "bundle-install", synopsis: "bundle-install BUNDLE", operand: "BUNDLE",
			sudo: []string{"bundle-install *"}, run: runBundleInstall},
		{name: "controller-tool", synopsis: "controller-tool REQUEST", operand: "REQUEST",
			sudo: []string{"controller-tool *"}, run: runControllerTool},
		{name: "controller-tool-result", synopsis: "controller-tool-result ID", operand: "ID",
			sudo: []string{"controller-tool-result *"}, run: runControllerToolResult},
		{name: "controller-tool-ack", synopsis: "controller-tool-ack ID", operand: "ID",
			sudo: []string{"controller-tool-ack *"}, run: runControllerToolAck},
		{name: "controller-journal", synopsis: "controller-journal [--from SEQ]",
			flags: []string{"from"},
			sudo:  []string{"controller-journal", "controller-journal --from *"}, run: runControllerJournal},
		// The payer's side is root's alone: these three have no sudo column.
		{name: "controller-enroll", synopsis: "controller-enroll REQUEST", operand: "REQUEST",
			run: runControllerEnroll},
		{name: "controller-config", synopsis: "controller-config CONFIG", operand: "CONFIG",
			run: runControllerConfig},
		{name: "controller-pin-host", synopsis: "controller-pin-host BUNDLE", operand: "BUNDLE",
			run: runControllerPinHost},
		{name: "controller-attempts", synopsis: "controller-attempts",
			sudo: []string{"controller-attempts"}, run: runControllerAttempts},
		{name: "controller-attempt-inspect", synopsis: "controller-attempt-inspect ATTEMPT", operand: "ATTEMPT",
			sudo: []string{"controller-attempt-inspect *"}, run: runControllerAttemptInspect},
		{name: "controller-attempt-resolve", synopsis: "controller-attempt-resolve ATTEMPT", operand: "ATTEMPT",
			sudo: []string{"controller-attempt-resolve *"}, run: runControllerAttemptResolve},
	}
}

func lookupVerb(name string) (verb, bool) {
	for _, v := range verbTable() {
		if v.name == name {
			return v, true
		}
	}
	return verb{}, false
}

func usage() string {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, v := range verbTable() {
		b.WriteString("  steward-installer " + v.synopsis + "\n")
	}
	return b.String()
}

// call is one invocation of a verb.
type call struct {
	env            Env
	stdout, stderr io.Writer
	verb           string
}

// failf prints one line naming the verb and returns ExitFail.
func (c *call) failf(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "steward-installer %s: %s\n", c.verb, fmt.Sprintf(format, a...))
	return ExitFail
}

// Run runs one verb of steward-installer: args[0] names it, the rest are its
// arguments. It writes results to stdout and refusals, one line each, to
// stderr, and returns the exit status: ExitOK, ExitFail (failed),
// ExitRefused (an operator verb's input refused) or ExitUsage (unknown
// verb, bad arguments; the same number as ExitRefused).
func Run(ctx context.Context, args []string, env Env, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, "steward-installer: no verb\n"+usage())
		return ExitUsage
	}
	v, ok := lookupVerb(args[0])
	if !ok {
		fmt.Fprintf(stderr, "steward-installer: unknown verb %q\n%s", args[0], usage())
		return ExitUsage
	}
	o, err := parseArgs(v, args[1:])
	if err != nil {
		fmt.Fprintf(stderr, "steward-installer %s: %v\nusage: steward-installer %s\n", v.name, err, v.synopsis)
		return ExitUsage
	}
	c := &call{env: env, stdout: stdout, stderr: stderr, verb: v.name}
	return v.run(ctx, c, o)
}

// parseArgs parses a verb's arguments strictly: only the flags it declares,
// exactly its operand, nothing else.
func parseArgs(v verb, args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet(v.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, f := range v.flags {
		switch f {
		case "root":
			fs.StringVar(&o.root, "root", "", "install into this directory tree")
		case "bin-dir":
			fs.StringVar(&o.binDir, "bin-dir", "", "directory of the steward binaries")
		case "json":
			fs.BoolVar(&o.json, "json", false, "print JSON")
		case "purge":
			fs.BoolVar(&o.purge, "purge", false, "also remove state and accounts")
		case "from":
			fs.Uint64Var(&o.from, "from", 0, "first journal sequence number")
		default:
			panic("installer: verb " + v.name + " declares unknown flag " + f)
		}
	}
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	rest := fs.Args()
	switch {
	case v.operand == "" && len(rest) > 0:
		return options{}, fmt.Errorf("unexpected argument %q", rest[0])
	case v.operand != "" && len(rest) == 0:
		return options{}, fmt.Errorf("missing %s", v.operand)
	case v.operand != "" && len(rest) > 1:
		return options{}, fmt.Errorf("unexpected argument %q after %s", rest[1], v.operand)
	case v.operand != "":
		if rest[0] == "" || strings.ContainsRune(rest[0], 0) {
			return options{}, fmt.Errorf("%s %q is empty or has a NUL", v.operand, rest[0])
		}
		o.operand = rest[0]
	}
	var bad error
	fs.Visit(func(f *flag.Flag) {
		if (f.Name == "root" || f.Name == "bin-dir") && f.Value.String() == "" && bad == nil {
			bad = fmt.Errorf("--%s needs a directory", f.Name)
		}
	})
	if bad != nil {
		return options{}, bad
	}
	return o, nil
}
