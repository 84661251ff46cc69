package installer

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/stewardrt/steward/oracleops"
)

// ExitRefused is the exit status of an operator verb whose input was
// refused: a file that fails its checks, a malformed request, a bundle
// that does not verify, or an enrollment request that does not match the
// controller. It equals ExitUsage. A failure of the system or a state that
// blocks the verb (the controller running, unresolved attempts, an I/O
// error) is ExitFail.
const ExitRefused = 2

// refusef prints one line naming the verb and returns ExitRefused.
func (c *call) refusef(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "steward-installer %s: refused: %s\n", c.verb, fmt.Sprintf(format, a...))
	return ExitRefused
}

// controllerFiles is where the controller's files are: from its installed
// config, or the defaults of ControllerEnv when none is installed.
type controllerFiles struct {
	config     *installedConfig // nil when no config is installed
	bundle     string
	journalDir string
	foreground string
	uid        uint32 // the controller account's uid, when hasUID
	hasUID     bool
}

// locateController reads the installed config, if any, as whoever this
// process is now (call becomeController first where the controller's own
// files are concerned). needConfig refuses a missing config.
func (e ControllerEnv) locateController(needConfig bool) (controllerFiles, error) {
	if e.Config == "" {
		return controllerFiles{}, errors.New("no controller config path is set")
	}
	uid, _, hasUID, err := e.controllerIDs()
	if err != nil {
		return controllerFiles{}, err
	}
	var owners []uint32
	if hasUID {
		owners = append(owners, uid)
	}
	f := controllerFiles{uid: uid, hasUID: hasUID}
	ic, err := readInstalledConfig(e.Config, owners...)
	switch {
	case err == nil:
		f.config = &ic
		f.bundle = ic.cfg.Bundle
		f.journalDir = ic.cfg.JournalDir()
		f.foreground = ic.cfg.Sockets.Foreground
		return f, nil
	case errors.Is(err, errNoConfig) && !needConfig:
		f.bundle = e.Bundle
		f.journalDir = filepath.Join(e.StateDir, "journal")
		f.foreground = e.Foreground
		return f, nil
	}
	return controllerFiles{}, err
}

// checkRequestID refuses an id outside the oracle-operations id alphabet
// (1 to 80 of A-Za-z0-9_-) before it is sent anywhere.
func checkRequestID(id string) error {
	if len(id) == 0 || len(id) > oracleops.MaxIDLen {
		return fmt.Errorf("ID %q must be 1 to %d characters", id, oracleops.MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-') {
			return fmt.Errorf("ID %q has byte %q at offset %d, not one of A-Za-z0-9_-", id, b, i)
		}
	}
	return nil
}
