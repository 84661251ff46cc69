package testscript_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stewardrt/steward/internal/testaccount"
	"github.com/stewardrt/steward/internal/testenv"
)

// TestJourneys runs every acceptance journey in testdata/*.txtar against the
// real commands, each journey in its own temporary directory with its own
// daemons. The work directories ($WORK) are under shortTempRoot, since the
// journeys bind sockets in them; the test removes them when it ends.
func TestJourneys(t *testing.T) {
	p := journeyParams("testdata")
	p.WorkdirRoot = shortTempDir(t, "stj")
	testscript.Run(t, p)
}

// journeyParams is the journeys' environment: the custom commands, the
// conditions and the per-journey setup.
func journeyParams(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			// steward-dev without --state uses a directory under the
			// user's state dir, and puts its sockets in the user's
			// runtime dir: keep both inside the journey.
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, ".state"))
			runtime := filepath.Join(env.WorkDir, ".run")
			if err := os.Mkdir(runtime, 0o700); err != nil {
				return err
			}
			env.Setenv("XDG_RUNTIME_DIR", runtime)
			env.Setenv("UID", strconv.Itoa(os.Getuid()))
			// The stem of the OS accounts a journey may create.
			stem, err := testaccount.NextStem()
			if err != nil {
				return err
			}
			env.Setenv("ACCT", stem)
			env.Values[notifiersKey{}] = &notifiers{byID: map[string]*notifier{}}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			}
			// need:root and need:exec:PROG hold when root or PROG is
			// there, and always under CI=true: a journey guarded by
			// [!need:...] skip then runs and fails where it needs what
			// is missing, instead of skipping.
			if what, ok := strings.CutPrefix(cond, "need:"); ok {
				if testenv.CI() {
					return true, nil
				}
				if prog, ok := strings.CutPrefix(what, "exec:"); ok {
					_, err := exec.LookPath(prog)
					return err == nil, nil
				}
				if what == "root" {
					return os.Geteuid() == 0, nil
				}
			}
			return false, errUnknownCondition(cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfor":  cmdWaitfor,
			"repeat":   cmdRepeat,
			"jsonenv":  cmdJSONEnv,
			"httpunix": cmdHTTPUnix,
			"expand":   cmdExpand,
			"notify":   cmdNotify,
			"account":  cmdAccount,
			"group":    cmdGroup,
			"mkshared": cmdMkshared,
			"mkdirown": cmdMkdirown,
			"cpown":    cmdCpown,
			"dial-as":  cmdDialAs,
			"mcp-call": cmdMCPCall,
			"mcp-list": cmdMCPList,
			"mcp-raw":  cmdMCPRaw,
		},
	}
}
