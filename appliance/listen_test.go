package appliance

import (
	"bufio"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSocketMode checks the socket is born 0660 and the state directory
// 0700, and that the umask used for the bind did not leak into the
// process: files created afterwards get the process's own umask.
func TestSocketMode(t *testing.T) {
	old := unix.Umask(0o022)
	t.Cleanup(func() { unix.Umask(old) })
	a := startApp(t, Config{})
	fi, err := os.Lstat(a.sock)
	if err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v, %v", fi.Mode(), err)
	}
	fi, err = os.Lstat(a.state)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state %v, %v", fi.Mode(), err)
	}
	if got := unix.Umask(0o022); got != 0o022 {
		t.Fatalf("process umask changed to %#o", got)
	}
	// Close removes the socket.
	a.client.CloseIdleConnections()
	if err := a.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(a.sock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket still there after Close: %v", err)
	}
}

func TestStaleSocketAndStateChecks(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "a.sock")
	// A socket whose listener is gone (its file kept): stale, replaced.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	a := startApp(t, Config{Socket: sock})
	if status, _ := a.do("GET", "/v1/operations/calc.evaluate", nil); status != 200 {
		t.Fatalf("after replacing a stale socket: %d", status)
	}
	// A second appliance on the same live socket is refused.
	_, err = Start(Config{Socket: sock, State: filepath.Join(dir, "other"), Logger: quietLogger(t)})
	if err == nil || err.Error() != "socket "+sock+": another process is listening on it" {
		t.Fatalf("live socket: %v", err)
	}
	// The same state directory is refused while in use (journal lock).
	_, err = Start(Config{Socket: filepath.Join(dir, "b.sock"), State: a.state, Logger: quietLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("state in use: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "b.sock")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a refused start left a socket")
	}
	// A state directory others can enter, and one that is a symlink.
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o750)
	if _, err := Start(Config{Socket: filepath.Join(dir, "c.sock"), State: open, Logger: quietLogger(t)}); err == nil ||
		err.Error() != "state directory "+open+": mode 0750 lets others in; want 0700" {
		t.Fatalf("open state: %v", err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(a.state, link)
	if _, err := Start(Config{Socket: filepath.Join(dir, "d.sock"), State: link, Logger: quietLogger(t)}); err == nil ||
		!strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("symlinked state: %v", err)
	}
	if _, err := Start(Config{Socket: filepath.Join(dir, "e.sock"), State: filepath.Join(dir, "s"), Prefix: "/v1/", Logger: quietLogger(t)}); err == nil {
		t.Fatal("a prefix with a trailing / was accepted")
	}
}

// TestConnectionCap: with MaxConnections 1, a second connection is not
// served while the first is open, and is served once it closes.
func TestConnectionCap(t *testing.T) {
	a := startApp(t, Config{MaxConnections: 1})
	first, err := net.Dial("unix", a.sock)
	if err != nil {
		t.Fatal(err)
	}
	get := "GET /v1/operations/text.sha256 HTTP/1.1\r\nHost: a\r\n\r\n"
	if _, err := first.Write([]byte(get)); err != nil {
		t.Fatal(err)
	}
	r1 := bufio.NewReader(first)
	if resp, err := http.ReadResponse(r1, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v", err)
	}
	second, err := net.Dial("unix", a.sock) // queued in the backlog
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	second.Write([]byte(get))
	// Nothing may arrive while the first connection holds the only slot;
	// this bounded wait can only pass spuriously, never fail spuriously.
	second.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	r2 := bufio.NewReader(second)
	if _, err := r2.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("second connection served while the first is open: %v", err)
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(30 * time.Second))
	if resp, err := http.ReadResponse(r2, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("second after the first closed: %v", err)
	}
}

// TestUmaskFallback takes the path for systems that refuse
// unshare(CLONE_FS): the socket is still born 0660 and the process umask
// is restored.
func TestUmaskFallback(t *testing.T) {
	old := unix.Umask(0o022)
	t.Cleanup(func() { unix.Umask(old) })
	unshareFS = func() error { return unix.EPERM }
	t.Cleanup(func() { unshareFS = func() error { return unix.Unshare(unix.CLONE_FS) } })
	a := startApp(t, Config{})
	fi, err := os.Lstat(a.sock)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v, %v", fi.Mode(), err)
	}
	if got := unix.Umask(0o022); got != 0o022 {
		t.Fatalf("process umask left at %#o", got)
	}
}
