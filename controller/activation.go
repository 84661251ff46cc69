package controller

import (
	"fmt"
	"net"
	"sort"

	"github.com/stewardrt/steward/wire"
)

// Names of the listeners Options.Listeners may carry: the
// FileDescriptorName= of steward's .socket units (package systemd's
// FDForeground and FDMCP). ListenerReverse (and ListenerAdvisor,
// advisor.go) are named only to be refused.
const (
	ListenerReverse    = "reverse"
	ListenerForeground = "foreground"
	ListenerMCP        = "mcp"
)

// errAdoptedReverse says why a passed reverse listener is refused: the host
// checks with SO_PEERCRED that the reverse socket's listener is the
// controller's account before it asks for a payer consent, and a socket
// systemd made reports pid 1, uid 0 (DESIGN.md section 2).
var errAdoptedReverse = fmt.Errorf("%w: a passed reverse listener cannot be served: the host's SO_PEERCRED check would see systemd (uid 0), not the controller; the controller binds the reverse socket itself (remove its .socket unit)", ErrConfig)

// checkAdopted refuses a passed listener with a name Serve does not know,
// a passed reverse or advisor listener (errAdoptedReverse,
// errAdoptedAdvisor), or one bound at another
// path than the config names for it: the channel of every custody
// connection is bound to the socket path, so a listener at another path
// would serve channels neither side can agree on. Nothing passed is
// ignored.
func checkAdopted(ls map[string]*net.UnixListener, s Sockets) error {
	if _, ok := ls[ListenerReverse]; ok {
		return errAdoptedReverse
	}
	if _, ok := ls[ListenerAdvisor]; ok {
		return errAdoptedAdvisor
	}
	paths := map[string]string{ListenerForeground: s.Foreground, ListenerMCP: s.MCP}
	names := make([]string, 0, len(ls))
	for name := range ls {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want, ok := paths[name]
		if !ok {
			return fmt.Errorf("%w: passed listener %q is neither %s nor %s", ErrConfig, name, ListenerForeground, ListenerMCP)
		}
		l := ls[name]
		if l == nil {
			return fmt.Errorf("%w: passed listener %q is nil", ErrConfig, name)
		}
		addr, _ := l.Addr().(*net.UnixAddr)
		if addr == nil || addr.Name != want {
			return fmt.Errorf("%w: passed listener %q is bound at %v, but the config's socket for it is %s", ErrConfig, name, l.Addr(), want)
		}
	}
	return nil
}

// bindOrAdopt binds cfg.Path itself, or, when systemd passed a listener for
// it, serves that one with the same peer check, refusal and caps. The mode
// and owner of a passed socket are its .socket unit's.
func bindOrAdopt(pre *net.UnixListener, cfg wire.ListenConfig) (*wire.Listener, error) {
	if pre == nil {
		return wire.Listen(cfg)
	}
	return wire.NewListener(pre, cfg), nil
}

// health reports why the controller can no longer serve, or nil: a journal
// stopped by a failed fdatasync refuses every later append (and Serve
// exits), so every
// call would be refused. It is cheap (a copy of the journal's summary) and
// feeds systemd's watchdog, which restarts the daemon when it fails.
func (c *Controller) health() error {
	if f := c.j.Summary().Failure; f != "" {
		return fmt.Errorf("controller journal %s failed: %s", c.cfg.JournalDir(), f)
	}
	return nil
}

// closeListeners closes every passed listener; closing one already closed
// (through the wire.Listener that served it) does nothing.
func closeListeners(ls map[string]*net.UnixListener) {
	for _, l := range ls {
		if l != nil {
			l.Close()
		}
	}
}
