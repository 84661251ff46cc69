package nspawn

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// notifySocket is the NOTIFY_SOCKET systemd-nspawn reports to: first
// "X_NSPAWN_LEADER_PID=PID" (the container's PID 1, as a host pid), then,
// with --notify-ready=yes, "READY=1" once the container's systemd is ready.
type notifySocket struct {
	path string
	conn *net.UnixConn
	msgs chan string
}

func listenNotify(path string) (*notifySocket, error) {
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, err
	}
	n := &notifySocket{path: path, conn: conn, msgs: make(chan string, 16)}
	go n.read()
	return n, nil
}

// read passes every datagram on until the socket is closed.
func (n *notifySocket) read() {
	defer close(n.msgs)
	buf := make([]byte, 4096)
	for {
		k, err := n.conn.Read(buf)
		if err != nil {
			return
		}
		n.msgs <- string(buf[:k])
	}
}

func (n *notifySocket) close() {
	n.conn.Close()
	os.Remove(n.path)
}

// errNotifyClosed is returned when the socket closes before READY=1.
var errNotifyClosed = errors.New("the notify socket closed")

// parseNotify reads one message: it reports the leader pid it names (0 if
// none) and whether it says READY=1.
func parseNotify(msg string) (leader int, ready bool, err error) {
	for _, kv := range strings.Split(msg, "\n") {
		switch {
		case kv == "READY=1":
			ready = true
		case strings.HasPrefix(kv, "X_NSPAWN_LEADER_PID="):
			leader, err = strconv.Atoi(strings.TrimPrefix(kv, "X_NSPAWN_LEADER_PID="))
			if err != nil || leader <= 1 {
				return 0, false, fmt.Errorf("nspawn sent %q", kv)
			}
		}
	}
	return leader, ready, nil
}
