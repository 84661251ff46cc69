package testscript_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// notifiers holds a journey's sd_notify sockets by name.
type notifiers struct {
	mu   sync.Mutex
	dir  string // where the sockets are, made at the first notify
	byID map[string]*notifier
}

// notifier is one NOTIFY_SOCKET: a datagram socket that records what a
// daemon reports through sd_notify(3).
type notifier struct {
	path  string
	mu    sync.Mutex
	msgs  []string
	ready chan struct{} // closed on the first READY=1
	once  sync.Once
}

type notifiersKey struct{}

func journeyNotifiers(ts *testscript.TestScript) *notifiers {
	n, _ := ts.Value(notifiersKey{}).(*notifiers)
	if n == nil {
		ts.Fatalf("no notifiers: the journey setup did not run")
	}
	return n
}

// cmdNotify implements `notify NAME`: creates a datagram socket NAME.sock
// in a directory every account can reach (daemons of other accounts report
// to it too), records every message a daemon sends to it, and
// sets NOTIFY_SOCKET to it for the commands that follow (unset it with
// `env NOTIFY_SOCKET=`). `waitfor ready NAME` then waits for READY=1, which
// the daemons send once their journal is open and their sockets are bound:
// the same readiness systemd waits for.
func cmdNotify(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: notify NAME")
	}
	all := journeyNotifiers(ts)
	all.mu.Lock()
	defer all.mu.Unlock()
	if _, ok := all.byID[args[0]]; ok {
		ts.Fatalf("notify: %s already exists", args[0])
	}
	if all.dir == "" {
		dir, err := os.MkdirTemp(shortTempRoot, "stwj-notify-")
		ts.Check(err)
		ts.Defer(func() { os.RemoveAll(dir) })
		ts.Check(os.Chmod(dir, 0o755))
		all.dir = dir
	}
	path := filepath.Join(all.dir, args[0]+".sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	ts.Check(err)
	ts.Check(os.Chmod(path, 0o666)) // daemons of other accounts send to it too
	n := &notifier{path: path, ready: make(chan struct{})}
	all.byID[args[0]] = n
	ts.Defer(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			msg := string(buf[:k])
			n.mu.Lock()
			n.msgs = append(n.msgs, msg)
			n.mu.Unlock()
			for _, line := range strings.Split(msg, "\n") {
				if line == "READY=1" {
					n.once.Do(func() { close(n.ready) })
				}
			}
		}
	}()
	ts.Setenv("NOTIFY_SOCKET", path)
}

// waitReady waits for READY=1 on the notifier NAME.
func waitReady(ts *testscript.TestScript, name string, limit time.Duration) {
	all := journeyNotifiers(ts)
	all.mu.Lock()
	n := all.byID[name]
	all.mu.Unlock()
	if n == nil {
		ts.Fatalf("waitfor ready: no notifier %s (run `notify %s` before starting the daemon)", name, name)
	}
	select {
	case <-n.ready:
	case <-time.After(limit):
		n.mu.Lock()
		defer n.mu.Unlock()
		ts.Fatalf("waitfor ready %s: no READY=1 within %v (messages: %q)", name, limit, n.msgs)
	}
}
