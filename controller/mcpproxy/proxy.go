package mcpproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// MaxLine bounds one JSON-RPC line from the agent, including its newline
// (DESIGN.md section 8). This is the one place that owns the number; the
// controller's MCP socket reads it from here.
const MaxLine = 65536

// RunProxy is `steward-controller mcp`: the keyless stdio proxy an MCP
// client launches. It holds no key and opens no journal. Lines from stdin
// of at most MaxLine bytes including the newline go to the MCP socket as
// the bytes read, never re-encoded; a longer line is drained to its
// newline without being kept, answered on stdout with a JSON-RPC error
// naming the bound and carrying the line's own id (found by IDScan as the
// line is drained; id null when it has none that can be read, since the
// official clients close a session on an error whose id is null), and never
// forwarded. A line within the bound that is not JSON, or that nests past
// MaxNesting, is answered the same way (CheckLine) and not forwarded either;
// a batch (a JSON array) is forwarded when it is an array of one to
// MaxBatchMembers JSON values (CheckBatch), its members' checks left to
// the socket, which answers each request of a batch it refuses.
// Replies from the socket are copied to stdout as bytes, whole
// lines at a time so that an error line is never spliced into a reply.
//
// stdin is switched to non-blocking mode and read through the runtime's
// poller: with a blocking stdin read a go-sdk stdio server stalled for
// exactly 60 s about once in 200,000 calls.
//
// When stdin ends, every call forwarded before it (a request with an id)
// is answered before the proxy closes its side of the socket: the
// controller's go-sdk server stops writing answers the moment it reads the
// end of its connection, so a half-close at stdin's end lost the answer to
// a call still in flight. The proxy therefore reads the top level of each
// line it forwards and copies (its id and whether it has a method, never
// the params or result: headOf) to count the calls open, and half-closes
// only once none is. It waits at most ProxyAnswerBound for that and for
// the controller to end the session; past the bound it closes the
// connection and fails, naming how many calls went unanswered. (The
// controller still finishes and journals a dispatched call it can no
// longer answer; the same requestId replays that answer later without a
// second charge.)
//
// RunProxy returns nil when stdin ends and the socket has sent its last
// reply, or the error that ended it: the controller closing the connection
// while stdin is open or while a call is unanswered, the bound, a failed
// read or write, or ctx.
func RunProxy(ctx context.Context, socketPath string, stdin *os.File, stdout io.Writer) error {
	return runProxy(ctx, socketPath, stdin, stdout, ProxyAnswerBound)
}

// ProxyAnswerBound bounds how long the proxy waits, once stdin has ended,
// for the answers to the calls it forwarded and the end of the session. The longest call is
// one to an operation marked for approval: parked for its window (at most
// 5 min, msg.MaxApprovalPark), then collected and delivered under a
// deadline 300 s away (ctlconf.MaxDispatchTimeoutMs), which the controller
// waits for until 4 s past it (twice msg.DeadlineTolerance); the rest is
// room for the controller's and the host's durable points. (This package
// links neither, so the numbers are repeated here: 5 + 5 min and a minute.)
const ProxyAnswerBound = 11 * time.Minute

func runProxy(ctx context.Context, socketPath string, stdin *os.File, stdout io.Writer, answerBound time.Duration) error {
	in, err := pollable(stdin)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(stdin)
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return fmt.Errorf("steward mcp: %w", err)
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close(); in.SetReadDeadline(aLongTimeAgo) })
	defer stop()

	var outMu sync.Mutex
	calls := newOpenCalls()
	replies := make(chan error, 1)
	go func() { replies <- copyLines(stdout, conn, &outMu, calls) }()
	requests := make(chan error, 1)
	go func() { requests <- forwardLines(in, conn, stdout, &outMu, calls) }()

	select {
	case err := <-requests:
		if ctx.Err() != nil {
			<-replies
			return ctx.Err()
		}
		if err != nil {
			// The socket refused a write (the controller closed it) or
			// stdin failed. What the controller wrote before (a refusal
			// line) is still read and copied, for at most the bound.
			conn.CloseWrite()
			bound := time.AfterFunc(answerBound, func() { conn.Close() })
			<-replies
			bound.Stop()
			return err
		}
		return drainAnswers(ctx, conn, calls, replies, answerBound)
	case err := <-replies:
		// The controller closed the connection (it stopped, or refused
		// this peer): nothing more can be answered, so the proxy ends and
		// the MCP client sees its server go away.
		in.SetReadDeadline(aLongTimeAgo)
		<-requests
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			err = controllerClosed(calls.open())
		}
		return err
	}
}

