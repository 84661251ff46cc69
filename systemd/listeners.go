package systemd

import (
	"errors"
	"fmt"
	"net"

	"github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"
)

// ErrActivation is wrapped by every error about the sockets systemd passed.
var ErrActivation = errors.New("socket activation")

// Listeners returns the listening Unix stream sockets systemd passed to this
// process (LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES; sd_listen_fds(3)), keyed
// by their FileDescriptorName= (FDForeground, FDMCP). It unsets
// those variables, so a second call returns an empty map, as does a process
// that was not socket-activated: the caller then binds its own sockets.
//
// Every passed descriptor must be a listening AF_UNIX SOCK_STREAM socket with
// a name of its own; anything else is an error naming the descriptor, and
// all descriptors are closed. Nothing passed is silently dropped.
func Listeners() (map[string]*net.UnixListener, error) {
	files := activation.Files(true)
	out := make(map[string]*net.UnixListener, len(files))
	fail := func(err error) (map[string]*net.UnixListener, error) {
		for _, l := range out {
			l.Close()
		}
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	for i, f := range files {
		name := f.Name()
		fd := int(f.Fd())
		if _, dup := out[name]; dup {
			return fail(fmt.Errorf("%w: fd %d: name %q is passed twice", ErrActivation, fd, name))
		}
		if err := checkListening(fd); err != nil {
			return fail(fmt.Errorf("%w: fd %d (%s): %w", ErrActivation, fd, name, err))
		}
		l, err := net.FileListener(f)
		if err != nil {
			return fail(fmt.Errorf("%w: fd %d (%s): %w", ErrActivation, fd, name, err))
		}
		ul, ok := l.(*net.UnixListener)
		if !ok {
			l.Close()
			return fail(fmt.Errorf("%w: fd %d (%s): a %T, not a Unix listener", ErrActivation, fd, name, l))
		}
		// The socket file belongs to the .socket unit: closing must not
		// remove it. (FileListener does not set unlink; say so anyway.)
		ul.SetUnlinkOnClose(false)
		out[name] = ul
		f.Close() // FileListener holds its own duplicate.
		files[i] = nil
	}
	return out, nil
}

// checkListening refuses a descriptor that is not a listening AF_UNIX
// SOCK_STREAM socket.
func checkListening(fd int) error {
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return fmt.Errorf("not a socket: %v", err)
	}
	if domain != unix.AF_UNIX {
		return fmt.Errorf("socket domain %d, not AF_UNIX", domain)
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return err
	}
	if typ != unix.SOCK_STREAM {
		return fmt.Errorf("socket type %d, not SOCK_STREAM", typ)
	}
	acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err != nil {
		return err
	}
	if acc == 0 {
		return errors.New("socket is not listening")
	}
	return nil
}
