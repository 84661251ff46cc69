package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
)

// TestInitFullDisk: init on a full disk fails and leaves nothing but the
// filler (before, it left a half-made store that the next init refused as
// "already exists"); as space is freed a page at a time, init is retried
// until it succeeds, and the store it leaves opens whole.
func TestInitFullDisk(t *testing.T) {
	disk := testenv.SmallTmpfs(t, 4<<20)
	filler := testenv.FillDisk(t, filepath.Join(disk, "filler"))
	st, err := filler.Stat()
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(disk, "store")
	opts := operator.InitOptions{JournalSegmentSize: 64 << 10}
	failures := 0
	for size := st.Size(); ; size -= 4096 {
		if size < 0 {
			t.Fatal("init fails on an empty disk")
		}
		if err := filler.Truncate(size); err != nil {
			t.Fatal(err)
		}
		_, err := operator.InitWith(store, opts)
		if err == nil {
			break
		}
		failures++
		if errors.Is(err, views.ErrRefused) || !strings.Contains(err.Error(), "no space left on device") || !strings.HasPrefix(err.Error(), "store "+store+": ") {
			t.Fatalf("init with %d bytes of filler: %v, want a failure for ENOSPC", size, err)
		}
		if es, _ := os.ReadDir(disk); len(es) != 1 {
			t.Fatalf("a failed init left %v", es)
		}
	}
	if failures < 10 {
		t.Fatalf("only %d failed inits: the disk was not full", failures)
	}
	s, err := operator.Open(store)
	if err != nil {
		t.Fatalf("the store the first init to succeed made: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d failed inits, each leaving nothing; the next one succeeded", failures)
}

// TestInitAfterKilledInit: a `steward-operator init` SIGKILLed after it
// built its temporary but before the rename leaves that temporary and no
// store; the next init removes it (saying so on stderr) and succeeds.
func TestInitAfterKilledInit(t *testing.T) {
	dir := peertest.ShortDir(t)
	store := filepath.Join(dir, "store")
	run := func(fp string) (string, error) {
		cmd := exec.Command(os.Args[0], "init", "--store", store)
		cmd.Env = append(os.Environ(), hosttest.MainEnv+"=1", failpoint.Env+"="+fp)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(durable.FailBeforeRename)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("init at the failpoint: %v: %s, want SIGKILL", err, out)
	}
	es, err := os.ReadDir(dir)
	if err != nil || len(es) != 1 || !strings.HasPrefix(es[0].Name(), durable.TempPrefix(store)) {
		t.Fatalf("after the kill the directory holds %v, %v; want one temporary", es, err)
	}
	stale := filepath.Join(dir, es[0].Name())
	out, err = run("")
	if err != nil {
		t.Fatalf("init after the kill: %v: %s", err, out)
	}
	if !strings.Contains(out, "removed the temporary left by an interrupted init") || !strings.Contains(out, stale) ||
		!strings.Contains(out, "store "+store+" created") {
		t.Fatalf("init after the kill said:\n%s", out)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 || es[0].Name() != "store" {
		t.Fatalf("directory holds %v, want the store alone", es)
	}
	s, err := operator.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
