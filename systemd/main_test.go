package systemd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// childEnv selects what a re-executed test binary does instead of testing.
const childEnv = "STEWARD_SYSTEMD_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "daemon":
		os.Exit(testDaemon())
	case "listeners":
		os.Exit(reportListeners())
	case "bindroute":
		os.Exit(bindRoute())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, os.Getenv(childEnv))
		os.Exit(2)
	}
}

// testDaemon is a stand-in for steward's daemons, in the order they start:
// adopt the socket systemd passed, say READY=1, keep the watchdog fed, and
// serve. It greets the one connection it accepts on the "mcp" socket and
// runs until killed.
func testDaemon() int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "test daemon: "+format+"\n", a...)
		return 1
	}
	ls, err := Listeners()
	if err != nil {
		return fail("%v", err)
	}
	l := ls[FDMCP]
	if l == nil || len(ls) != 1 {
		return fail("listeners %v, want exactly %q", ls, FDMCP)
	}
	if err := Ready("STATUS=test daemon serving"); err != nil {
		return fail("%v", err)
	}
	if iv, err := StartWatchdog(context.Background(), nil); err != nil || iv == 0 {
		return fail("watchdog interval %v, err %v", iv, err)
	}
	c, err := l.Accept()
	if err != nil {
		return fail("accept: %v", err)
	}
	fmt.Fprintf(c, "hello on %s\n", FDMCP)
	io.Copy(io.Discard, c) // until the test closes or kills us
	select {}
}

// reportListeners runs Listeners on the descriptors the test passed as
// ExtraFiles and prints the outcome on stdout. LISTEN_PID must be the pid of
// the process that reads the descriptors, which only the child knows, so it
// sets it here (unless told to leave it, to test a foreign LISTEN_PID).
func reportListeners() int {
	n, _ := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	if os.Getenv("TEST_KEEP_LISTEN_PID") == "" {
		os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	}
	ls, err := Listeners()
	if err != nil {
		fmt.Printf("error %v: %v\n", errors.Is(err, ErrActivation), err)
	} else {
		var names []string
		for name, l := range ls {
			names = append(names, name+":"+l.Addr().Network())
		}
		sort.Strings(names)
		fmt.Printf("ok %s\n", strings.Join(names, " "))
		for _, l := range ls {
			l.Close()
		}
	}
	// Every passed descriptor must be closed again, whatever the outcome.
	var open []string
	for fd := 3; fd < 3+n; fd++ {
		if _, err := os.Stat("/proc/self/fd/" + strconv.Itoa(fd)); err == nil {
			open = append(open, strconv.Itoa(fd))
		}
	}
	fmt.Printf("open [%s]\n", strings.Join(open, " "))
	fmt.Printf("env %q %q %q\n", os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES"))
	return 0
}
