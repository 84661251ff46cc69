package controller

import (
	"bufio"
	"context"
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

// RunProxy is `steward-controller mcp`: the keyless stdio proxy an MCP
// client launches. It holds no key and opens no journal. Lines from stdin
// of at most MaxMCPLine bytes including the newline go to the MCP socket as
// bytes, unparsed; a longer line is drained to its newline without being
// kept, answered on stdout with a JSON-RPC error naming the bound (id null:
// the line is never parsed) and never forwarded. Replies from the socket
// are copied to stdout as bytes, whole lines at a time so that an error
// line is never spliced into a reply.
//
// stdin is switched to non-blocking mode and read through the runtime's
// poller: with a blocking stdin read a go-sdk stdio server stalled for
// exactly 60 s about once in 200,000 calls.
//
// RunProxy returns nil when stdin ends and the socket has sent its last
// reply, or the error that ended it.
func RunProxy(ctx context.Context, socketPath string, stdin *os.File, stdout io.Writer) error {
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
	replies := make(chan error, 1)
	go func() { replies <- copyLines(stdout, conn, &outMu) }()
	requests := make(chan error, 1)
	go func() { requests <- forwardLines(in, conn, stdout, &outMu) }()

	select {
	case err := <-requests:
		if err != nil && ctx.Err() == nil {
			// The socket refused a write: the controller closed it. What
			// it wrote before (a refusal line) is still read and copied.
			conn.CloseWrite()
			<-replies
			return err
		}
		// stdin ended: let the controller answer what it has, then stop.
		conn.CloseWrite()
		err = <-replies
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
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
			err = errors.New("steward mcp: the controller closed the connection")
		}
		return err
	}
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

// lineTooLong is the JSON-RPC error for a request line past the bound.
func lineTooLong(n int64) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"steward mcp: request line of %d bytes exceeds the bound of %d bytes including the newline"}}`+"\n", n, MaxMCPLine)
}

// forwardLines copies bounded lines from in to conn.
func forwardLines(in io.Reader, conn io.Writer, stdout io.Writer, outMu *sync.Mutex) error {
	br := bufio.NewReaderSize(in, MaxMCPLine)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil || (err == io.EOF && len(line) > 0):
			if _, werr := conn.Write(line); werr != nil {
				return fmt.Errorf("steward mcp: writing to the MCP socket: %w", werr)
			}
			if err == io.EOF {
				return nil
			}
		case errors.Is(err, bufio.ErrBufferFull):
			n := int64(len(line))
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				n += int64(len(line))
			}
			if err != nil && err != io.EOF {
				return fmt.Errorf("steward mcp: reading stdin: %w", err)
			}
			outMu.Lock()
			_, werr := stdout.Write(lineTooLong(n))
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

// copyLines copies conn to stdout, holding outMu across each whole line.
func copyLines(stdout io.Writer, conn io.Reader, outMu *sync.Mutex) error {
	br := bufio.NewReaderSize(conn, 64<<10)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			outMu.Lock()
			for {
				if _, werr := stdout.Write(chunk); werr != nil {
					outMu.Unlock()
					return fmt.Errorf("steward mcp: writing stdout: %w", werr)
				}
				if !errors.Is(err, bufio.ErrBufferFull) {
					break
				}
				chunk, err = br.ReadSlice('\n')
			}
			outMu.Unlock()
		}
		if err != nil {
			if err == io.EOF || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("steward mcp: reading the MCP socket: %w", err)
		}
	}
}
