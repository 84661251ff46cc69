package histbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/dev"
	"github.com/stewardrt/steward/operator/host"
)

// steppedClock is a generator daemon's wall clock: the machine's plus an
// offset that only the generator moves, forward, between calls.
type steppedClock struct{ offsetMs atomic.Int64 }

func (c *steppedClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offsetMs.Load()) * time.Millisecond)
}

// The lines of a generator daemon's protocol with the generator. On
// stdout: readyLine once it serves, then the echo of each offset line
// once the clock reads it. On stdin: offsetWord and the offset in ms.
// The end of stdin, SIGINT or SIGTERM stops it cleanly.
const (
	readyLine  = "ready"
	offsetWord = "offset"
)

// daemonUsage is the usage of `histgen daemon`.
const daemonUsage = "usage: histgen daemon host STORE ADMIN-SOCKET OFFSET-MS | histgen daemon controller CONFIG OFFSET-MS"

// Daemon is `histgen daemon`: the host (host.Serve on a store, its admin
// socket where the dev mode puts it) or the controller (controller.Serve
// on a config, with the dev mode's segment size) under a steppedClock.
// It returns the exit status: 0 after a clean stop, 1 when serving
// failed, 2 for a usage error.
func Daemon(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprintln(stderr, daemonUsage)
		return 2
	}
	var serve func(ctx context.Context, clock *steppedClock, ready func(), log *slog.Logger) error
	var offset string
	switch {
	case args[0] == "host" && len(args) == 4:
		store, admin := args[1], args[2]
		offset = args[3]
		serve = func(ctx context.Context, clock *steppedClock, ready func(), log *slog.Logger) error {
			return host.Serve(ctx, store, host.ServeOptions{Ready: ready, Logger: log, AdminSocket: admin, Now: clock.Now})
		}
	case args[0] == "controller" && len(args) == 3:
		cfg := args[1]
		offset = args[2]
		serve = func(ctx context.Context, clock *steppedClock, ready func(), log *slog.Logger) error {
			return controller.Serve(ctx, cfg, controller.Options{Ready: ready, Logger: log, Now: clock.Now,
				JournalSegmentSize: dev.JournalSegmentSize})
		}
	default:
		fmt.Fprintln(stderr, daemonUsage)
		return 2
	}
	ms, err := strconv.ParseInt(offset, 10, 64)
	if err != nil {
		fmt.Fprintf(stderr, "histgen daemon: offset %q: %v\n", offset, err)
		return 2
	}
	clock := &steppedClock{}
	clock.offsetMs.Store(ms)
	if err := runDaemon(args[0], serve, clock, stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "histgen daemon %s: %v\n", args[0], oneLine(err))
		return 1
	}
	return 0
}

// runDaemon serves until stdin ends or a signal comes, answering the
// offset lines of stdin.
func runDaemon(name string, serve func(context.Context, *steppedClock, func(), *slog.Logger) error,
	clock *steppedClock, stdin io.Reader, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var outMu sync.Mutex
	say := func(line string) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintln(stdout, line)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("part", name)
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			word, v, _ := strings.Cut(sc.Text(), " ")
			ms, err := strconv.ParseInt(v, 10, 64)
			if word != offsetWord || err != nil {
				fmt.Fprintf(stderr, "histgen daemon %s: unknown line %q\n", name, sc.Text())
				continue
			}
			clock.offsetMs.Store(ms)
			say(offsetWord + " " + v)
		}
		cancel()
	}()
	err := serve(ctx, clock, func() { once.Do(func() { say(readyLine) }) }, log)
	if err == nil && ctx.Err() == nil {
		err = errors.New("stopped on its own")
	}
	return err
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
