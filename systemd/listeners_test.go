package systemd

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// passFiles runs the test binary as a child that calls Listeners on files,
// passed as descriptors 3, 4, ... with LISTEN_FDS and LISTEN_FDNAMES set, and
// returns what it reports.
func passFiles(t *testing.T, names string, extraEnv []string, files ...*os.File) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(),
		childEnv+"=listeners",
		"LISTEN_FDS="+strconv.Itoa(len(files)),
		"LISTEN_FDNAMES="+names,
		// The race detector otherwise sleeps a second at every exit.
		"GORACE=atexit_sleep_ms=0",
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.ExtraFiles = files
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return string(out)
}

func unixListenerFile(t *testing.T, network string) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	var f *os.File
	var err error
	switch network {
	case "unix":
		var l *net.UnixListener
		l, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err == nil {
			defer l.Close()
			f, err = l.File()
		}
	case "unixgram":
		var c *net.UnixConn
		c, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
		if err == nil {
			defer c.Close()
			f, err = c.File()
		}
	case "tcp":
		var l net.Listener
		l, err = net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			defer l.Close()
			f, err = l.(*net.TCPListener).File()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestListenersAccepts(t *testing.T) {
	out := passFiles(t, "reverse:foreground:mcp", nil,
		unixListenerFile(t, "unix"), unixListenerFile(t, "unix"), unixListenerFile(t, "unix"))
	want := "ok foreground:unix mcp:unix reverse:unix\nopen []\nenv \"\" \"\" \"\"\n"
	if out != want {
		t.Fatalf("child reported:\n%s\nwant:\n%s", out, want)
	}
}

func TestListenersUnnamed(t *testing.T) {
	out := passFiles(t, "", nil, unixListenerFile(t, "unix"))
	if !strings.HasPrefix(out, "ok LISTEN_FD_3:unix\n") {
		t.Fatalf("child reported:\n%s", out)
	}
}

func TestListenersNotActivated(t *testing.T) {
	// LISTEN_PID names another process: the descriptors are not ours.
	out := passFiles(t, "mcp", []string{"TEST_KEEP_LISTEN_PID=1", "LISTEN_PID=1"}, unixListenerFile(t, "unix"))
	if !strings.HasPrefix(out, "ok \n") {
		t.Fatalf("child reported:\n%s", out)
	}
}

func TestListenersRefuses(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	connected := os.NewFile(uintptr(fds[0]), "pair0")
	defer connected.Close()
	syscall.Close(fds[1])

	cases := []struct {
		name  string
		names string
		files []*os.File
		want  string
	}{
		{"datagram", "mcp", []*os.File{unixListenerFile(t, "unixgram")}, "fd 3 (mcp): socket type 2, not SOCK_STREAM"},
		{"not listening", "mcp", []*os.File{connected}, "fd 3 (mcp): socket is not listening"},
		{"pipe", "mcp", []*os.File{pr}, "fd 3 (mcp): not a socket"},
		{"tcp", "mcp", []*os.File{unixListenerFile(t, "tcp")}, "fd 3 (mcp): socket domain 2, not AF_UNIX"},
		{"duplicate name", "mcp:mcp", []*os.File{unixListenerFile(t, "unix"), unixListenerFile(t, "unix")}, `fd 4: name "mcp" is passed twice`},
		{"bad after good", "reverse:mcp", []*os.File{unixListenerFile(t, "unix"), unixListenerFile(t, "unixgram")}, "fd 4 (mcp): socket type 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := passFiles(t, c.names, nil, c.files...)
			lines := strings.Split(out, "\n")
			if !strings.HasPrefix(lines[0], "error true: socket activation: "+c.want) {
				t.Errorf("child reported %q, want an ErrActivation error %q", lines[0], c.want)
			}
			// Every descriptor is closed after a refusal, none kept.
			if lines[1] != "open []" {
				t.Errorf("after the refusal: %s", lines[1])
			}
		})
	}
}
