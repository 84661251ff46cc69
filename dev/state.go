package dev

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// DefaultStateDir is the state directory of `steward-dev` without --state,
// one per user, which every such start reuses:
// $XDG_STATE_HOME/steward-dev, or ~/.local/state/steward-dev.
func DefaultStateDir() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "steward-dev"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("steward-dev: no --state and no home directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "steward-dev"), nil
}

// stateDir is the state directory one Run uses and what becomes of it.
type stateDir struct {
	path string
	temp bool // made for this run (--once without --state): removed unless kept
	keep bool
}

// chooseState picks the state directory of a run: the one given; else,
// with Once, a new temporary directory (the default is never touched);
// else the default one. It says which on w.
func chooseState(w io.Writer, opts Options) (stateDir, error) {
	switch {
	case opts.State != "":
		return stateDir{path: opts.State}, nil
	case opts.Once:
		dir, err := os.MkdirTemp("", "steward-dev-once-")
		if err != nil {
			return stateDir{}, fmt.Errorf("steward-dev: a temporary state directory: %w", err)
		}
		keep := "removed when it ends (--keep keeps it)"
		if opts.Keep {
			keep = "kept when it ends (--keep)"
		}
		fmt.Fprintf(w, "steward-dev: a temporary state directory %s for this run, %s\n", dir, keep)
		return stateDir{path: dir, temp: true, keep: opts.Keep}, nil
	}
	dir, err := DefaultStateDir()
	if err != nil {
		return stateDir{}, err
	}
	fmt.Fprintf(w, "steward-dev: the state directory %s (the default; every start without --state reuses it; stopped, `rm -rf %s` removes it)\n", dir, dir)
	noteEarlierStates(w, dir)
	return stateDir{path: dir}, nil
}

// done removes a temporary state directory that is not to be kept, once
// the stack has stopped, and says so.
func (s stateDir) done(w io.Writer) error {
	if !s.temp {
		return nil
	}
	if s.keep {
		fmt.Fprintf(w, "steward-dev: kept the temporary state directory %s (--keep)\n", s.path)
		return nil
	}
	if err := os.RemoveAll(s.path); err != nil {
		return fmt.Errorf("steward-dev: remove the temporary state directory: %w", err)
	}
	fmt.Fprintf(w, "steward-dev: removed the temporary state directory %s\n", s.path)
	return nil
}

// earlierState is the name of a state directory an earlier steward-dev
// made in the default directory at every start (its UTC time).
var earlierState = regexp.MustCompile(`^[0-9]{8}-[0-9]{6}(-[0-9]+)?$`)

// noteEarlierStates says how many state directories of earlier versions,
// which made a new one of about 193 MB at every start, are left in the
// default directory, and how to remove them. It removes nothing.
func noteEarlierStates(w io.Writer, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() && earlierState.MatchString(e.Name()) {
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(w, "steward-dev: %s also holds %d state directories of earlier versions (named by their start time, up to 193 MB each), no longer used; stopped, `rm -rf %s/20*-*` removes them\n",
			dir, n, dir)
	}
}
