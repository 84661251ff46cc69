package appliance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/oracleops"
)

// DefaultPrefix is the API prefix when Config.Prefix is empty.
const DefaultPrefix = "/v1"

// DefaultMaxConnections caps the connections served at once.
const DefaultMaxConnections = 64

// The HTTP server's deadlines, so that a connection holds one of the
// MaxConnections slots only while it is used, whatever its peer does. They
// are the reference application's defaults (Config overrides them): the
// host's route timeouts (its ResponseMs) are set under them.
const (
	// DefaultHeaderTimeout: a connection's request headers, the first
	// request's included, are due within it of the connection or of the
	// first byte after an idle wait; a peer that says nothing is closed.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultHandlerTimeout bounds running an invocation's operation. Past
	// it the invocation is answered 503 timeout (and that answer recorded
	// for its requestId), so a handler that does not finish holds neither
	// its connection's slot nor its caller: the host gets a definite error
	// instead of a call that runs into its own timeout.
	DefaultHandlerTimeout = 20 * time.Second
	// DefaultIdleTimeout bounds a kept-alive connection's quiet between
	// requests.
	DefaultIdleTimeout = 2 * time.Minute
)

const (
	// readTimeout bounds reading a whole request, body included.
	readTimeout = 30 * time.Second
	// answerMargin is what the write deadline (http.Server.WriteTimeout,
	// from the end of the headers to the end of the answer) allows beyond
	// the handler bound: time to journal and write the timeout answer.
	// Past the write deadline the answer's writes fail and the connection
	// is closed, the last resort if even that does not happen.
	answerMargin = 10 * time.Second
)

// Config configures the appliance.
type Config struct {
	Socket string // path of the Unix socket to create (mode 0660)
	State  string // state directory (created 0700); the journal is STATE/journal
	Prefix string // API prefix, DefaultPrefix when empty

	// Capacity, when positive, caps concurrent invocations of every
	// operation at this number instead of each operation's own cap.
	Capacity int
	// MaxConnections caps open connections; DefaultMaxConnections when 0.
	MaxConnections int
	// HeaderTimeout, HandlerTimeout and IdleTimeout are the connection
	// deadlines (DefaultHeaderTimeout, DefaultHandlerTimeout and
	// DefaultIdleTimeout when 0); tests shorten them.
	HeaderTimeout, HandlerTimeout, IdleTimeout time.Duration
	// PeerUIDs are accounts served besides the appliance's own and any
	// peer whose group is the socket's (the host's account in an
	// installation); every other peer is refused at accept.
	PeerUIDs []uint32
	// JournalSegmentSize is the journal's segment size; the journal's
	// default (64 MiB) when 0. Opening scans the preallocated tail of the
	// last segment, so tests use small segments to restart quickly.
	JournalSegmentSize int64
	// SnapshotEvery is how many records a snapshot of the state is made
	// after (history.DefaultEvery, 10,000, when 0): the answers recorded
	// since the last snapshot are what the appliance keeps in memory.
	SnapshotEvery uint64
	// Logger receives the appliance's logs; slog.Default() when nil.
	Logger *slog.Logger
	// Ready, when set, receives one line "ready SOCKET\n" once the
	// journal is open and the socket is listening.
	Ready io.Writer
}

// Server is a running appliance.
type Server struct {
	cfg     Config
	log     *slog.Logger
	cat     *catalog
	ledger  *ledger
	journal *journal.Journal
	store   *store
	http    *http.Server
	ln      *net.UnixListener
	// serveErr is the result of http.Server.Serve, set before serveDone
	// is closed.
	serveErr  error
	serveDone chan struct{}
	once      sync.Once
	closeErr  error
}

// Serve runs the appliance until ctx is done, then shuts it down: the
// socket stops accepting and is removed, running requests finish, a last
// snapshot is made and the journal and the history index are closed. It
// also returns, with an error, when the journal or the index fails: a
// restart reopens them (and rebuilds an index found damaged).
func Serve(ctx context.Context, cfg Config) error {
	s, err := Start(cfg)
	if err != nil {
		return err
	}
	return s.serveUntil(ctx)
}

// serveUntil is Serve's wait on a started server: until ctx is done or
// the server, its journal or its history index fails.
func (s *Server) serveUntil(ctx context.Context) error {
	cfg := s.cfg
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", "reason", context.Cause(ctx))
		return s.Close()
	case <-s.serveDone:
		s.Close()
		return fmt.Errorf("serving %s: %w", cfg.Socket, s.serveErr)
	case <-s.journal.Failed():
		// What is on disk is unknown: exit non-zero, so that the
		// supervisor restarts the appliance and it reopens the journal.
		s.Close()
		return fmt.Errorf("appliance journal stopped after a failed fdatasync; exiting so that a restart reopens it from disk")
	case <-s.store.faults.ch:
		return s.indexFailed()
	}
}

