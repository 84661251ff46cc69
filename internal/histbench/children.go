package histbench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// readyWithin bounds a child's start, from exec to its ready line: a
// daemon that replays a long history is slow, never this slow.
const readyWithin = 10 * time.Minute

// child is a daemon the generator runs: its stdout lines come on lines,
// its stderr goes to a log file.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // nil for a child that reads none
	lines chan string    // stdout, closed at its end
	ended chan struct{}  // closed once reaped
	err   error          // its exit, once ended
	log   string
}

// startChild runs bin with args and returns once a stdout line starts
// with ready. withStdin gives the child a pipe (the generator daemons'
// offset lines); env is added to the generator's own.
func startChild(name, logDir, bin string, args, env []string, ready string, withStdin bool) (*child, error) {
	c := &child{name: name, cmd: exec.Command(bin, args...), lines: make(chan string, 16), ended: make(chan struct{}),
		log: filepath.Join(logDir, name+".log")}
	logf, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	c.cmd.Stderr = logf
	c.cmd.Env = append(os.Environ(), env...)
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if withStdin {
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.err = c.cmd.Wait()
		close(c.ended)
	}()
	if _, err := c.next(ready, readyWithin); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// next returns the next stdout line, which must start with prefix.
func (c *child) next(prefix string, within time.Duration) (string, error) {
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.ended
			return "", fmt.Errorf("%s exited (%v) before %q; its log is %s", c.name, c.err, prefix, c.log)
		}
		if !strings.HasPrefix(line, prefix) {
			return "", fmt.Errorf("%s said %q, not %q; its log is %s", c.name, line, prefix, c.log)
		}
		return line, nil
	case <-time.After(within):
		return "", fmt.Errorf("%s: no %q within %v; its log is %s", c.name, prefix, within, c.log)
	}
}

// setOffset moves the child's clock and returns once it reads the new
// offset.
func (c *child) setOffset(ms int64) error {
	v := strconv.FormatInt(ms, 10)
	if _, err := io.WriteString(c.stdin, offsetWord+" "+v+"\n"); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	_, err := c.next(offsetWord+" "+v, time.Minute)
	return err
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop asks the child to stop (SIGTERM) and waits for it: a clean stop
// (exit 0) or an error naming its log.
func (c *child) stop() error {
	c.cmd.Process.Signal(syscall.SIGTERM)
	<-c.ended
	if c.err != nil {
		return fmt.Errorf("%s stopped with %v; its log is %s", c.name, c.err, c.log)
	}
	return nil
}

// waitDead waits for a child that kills itself (a failpoint): its exit
// must be SIGKILL's.
func (c *child) waitDead(within time.Duration) error {
	select {
	case <-c.ended:
	case <-time.After(within):
		c.kill()
		return fmt.Errorf("%s did not reach its failpoint within %v", c.name, within)
	}
	var ee *exec.ExitError
	if errors.As(c.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return nil
		}
	}
	return fmt.Errorf("%s ended with %v, not at its failpoint; its log is %s", c.name, c.err, c.log)
}

// kill ends the child at once and reaps it.
func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.ended
}
