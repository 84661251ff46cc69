// Package foreground is the protocol of the controller's foreground
// socket: the model-free tool interface that the root installer's
// controller-tool, controller-attempt-* verbs and the controller's own
// `attempts` commands speak. It is a package of its own so that the
// installer links this and not the controller.
//
// A request is a 4-byte big-endian length and deterministic CBOR of
// Request, at most wire.MaxRequestFrame bytes, unsigned; the reply is a
// Reply, at most wire.MaxReplyFrame. The socket admits its peers by
// SO_PEERCRED alone (root and the controller's own account by default):
// whoever may connect holds no key and needs none.
package foreground

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/stewardrt/steward/wire"
)

// Operations of a Request.
const (
	OpSubmit   = "submit"   // run a tool: {tool, arguments} -> {id, state, result}
	OpResult   = "result"   // {id} -> {id, state, result}
	OpAck      = "ack"      // {id} -> {id}: the result is forgotten
	OpAttempts = "attempts" // {} -> result: the uncertain attempts, JSON
	OpInspect  = "inspect"  // {id: attempt} -> result: the inspection, JSON
	OpResolve  = "resolve"  // {id: attempt} -> result: the inspection after resolving, JSON
	// OpHistorySnapshot makes a snapshot of the controller's ledger now:
	// {} -> result: its name and mark, JSON. Only the controller's own
	// account may ask it (the journal's account: its history is its own).
	OpHistorySnapshot = "history-snapshot"
	// OpHistoryArchive snapshots, exports the receipts and archives the
	// journal's segments before the snapshot's mark: {dir: the archive
	// directory, absolute} -> result: what was exported and archived,
	// JSON. Only the controller's own account may ask it.
	OpHistoryArchive = "history-archive"
	// OpClockAccept accepts the wall clock's day as the payer's, when it
	// is behind the latest day recorded: {} -> result: the day and the
	// day it had, JSON. Only the controller's own account may ask it.
	OpClockAccept = "clock-accept"
)

// The tools an OpSubmit may name (Request.Tool): the controller's
// oracle_discover and oracle_call, owned here because the root installer,
// which sends them, does not link the controller.
const (
	ToolDiscover = "oracle_discover"
	ToolCall     = "oracle_call"
)

// States of a Reply.
const (
	StateRunning     = "running"
	StateDone        = "done"
	StateInterrupted = "interrupted" // the controller restarted before the result was journaled
)

// Request is one request on the foreground socket.
type Request struct {
	Op        string `cbor:"op"`
	ID        string `cbor:"id"`
	Tool      string `cbor:"tool"`
	Arguments []byte `cbor:"arguments"` // the tool's arguments, JSON
	// Dir is OpHistoryArchive's archive directory; absent otherwise, so
	// that every other request encodes as it did before it.
	Dir string `cbor:"dir,omitempty"`
}

// Reply answers a Request.
type Reply struct {
	ID     string `cbor:"id"`
	State  string `cbor:"state"`
	Result []byte `cbor:"result"` // JSON
	Error  string `cbor:"error"`  // one line when the request was refused
	// Refused says that Error is a refusal that changed nothing (a
	// history operation's: the command exits 2), not a failure; absent
	// otherwise.
	Refused bool `cbor:"refused,omitempty"`
}

// ErrRefused wraps a refusal answered on the foreground socket.
var ErrRefused = errors.New("foreground request refused")

// WriteReply writes one reply frame.
func WriteReply(w io.Writer, r Reply) error {
	b, err := wire.Marshal(r)
	if err != nil {
		return err
	}
	return wire.WriteFrame(w, b, wire.MaxReplyFrame)
}

// Call sends one request on the foreground socket at path, which must be
// owned by owner (the controller's account): bound by the controller
// itself or made for it by systemd (wire.DialOwned says why both pass).
// A reply carrying an error is returned as an error wrapping ErrRefused,
// with the reply.
func Call(ctx context.Context, path string, owner uint32, req Request) (Reply, error) {
	conn, err := wire.DialOwned(ctx, path, owner)
	if err != nil {
		return Reply{}, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	b, err := wire.Marshal(req)
	if err != nil {
		return Reply{}, err
	}
	// A frame past the bound is still sent: the controller owns the bound
	// and answers with the refusal naming it, possibly before it has read
	// the whole frame, so the reply is read while the frame is written.
	werr := make(chan error, 1)
	go func() { werr <- wire.WriteFrame(conn, b, len(b)) }()
	frame, err := wire.ReadFrame(bufio.NewReader(conn), wire.MaxReplyFrame)
	if err != nil {
		if e := <-werr; e != nil {
			err = e
		}
		return Reply{}, fmt.Errorf("foreground %s: %w", req.Op, err)
	}
	var rep Reply
	if err := wire.Unmarshal(frame, &rep); err != nil {
		return Reply{}, fmt.Errorf("foreground %s: %w", req.Op, err)
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("%w: %s", ErrRefused, rep.Error)
	}
	return rep, nil
}