// indexFailed stops the server after the history index failed: without
// it no invocation can be decided. A damaged index is set aside once
// closed, so that the restart rebuilds it from the journal; another
// failure (a failed write) is left for the restart to reopen.
func (s *Server) indexFailed() error {
	err := s.store.faults.err
	s.log.Error("the history index failed; stopping", "err", err)
	s.Close()
	if !errors.Is(err, index.ErrDamaged) {
		return fmt.Errorf("appliance history index failed (%v); exiting so that a restart reopens it", err)
	}
	if aerr := setAside(indexPath(s.cfg.State), s.log); aerr != nil {
		return fmt.Errorf("appliance history index damaged (%v), and %v", err, aerr)
	}
	return fmt.Errorf("appliance history index damaged (%v); it was set aside, and a restart rebuilds it from the journal", err)
}

// Start opens the journal from the newest snapshot it can use (the
// history index holding the answers before it), binds the socket and
// serves in the background until Close, making snapshots as it goes.
func Start(cfg Config) (*Server, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if err := oracleops.ValidatePrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	if cfg.Socket == "" || cfg.State == "" {
		return nil, errors.New("appliance: both a socket path and a state directory are required")
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	cfg.HeaderTimeout = orDefault(cfg.HeaderTimeout, DefaultHeaderTimeout)
	cfg.HandlerTimeout = orDefault(cfg.HandlerTimeout, DefaultHandlerTimeout)
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, DefaultIdleTimeout)
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	cat, err := newCatalog(cfg.Capacity)
	if err != nil {
		return nil, err
	}
	if err := prepareStateDir(cfg.State); err != nil {
		return nil, err
	}
	st, err := openStore(cfg, log)
	if err != nil {
		return nil, err
	}
	ln, err := listenUnix(cfg.Socket, log)
	if err != nil {
		st.close()
		return nil, err
	}
	peers, err := newPeerCheck(cfg.Socket, cfg.PeerUIDs)
	if err != nil {
		ln.Close()
		st.close()
		return nil, err
	}
	st.run(log)
	j, led := st.j, st.led
	s := &Server{cfg: cfg, log: log, cat: cat, ledger: led, journal: j, store: st, ln: ln, serveDone: make(chan struct{})}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: cfg.HeaderTimeout,
		ReadTimeout:       max(readTimeout, cfg.HeaderTimeout),
		WriteTimeout:      cfg.HandlerTimeout + answerMargin,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		s.serveErr = s.http.Serve(&limitListener{UnixListener: ln, slots: make(chan struct{}, cfg.MaxConnections), peers: peers, log: log})
		close(s.serveDone)
	}()
	log.Info("serving oracle-operations-v1", "socket", cfg.Socket, "prefix", cfg.Prefix,
		"journal", j.Dir(), "answers", led.count(), "operations", len(cat.ops))
	if cfg.Ready != nil {
		fmt.Fprintf(cfg.Ready, "ready %s\n", cfg.Socket)
	}
	return s, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Close stops the server: no new connections (the socket is removed),
// running requests get up to 10 s to finish, then a last snapshot is
// made and the journal and the history index are closed.
func (s *Server) Close() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := s.http.Shutdown(ctx)
		if err != nil {
			s.log.Warn("requests still running at shutdown; closing them", "err", err)
			s.http.Close()
		}
		// Shutdown closes only listeners Serve has begun to track; closing
		// ours here removes the socket before Close returns even if the
		// serving goroutine had not started yet.
		s.ln.Close()
		<-s.serveDone
		s.closeErr = errors.Join(err, s.store.close())
		s.log.Info("stopped", "socket", s.cfg.Socket)
	})
	return s.closeErr
}

// ServeHTTP routes PREFIX/operations, PREFIX/operations/ID and
// PREFIX/invoke; everything else is not_found.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	rest, ok := cutPrefix(path, s.cfg.Prefix)
	switch {
	case !ok:
	case rest == "/invoke":
		s.handleInvoke(w, r)
		return
	case rest == "/operations":
		s.handleList(w, r)
		return
	case len(rest) > len("/operations/") && rest[:len("/operations/")] == "/operations/":
		s.handleDescribe(w, r, rest[len("/operations/"):])
		return
	}
	writeRefusal(w, &refusal{status: http.StatusNotFound, code: codeNotFound, message: "no such path; try " + s.cfg.Prefix + "/operations"})
}

func cutPrefix(path, prefix string) (string, bool) {
	if len(path) < len(prefix) || path[:len(prefix)] != prefix {
		return "", false
	}
	return path[len(prefix):], true
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeRefusal(w, &refusal{status: http.StatusMethodNotAllowed, code: codeBadRequest, message: "method not allowed; use " + allow})
}
