package hostjourney_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stewardrt/steward/internal/nspawn"
)

// commands are steward's binaries the journey installs into the container.
var commands = []string{"steward-operator", "steward-controller", "steward-installer", "steward-appliance"}

// binDir is where they go inside the container: the installer's default
// bin dir is the directory it runs from, and the units and the sudoers
// rule point there.
const binDir = "/usr/local/bin"

// TestHostJourney runs testdata/*.txtar inside one booted container (see
// the package documentation), then reports the seccomp denials steward's
// daemons caused, the exposure scores, and the wall times.
func TestHostJourney(t *testing.T) {
	start := time.Now()
	root := nspawn.Rootfs(t)
	klog := nspawn.WatchKernelLog(t)
	buildStart := time.Now()
	bins := buildCommands(t)
	buildTook := time.Since(buildStart)
	var files []nspawn.File
	for _, name := range commands {
		files = append(files, nspawn.File{Path: binDir + "/" + name, Source: filepath.Join(bins, name), Mode: 0o755})
	}
	c := nspawn.Boot(t, nspawn.Options{Files: files})
	j := &journey{c: c, exposure: map[string]string{}}

	scriptStart := time.Now()
	// The scripts are parallel subtests of this group: it returns when
	// they are done, while the container still runs.
	t.Run("script", func(t *testing.T) {
		testscript.Run(t, testscript.Params{
			Dir:                 "testdata",
			RequireExplicitExec: true,
			RequireUniqueNames:  true,
			Cmds:                j.commands(),
		})
	})
	scriptTook := time.Since(scriptStart)

	lines, err := klog.Lines()
	if err != nil {
		t.Error(err)
	}
	steward, others, lost := classifyDenials(nspawn.SeccompLines(lines))
	for _, d := range steward {
		t.Errorf("seccomp denial of a steward daemon: %s", d)
	}
	for _, l := range lost {
		t.Errorf("kernel log records were lost, so a denial may be missing: %s", l)
	}
	for _, d := range others {
		t.Logf("seccomp denial of another process in the container (not steward's): %s", d)
	}

	rootNote := "cached"
	if root.Built {
		rootNote = "built by this run (cold)"
	}
	var scores []string
	for k, v := range j.exposure {
		scores = append(scores, k+": "+v)
	}
	sort.Strings(scores)
	t.Logf("root file system %s: %s in %v; binaries built in %v; boots %v; script %v; seccomp denials by steward: %d; exposure: %s; wall time %v",
		root.Dir, rootNote, root.Took.Round(time.Millisecond), buildTook.Round(time.Millisecond),
		roundAll(c.BootTimes()), scriptTook.Round(time.Millisecond), len(steward), strings.Join(scores, ", "),
		time.Since(start).Round(time.Millisecond))
}

// classifyDenials splits the kernel's seccomp records into those of
// steward's processes (their comm, the first 15 bytes of the name, or their
// exe names steward), those of other processes, and the kernel's notes that
// records were lost.
func classifyDenials(lines []string) (steward, others, lost []string) {
	for _, l := range lines {
		switch {
		case !strings.Contains(l, "type=1326"):
			if strings.Contains(l, "lost") || strings.Contains(l, "limit exceeded") || strings.Contains(l, "overwritten") {
				lost = append(lost, l)
			}
		case strings.Contains(l, `comm="steward-`) || strings.Contains(l, `exe="`+binDir+`/steward-`):
			steward = append(steward, l)
		default:
			others = append(others, l)
		}
	}
	return steward, others, lost
}

// buildCommands builds steward's commands for the container: static
// (CGO_ENABLED=0), so the container's libc does not matter.
func buildCommands(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build steward's commands: %v", err)
	}
	out := t.TempDir()
	pkgs := make([]string, len(commands))
	for i, name := range commands {
		pkgs[i] = "github.com/stewardrt/steward/cmd/" + name
	}
	cmd := exec.Command(goTool, append([]string{"build", "-o", out + "/"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	return out
}

func roundAll(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Round(time.Millisecond).String())
	}
	return fmt.Sprint(s)
}
