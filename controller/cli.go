package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
)

// ListAttempts reads the journal of the config at cfgPath read-only (the
// daemon may be running: what is durable, from the newest snapshot) and
// returns the attempts that are uncertain: sent, or possibly sent, and
// never answered.
func ListAttempts(cfgPath string) ([]Attempt, error) {
	cfg, _, err := LoadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	k, led, err := openReadOnly(cfg.JournalDir(), nil)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	return led.UncertainAttempts(), nil
}

// AttemptsOf is the attempts of list that agent made (Attempt.Agent:
// "uid:N" or "foreground" for attempts begun before agents had names).
func AttemptsOf(list []Attempt, agent string) []Attempt {
	out := []Attempt{}
	for _, a := range list {
		if a.Agent == agent {
			out = append(out, a)
		}
	}
	return out
}

// InspectAttempt asks the host what it recorded of an attempt. While the
// daemon runs (it holds the journal lock) the request goes through its
// foreground socket; otherwise the journal is opened here.
func InspectAttempt(ctx context.Context, cfgPath, id string, log *slog.Logger) (Inspection, error) {
	return attemptOp(ctx, cfgPath, id, foreground.OpInspect, log)
}

// ResolveAttempt records what the host says of an uncertain attempt (see
// Controller.Resolve), through the daemon when it runs.
func ResolveAttempt(ctx context.Context, cfgPath, id string, log *slog.Logger) (Inspection, error) {
	return attemptOp(ctx, cfgPath, id, foreground.OpResolve, log)
}

// cliIndexWait bounds how long a command waits for the history index's
// lock before it takes the daemon to be running (which holds it as long
// as it runs) and goes through its foreground socket.
const cliIndexWait = 200 * time.Millisecond

func attemptOp(ctx context.Context, cfgPath, id, op string, log *slog.Logger) (Inspection, error) {
	c, err := open(cfgPath, log, historyOpts{lockTimeout: cliIndexWait}, nil)
	if errors.Is(err, journal.ErrLocked) || errors.Is(err, index.ErrLocked) {
		cfg, _, cerr := LoadConfig(cfgPath)
		if cerr != nil {
			return Inspection{}, cerr
		}
		owner, oerr := stateOwner(cfg)
		if oerr != nil {
			return Inspection{}, oerr
		}
		rep, ferr := foreground.Call(ctx, cfg.Sockets.Foreground, owner, foreground.Request{Op: op, ID: id})
		if ferr != nil && rep.Refused {
			return Inspection{}, &daemonRefusal{rep.Error}
		}
		if ferr != nil {
			return Inspection{}, fmt.Errorf("the controller daemon is running; through its foreground socket: %w", ferr)
		}
		var ins Inspection
		if err := json.Unmarshal(rep.Result, &ins); err != nil {
			return Inspection{}, fmt.Errorf("foreground %s: %w", op, err)
		}
		return ins, nil
	}
	if err != nil {
		return Inspection{}, err
	}
	defer c.Close()
	if op == foreground.OpResolve {
		return c.Resolve(ctx, id, "cli")
	}
	return c.Inspect(ctx, id)
}

// JournalSummary is what `journal inspect` shows.
type JournalSummary struct {
	Dir       string             `json:"dir"`
	Owner     string             `json:"owner"`
	Format    string             `json:"format"`
	Binding   string             `json:"binding"`
	LastSeq   uint64             `json:"lastSeq"`
	Head      string             `json:"head"`
	Recovered []journal.Recovery `json:"recoveries,omitempty"`
	Uncertain []Attempt          `json:"uncertain"`
}

// InspectJournal summarizes the controller journal read-only.
func InspectJournal(cfgPath string) (JournalSummary, error) {
	cfg, _, err := LoadConfig(cfgPath)
	if err != nil {
		return JournalSummary{}, err
	}
	k, led, err := openReadOnly(cfg.JournalDir(), nil)
	if err != nil {
		return JournalSummary{}, err
	}
	defer k.Close()
	j := k.Journal()
	open := led.UncertainAttempts()
	b, h := j.Binding(), j.Head()
	return JournalSummary{
		Dir: cfg.JournalDir(), Owner: j.Owner(), Format: j.Format(),
		Binding: fmt.Sprintf("%x", b), LastSeq: j.LastSeq(), Head: fmt.Sprintf("%x", h),
		Recovered: j.Recoveries(), Uncertain: open,
	}, nil
}

// stateOwner returns the account the controller runs as: the owner of its
// state directory (systemd's StateDirectory= makes it the service's User=).
// The foreground socket must belong to that account whether the daemon
// bound it or systemd made it for the daemon.
func stateOwner(cfg *Config) (uint32, error) {
	fi, err := os.Stat(cfg.StateDir)
	if err != nil {
		return 0, fmt.Errorf("the controller's state directory: %w", err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid, nil
}
