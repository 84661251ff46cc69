package nspawn

import (
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWaitSocket waits for a socket made after the wait began, and gives up
// at the bound on one that never comes.
func TestWaitSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	errc := make(chan error, 1)
	go func() { errc <- waitSocket(path, 10*time.Second) }()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := <-errc; err != nil {
		t.Fatalf("waitSocket: %v", err)
	}
	err = waitSocket(filepath.Join(dir, "never.sock"), 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not within 50ms") {
		t.Fatalf("a socket that never comes: %v", err)
	}
}

// TestWaitExit blocks until a process exits, and gives up at the bound on
// one that does not.
func TestWaitExit(t *testing.T) {
	cmd := exec.Command("cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = waitExit(cmd.Process.Pid, 20*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still runs") {
		t.Fatalf("a running process: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- waitExit(cmd.Process.Pid, 10*time.Second) }()
	stdin.Close()
	if err := <-errc; err != nil {
		t.Fatalf("waitExit: %v", err)
	}
	cmd.Wait()
}
