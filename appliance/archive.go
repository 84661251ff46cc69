package appliance

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/journal/index"
)

const historyUsage = `Usage:
  steward-appliance history snapshot --state DIR
  steward-appliance history archive --state DIR --to ARCHIVEDIR

Run as the appliance's own account, on a stopped appliance: both take the
journal's lock, and refuse while the appliance serves (stop it first).

snapshot  writes a snapshot of the state now, if anything was recorded
          since the last one: the next start replays only what follows it.
archive   makes the snapshot, then moves the journal segments wholly before
          its mark into ARCHIVEDIR (new or empty), verified, with a
          manifest; the journal then starts after them (inspect shows
          where). The appliance's journal holds no receipts: there is
          nothing to export. An invocation whose requestId's answer is
          archived is refused, 409 archived, and never run again. An
          archive interrupted (a crash, a full disk) is completed by the
          same command run again. A start that finds no usable snapshot
          or a damaged index then rebuilds from the archive, where it was
          made, and the journal: keep ARCHIVEDIR there.

Refusals (nothing recorded, nothing to archive, ARCHIVEDIR in use, a mark
the journal does not take, already archived, the appliance serving) are
one line, exit 2, and change nothing.

Flags:
`

// historyRefusal is a history command's refusal: one line, exit 2, and
// nothing changed (a refusal is told from a failure, exit 1).
type historyRefusal struct{ msg string }

func (e *historyRefusal) Error() string { return e.msg }

func refusedf(format string, args ...any) error {
	return &historyRefusal{fmt.Sprintf(format, args...)}
}

// errServing is the refusal of a history command while the appliance
// serves: it holds the journal's lock (and the index's), and the only
// other way in, its socket, is the host's, not an administrator's.
var errServing = refusedf("the appliance is serving (it holds the journal): stop it first")

// historyCommand is `steward-appliance history snapshot|archive`.
func historyCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, historyUsage)
		return 2
	}
	name := "history " + args[0]
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	state := fs.String("state", "", "the appliance's state `DIR` (required)")
	var to *string
	switch args[0] {
	case "snapshot":
	case "archive":
		to = fs.String("to", "", "the new archive `DIR` (absent or empty) the journal's old segments move to (required)")
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, historyUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "steward-appliance history: unknown command %q\n\n%s", args[0], historyUsage)
		return 2
	}
	if code, done := parseFlags(fs, historyUsage, args[1:], stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 || *state == "" || to != nil && *to == "" {
		need := "--state DIR is required"
		if to != nil {
			need = "--state DIR and --to ARCHIVEDIR are required"
		}
		fmt.Fprintf(stderr, "steward-appliance %s: %s, and nothing else\n", name, need)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var err error
	if to == nil {
		err = historySnapshot(*state, stdout, log)
	} else {
		err = historyArchive(*state, *to, stdout, log)
	}
	var r *historyRefusal
	switch {
	case errors.As(err, &r):
		fmt.Fprintf(stderr, "steward-appliance %s: %v\n", name, err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "steward-appliance %s: %v\n", name, err)
		return 1
	}
	return 0
}

// openOffline opens the history of a stopped appliance's state, as a
// start does (the index, then the journal from the newest snapshot it can
// use), refusing one that has no journal (nothing is created) and one
// whose appliance serves (the index's or the journal's lock is held).
func openOffline(state string, log *slog.Logger) (*store, error) {
	if _, err := os.Lstat(journalDir(state)); errors.Is(err, fs.ErrNotExist) {
		return nil, refusedf("nothing is recorded in %s: it has no journal", state)
	}
	st, err := openStore(Config{State: state}, log)
	if errors.Is(err, index.ErrLocked) || errors.Is(err, journal.ErrLocked) {
		return nil, errServing
	}
	return st, err
}

// historySnapshot is `history snapshot`.
func historySnapshot(state string, stdout io.Writer, log *slog.Logger) error {
	st, err := openOffline(state, log)
	if err != nil {
		return err
	}
	m, name, err := st.k.Snapshot()
	if cerr := st.close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return err
	case name == "":
		fmt.Fprintf(stdout, "nothing recorded since the last snapshot (record %d): none written\n", m.Seq)
	default:
		fmt.Fprintf(stdout, "snapshot %s (record %d)\n", name, m.Seq)
	}
	return nil
}

// historyArchive is `history archive`: the snapshot first, then the
// archive up to its mark, so that the next start loads a snapshot the
// archive leaves whole.
func historyArchive(state, to string, stdout io.Writer, log *slog.Logger) error {
	dir, err := filepath.Abs(to)
	if err != nil {
		return err
	}
	st, err := openOffline(state, log)
	if err != nil {
		return err
	}
	a, m, err := st.archive(dir)
	if cerr := st.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "archived journal records %d..%d (%d segments) in %s, before the snapshot at record %d\n",
		a.First, a.Last, len(a.Segments), a.Dir, m.Seq)
	return nil
}

// archive makes a snapshot (none when nothing was recorded since the
// last) and archives the journal up to its mark into dir.
func (s *store) archive(dir string) (journal.Archived, journal.Mark, error) {
	if b, ok := s.j.Base(); ok && len(b.Leftover) == 0 {
		for _, r := range b.Archives {
			if r.Dir == dir {
				return journal.Archived{}, journal.Mark{}, refusedf("records %d..%d are archived in %s already", r.First, r.Last, r.Name)
			}
		}
	}
	m, err := s.snapshot()
	if err != nil {
		return journal.Archived{}, m, err
	}
	if m.Seq == 0 {
		return journal.Archived{}, m, refusedf("nothing is recorded: no snapshot to archive up to")
	}
	a, err := s.archiveTo(dir, m)
	return a, m, err
}

// archiveTo archives the journal up to m, a snapshot's mark at or before
// the newest one's (a start needs a snapshot the archive leaves whole);
// what the journal refuses is a refusal.
func (s *store) archiveTo(dir string, m journal.Mark) (journal.Archived, error) {
	a, err := s.k.Archive(dir, m)
	if errors.Is(err, history.ErrPastSnapshot) || journal.RefusedArchive(err) {
		return a, &historyRefusal{err.Error()}
	}
	return a, err
}
