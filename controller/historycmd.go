package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
)

// SnapshotHistory makes a snapshot of the ledger of the controller of the
// config at cfgPath now (Controller.HistorySnapshot): through the running
// daemon's foreground socket when it runs, else on the stopped state here.
func SnapshotHistory(ctx context.Context, cfgPath string, log *slog.Logger) (SnapshotReport, error) {
	var rep SnapshotReport
	err := historyOp(ctx, cfgPath, log, foreground.Request{Op: foreground.OpHistorySnapshot}, &rep,
		func(c *Controller) (any, error) { return c.HistorySnapshot() })
	return rep, err
}

// ArchiveHistory snapshots, exports the receipts and archives the journal
// of the controller of the config at cfgPath into the new archive dir
// (Controller.HistoryArchive): through the running daemon when it runs,
// else on the stopped state here.
func ArchiveHistory(ctx context.Context, cfgPath, dir string, log *slog.Logger) (ArchiveReport, error) {
	var rep ArchiveReport
	abs, err := filepath.Abs(dir)
	if err != nil {
		return rep, err
	}
	err = historyOp(ctx, cfgPath, log, foreground.Request{Op: foreground.OpHistoryArchive, Dir: abs}, &rep,
		func(c *Controller) (any, error) { return c.HistoryArchive(abs) })
	return rep, err
}

// historyOp runs a history operation in the process that holds the
// journal: the daemon, asked req on its foreground socket (its JSON
// result decoded into out), when it runs; else local on the controller
// opened here (and closed after it).
func historyOp(ctx context.Context, cfgPath string, log *slog.Logger, req foreground.Request, out any, local func(*Controller) (any, error)) error {
	c, err := open(cfgPath, log, historyOpts{lockTimeout: cliIndexWait}, nil)
	if errors.Is(err, journal.ErrLocked) || errors.Is(err, index.ErrLocked) {
		cfg, _, cerr := LoadConfig(cfgPath)
		if cerr != nil {
			return cerr
		}
		owner, oerr := stateOwner(cfg)
		if oerr != nil {
			return oerr
		}
		rep, ferr := foreground.Call(ctx, cfg.Sockets.Foreground, owner, req)
		if ferr != nil && rep.Refused {
			return &daemonRefusal{rep.Error}
		}
		if ferr != nil {
			return fmt.Errorf("the controller daemon is running; through its foreground socket: %w", ferr)
		}
		if err := json.Unmarshal(rep.Result, out); err != nil {
			return fmt.Errorf("foreground %s: %w", req.Op, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	v, err := local(c)
	if cerr := c.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	b, _ := json.Marshal(v)
	return json.Unmarshal(b, out)
}

// daemonRefusal is a refusal the running daemon answered: its one line,
// which already says "refused", matching ErrRefused.
type daemonRefusal struct{ line string }

func (e *daemonRefusal) Error() string { return e.line }

func (e *daemonRefusal) Unwrap() error { return ErrRefused }

// foregroundHistory answers a history operation (or a clock accept) on the foreground socket,
// asked by the peer uid: only the controller's own account may, the
// journal's account (root, admitted to the socket for the installer's
// verbs, may not: the history is the controller's own files).
func (c *Controller) foregroundHistory(req foreground.Request, uid uint32) foreground.Reply {
	if self := uint32(os.Geteuid()); uid != self {
		return foreground.Reply{Refused: true,
			Error: refusedf("%s may be asked only by the controller's own account (uid %d), not uid %d", req.Op, self, uid).Error()}
	}
	var v any
	var err error
	switch req.Op {
	case foreground.OpHistorySnapshot:
		v, err = c.HistorySnapshot()
	case foreground.OpClockAccept:
		v, err = c.AcceptClock()
	default:
		v, err = c.HistoryArchive(req.Dir)
	}
	if err != nil {
		return foreground.Reply{Error: err.Error(), Refused: errors.Is(err, ErrRefused)}
	}
	b, _ := json.Marshal(v)
	return foreground.Reply{State: foreground.StateDone, Result: b}
}

// history runs `history snapshot` and `history archive`.
func (c *CLI) history(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "snapshot" && args[0] != "archive" {
		return fmt.Errorf("%w: history snapshot|archive --config FILE", errUsage)
	}
	fs := newFlags("history " + args[0])
	cfg := fs.String("config", "", "the controller config (JSON)")
	if args[0] == "snapshot" {
		if err := c.parse(fs, args[1:], 0); err != nil {
			return err
		}
		rep, err := SnapshotHistory(ctx, *cfg, c.logger())
		if err != nil {
			return err
		}
		switch {
		case rep.Seq == 0:
			fmt.Fprintln(c.Stdout, "nothing recorded: no snapshot")
		case rep.Snapshot == "":
			fmt.Fprintf(c.Stdout, "nothing recorded since the snapshot at record %d: none written\n", rep.Seq)
		default:
			fmt.Fprintf(c.Stdout, "snapshot %s at record %d\n", rep.Snapshot, rep.Seq)
		}
		return nil
	}
	to := fs.String("to", "", "the new archive `DIR` (absent or empty) the journal's old segments move to")
	if err := c.parse(fs, args[1:], 0); err != nil {
		return err
	}
	rep, err := ArchiveHistory(ctx, *cfg, *to, c.logger())
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "receipts of journal records %d..%d exported to %s (%d receipts, verified under the pinned host key)\n",
		rep.First, rep.Last, rep.Receipts, rep.ReceiptCount)
	fmt.Fprintf(c.Stdout, "archived journal records %d..%d (%d segments) in %s, before the snapshot at record %d\n",
		rep.First, rep.Last, rep.Segments, rep.Dir, rep.MarkSeq)
	return nil
}
