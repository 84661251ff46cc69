package installer

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/failpoint"
)

// TestEnrollCrash kills a real installer process (this test binary as
// steward-installer) with SIGKILL just before and just after the rebind is
// durable. Before: nothing was written and the request enrolls afterwards.
// After: the rebind is there, and the same request prints it, unchanged.
func TestEnrollCrash(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "steward-installer")
	copyFile(t, exe, bin)
	for _, c := range []struct {
		point   string
		lastSeq uint64
	}{
		{"installer-enroll-before-rebind", 1},
		{"installer-enroll-after-rebind", 2},
	} {
		t.Run(c.point, func(t *testing.T) {
			s := newEnrollSetup(t)
			ha, hb := binding(t, s.a), binding(t, s.b)
			req := enrollRequestFile(t, ha, hb)
			ctl, err := json.Marshal(s.f.env.Controller)
			if err != nil {
				t.Fatal(err)
			}
			child := func(point string) (*exec.Cmd, string, error) {
				cmd := exec.Command(bin, "controller-enroll", req)
				cmd.Env = append(os.Environ(), "SUDO_UID="+strconv.FormatUint(uint64(operatorUID()), 10),
					testControllerEnv+"="+string(ctl), failpoint.Env+"="+point)
				var out strings.Builder
				cmd.Stdout = &out
				err := cmd.Run()
				return cmd, out.String(), err
			}
			cmd, out, err := child(c.point)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL || out != "" {
				t.Fatalf("child at %s: %v, output %q; want it killed", c.point, err, out)
			}
			if last, _ := s.journalState(t); last != c.lastSeq {
				t.Fatalf("after the crash: last seq %d, want %d", last, c.lastSeq)
			}
			_, out, err = child("")
			if err != nil {
				t.Fatalf("rerun: %v %s", err, out)
			}
			r := decodeEnroll(t, out)
			if r.Seq != 2 || r.Changed != (c.lastSeq == 1) || r.BindingAfter != hb {
				t.Fatalf("rerun: %+v", r)
			}
			if last, bound := s.journalState(t); last != 2 || bound != hb {
				t.Fatalf("after the rerun: %d %s", last, bound)
			}
		})
	}
}
