package peertest

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stewardrt/steward/appliance"
)

// ShortDir makes a temp dir with a short path, removed when the test ends:
// socket paths must fit 108 bytes.
func ShortDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "op")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// App is the reference application (package appliance) on a Unix socket,
// behind a counting front so that tests can check that refused dispatches
// reach nothing: the front serves Sock with the appliance's own handler
// (the appliance's socket is unused).
type App struct {
	Sock  string
	Calls atomic.Int64 // the requests the front served
	srv   *http.Server
}

// StartApp serves the application at dir/app.sock until the test ends.
func StartApp(t testing.TB, dir string) *App {
	a := &App{Sock: filepath.Join(dir, "app.sock")}
	inner, err := appliance.Start(appliance.Config{Socket: filepath.Join(dir, "app-inner.sock"), State: filepath.Join(dir, "appstate"),
		Capacity: 64, JournalSegmentSize: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	l, err := net.Listen("unix", a.Sock)
	if err != nil {
		t.Fatal(err)
	}
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.Calls.Add(1)
		inner.ServeHTTP(w, r)
	})}
	go a.srv.Serve(l)
	t.Cleanup(func() { a.srv.Close() })
	return a
}
