package histbench

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// notifySocket is a NOTIFY_SOCKET as systemd binds it: a datagram socket
// that learns each message's sender from SO_PASSCRED.
type notifySocket struct {
	path string
	dir  string
	conn *net.UnixConn
}

// listenNotify binds a notify socket in a new short directory under the
// system's temporary directory (a socket path has at most 107 bytes).
func listenNotify() (*notifySocket, error) {
	dir, err := os.MkdirTemp("", "hbn")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	raw, err := conn.SyscallConn()
	if err == nil {
		var serr error
		err = raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) })
		err = errors.Join(err, serr)
	}
	if err != nil {
		conn.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &notifySocket{path: path, dir: dir, conn: conn}, nil
}

func (n *notifySocket) Close() error {
	return errors.Join(n.conn.Close(), os.RemoveAll(n.dir))
}

// ready waits for READY=1 from pid (messages of an earlier process may
// still be queued), within the bound, unless exited closes first.
func (n *notifySocket) ready(pid int, within time.Duration, exited <-chan struct{}) error {
	n.conn.SetReadDeadline(time.Now().Add(within))
	// The process's end cuts the wait short: the read's deadline is moved
	// to now.
	waiting := make(chan struct{})
	defer close(waiting)
	go func() {
		select {
		case <-exited:
			n.conn.SetReadDeadline(time.Now())
		case <-waiting:
		}
	}()
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	for {
		k, oobn, _, _, err := n.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			select {
			case <-exited:
				return errors.New("it exited before READY=1")
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("no READY=1 within %v", within)
			}
			return err
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			continue
		}
		cred, err := unix.ParseUnixCredentials(&msgs[0])
		if err != nil || int(cred.Pid) != pid {
			continue
		}
		for _, l := range strings.Split(string(buf[:k]), "\n") {
			if l == "READY=1" {
				return nil
			}
		}
	}
}
