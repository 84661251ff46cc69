package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Client runs administrative requests: on a store the command opened
// itself (Open, when no host holds it), or through the running host's
// admin socket (Dial) or approvals socket (DialApprovals).
type Client interface {
	// Do runs one request and returns its reply; through a socket it
	// waits up to 30 s for the host's answer.
	Do(Request) (Reply, error)
	// DoWithin is Do waiting up to d for the host's answer (a redelivery
	// runs as long as its route's timeouts allow; a watch's wait is
	// bounded); on a store the request runs at once, whatever d.
	DoWithin(d time.Duration, req Request) (Reply, error)
	// Close closes the connection or the store.
	Close() error
}

// socketClient is a Client that reaches the running host over a socket.
type socketClient struct{ cl *wire.Client }

// Dial connects to the daemon's admin socket in store dir, signing with
// the operator key (read from the store: the caller is the operator).
func Dial(ctx context.Context, dir string) (Client, error) {
	return DialAt(ctx, dir, SocketPath(dir))
}

// DialAt connects to the admin socket at path of the host serving store
// dir (one bound elsewhere than SocketPath: host.ServeOptions.AdminSocket).
func DialAt(ctx context.Context, dir, path string) (Client, error) {
	key, err := operator.ReadKey(dir)
	if err != nil {
		return nil, err
	}
	uid := uint32(os.Geteuid())
	conn, err := wire.Dial(ctx, path, uid, uid)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDaemonRunning, err)
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: key.Ed25519(), Role: RoleAdminClient, PeerRole: RoleAdmin, PeerKeys: wire.NewKeyring(key.Public().Ed25519()),
		Path: path, Purpose: PurposeAdmin, SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &socketClient{cl: wire.NewClient(ch)}, nil
}

// Do sends req and waits up to 30 s for the host's answer.
func (a *socketClient) Do(req Request) (Reply, error) {
	return a.DoWithin(30*time.Second, req)
}

// DoWithin is Do waiting at most d for the host's answer.
func (a *socketClient) DoWithin(d time.Duration, req Request) (Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	env, err := a.cl.Call(ctx, TypeAdmin, req)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Reply{}, fmt.Errorf("the host closed the admin connection before answering %s (it may have stopped): whether it took effect is unknown until the host runs again", req.Op)
	}
	if err != nil {
		return Reply{}, err
	}
	switch env.T {
	case TypeAdminResult:
		var rep Reply
		err := env.Decode(&rep)
		return rep, err
	case msg.TypeRefused:
		var ref msg.Refusal
		if err := env.Decode(&ref); err != nil {
			return Reply{}, err
		}
		reason := strings.TrimPrefix(ref.Reason, views.ErrRefused.Error()+": ")
		if ref.Code == CodeRefusedInput {
			return Reply{}, fmt.Errorf("%w: %s", views.ErrRefused, reason)
		}
		return Reply{}, fmt.Errorf("the daemon: %s", reason)
	default:
		return Reply{}, fmt.Errorf("unexpected %q reply on the admin socket", env.T)
	}
}

// Close closes the connection.
func (a *socketClient) Close() error { return a.cl.Close() }

// Open opens the store for administration: directly when no host holds
// it, else through the running host's admin socket. Either way the same
// Store methods run (Do).
func Open(ctx context.Context, dir string) (Client, error) {
	s, err := operator.Open(dir)
	if err == nil {
		return storeClient{s}, nil
	}
	if !errors.Is(err, journal.ErrLocked) {
		return nil, err
	}
	return Dial(ctx, dir)
}

// ErrDaemonRunning reports a command that cannot reach a running daemon.
var ErrDaemonRunning = errors.New("the host daemon holds the store")

// OnStore is a Client on a store the command opened itself (read-only
// for a list or an inspect), whose requests Do runs.
func OnStore(s *operator.Store) Client { return storeClient{s} }

// storeClient is a Client on a store the command opened itself.
type storeClient struct{ s *operator.Store }

// Do runs req on the store (Do).
func (c storeClient) Do(req Request) (Reply, error) { return Do(c.s, req) }

// DoWithin runs req on the store at once.
func (c storeClient) DoWithin(_ time.Duration, req Request) (Reply, error) { return Do(c.s, req) }

// Close closes the store.
func (c storeClient) Close() error { return c.s.Close() }

// AccountName names the account of uid for the record of an answer
// (ApprovalsRequest.Account); "" when it has none (the answer still names
// uid:N).
func AccountName(uid uint32) string {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return ""
	}
	return u.Username
}