// controllerClosed is the error of a session the controller ended.
func controllerClosed(open int) error {
	if open == 0 {
		return errors.New("steward mcp: the controller closed the connection")
	}
	return fmt.Errorf("steward mcp: the controller closed the connection with %d %s unanswered", open, plural(open, "call", "calls"))
}

// drainAnswers runs once stdin has ended: it waits until every forwarded
// call is answered, then half-closes the socket so that the controller ends
// the session, and copies what it still writes until it does. All of that
// takes at most answerBound.
func drainAnswers(ctx context.Context, conn *net.UnixConn, calls *openCalls, replies <-chan error, answerBound time.Duration) error {
	calls.stdinEnded()
	bound := time.NewTimer(answerBound)
	defer bound.Stop()
	answered := calls.answered
	for {
		select {
		case <-answered:
			conn.CloseWrite()
			answered = nil // a nil channel: this case is done
		case err := <-replies:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				return err
			}
			if n := calls.open(); n > 0 {
				return controllerClosed(n)
			}
			return nil
		case <-bound.C:
			conn.Close()
			<-replies
			if n := calls.open(); n > 0 {
				return fmt.Errorf("steward mcp: %d %s unanswered %s after stdin ended (the bound)", n, plural(n, "call", "calls"), answerBound)
			}
			return fmt.Errorf("steward mcp: every call was answered, but the controller had not closed the connection %s after stdin ended (the bound)", answerBound)
		case <-ctx.Done():
			<-replies
			return ctx.Err()
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// aLongTimeAgo, as a read deadline, wakes a blocked read at once.
var aLongTimeAgo = time.Unix(1, 0)

// pollable returns stdin as a file read through the runtime's poller: the
// descriptor is set non-blocking first, so that os.NewFile registers it.
// The descriptor is taken through SyscallConn because Fd() would set it
// back to blocking mode.
func pollable(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("steward mcp: stdin: %w", err)
	}
	var fd uintptr
	var already bool
	var serr error
	if err := rc.Control(func(d uintptr) {
		fd = d
		flags, err := unix.FcntlInt(d, unix.F_GETFL, 0)
		if err != nil {
			serr = err
			return
		}
		if already = flags&unix.O_NONBLOCK != 0; !already {
			serr = unix.SetNonblock(int(d), true)
		}
	}); err != nil {
		return nil, fmt.Errorf("steward mcp: stdin: %w", err)
	}
	if serr != nil {
		return nil, fmt.Errorf("steward mcp: stdin: %w", serr)
	}
	if already {
		// os opened it non-blocking (a pipe from os.Pipe, or a descriptor
		// inherited non-blocking): f is already read through the poller,
		// and a second registration of the descriptor would fail.
		return f, nil
	}
	// The duplicate *os.File shares the descriptor; the caller keeps f
	// alive for as long as it is used so that f's finalizer cannot close it.
	return os.NewFile(fd, f.Name()), nil
}

// ErrorLine is one JSON-RPC error line answering the request whose id is
// id (a JSON string or number token, as IDScan finds it; nil answers with
// id null, for a line whose id cannot be read).
func ErrorLine(id []byte, code int, message string) []byte {
	if id == nil {
		id = []byte("null")
	}
	text, _ := json.Marshal(message)
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`+"\n", id, code, text)
}

// CodeInvalidRequest is JSON-RPC's code for a request that is not a valid
// request object; a line past MaxLine is answered with it.
const CodeInvalidRequest = -32600

// LineTooLong is the text of the error answering a request line of n bytes,
// past MaxLine.
func LineTooLong(n int64) string {
	return fmt.Sprintf("request line of %d bytes exceeds the bound of %d bytes including the newline", n, MaxLine)
}

// lineTooLong is the proxy's answer to a request line of n bytes whose id
// (nil: none could be read) IDScan found while the line was drained.
func lineTooLong(n int64, id []byte) []byte {
	return ErrorLine(id, CodeInvalidRequest, "steward mcp: "+LineTooLong(n))
}

// checkRequestLine is CheckLine for a line that holds one message, and
// CheckBatch for a batch, whose members' nesting and messages the MCP
// socket checks one by one, answering each with its own id.
func checkRequestLine(line []byte) (code int, message string, id []byte, ok bool) {
	if IsBatch(line) {
		_, code, message, ok = CheckBatch(line)
		return code, message, nil, ok
	}
	return CheckLine(line)
}

// forwardLines copies bounded lines from in to conn, counting the calls
// in each before it is written.
func forwardLines(in io.Reader, conn io.Writer, stdout io.Writer, outMu *sync.Mutex, calls *openCalls) error {
	br := bufio.NewReaderSize(in, MaxLine)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil || (err == io.EOF && len(line) > 0):
			if code, text, id, ok := checkRequestLine(line); !ok {
				// Answered here and never forwarded: the session goes on.
				outMu.Lock()
				_, werr := stdout.Write(ErrorLine(id, code, "steward mcp: "+text))
				outMu.Unlock()
				if werr != nil {
					return fmt.Errorf("steward mcp: writing stdout: %w", werr)
				}
				if err == io.EOF {
					return nil
				}
				continue
			}
			calls.forwarding(line)
			if _, werr := conn.Write(line); werr != nil {
				return fmt.Errorf("steward mcp: writing to the MCP socket: %w", werr)
			}
			if err == io.EOF {
				return nil
			}
		case errors.Is(err, bufio.ErrBufferFull):
			// The line is drained, never kept: the scan reads it for the
			// id its answer carries.
			var scan IDScan
			scan.Write(line)
			n := int64(len(line))
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				scan.Write(line)
				n += int64(len(line))
			}
			if err != nil && err != io.EOF {
				return fmt.Errorf("steward mcp: reading stdin: %w", err)
			}
			outMu.Lock()
			_, werr := stdout.Write(lineTooLong(n, scan.ID()))
			outMu.Unlock()
			if werr != nil {
				return fmt.Errorf("steward mcp: writing stdout: %w", werr)
			}
			if err == io.EOF {
				return nil
			}
		case err == io.EOF:
			return nil
		default:
			return fmt.Errorf("steward mcp: reading stdin: %w", err)
		}
	}
}

// copyLines copies conn to stdout, holding outMu across each whole line,
// and then counts the answers in the line. A line longer than the read
// buffer is written out piece by piece as it arrives and kept whole only
// to be counted; the controller bounds its reply lines (reply frame).
func copyLines(stdout io.Writer, conn io.Reader, outMu *sync.Mutex, calls *openCalls) error {
	br := bufio.NewReaderSize(conn, 64<<10)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			var long []byte
			outMu.Lock()
			for {
				if _, werr := stdout.Write(chunk); werr != nil {
					outMu.Unlock()
					return fmt.Errorf("steward mcp: writing stdout: %w", werr)
				}
				if !errors.Is(err, bufio.ErrBufferFull) {
					break
				}
				long = append(long, chunk...)
				chunk, err = br.ReadSlice('\n')
			}
			outMu.Unlock()
			if len(long) > 0 {
				chunk = append(long, chunk...)
			}
			calls.copied(chunk)
		}
		if err != nil {
			if err == io.EOF || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("steward mcp: reading the MCP socket: %w", err)
		}
	}
}
