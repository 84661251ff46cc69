package appliance

import (
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
)

const inspectUsage = `Usage: steward-appliance inspect --state DIR

Reads DIR/journal from the newest snapshot in DIR/snapshots that verifies
and that the journal accepts, replays the records after it, and prints what
it found: the journal's records, the archives holding those before its
base (if history archive made any), the snapshot read from, the records
replayed and the answers recorded. It writes nothing to the journal, the
snapshots or the index and takes no lock, so it may run while the
appliance serves: it then reads what is durable and never reports the
record being written as damage. Like every load of the snapshots, it
removes the temporary file a snapshot write cut short by a crash left,
if no write holds it, and says so. A snapshot it refused is logged with
why on stderr. Without the history index (the running appliance's), an
answer given twice is found only among the records replayed.

Flags:
`

// inspection is what inspect found.
type inspection struct {
	journal  string
	records  uint64
	snapshot string // "" after a full replay
	from     uint64
	replayed uint64
	answers  uint64
	// archives are the archives holding the records before the journal's
	// base, oldest first (none before a `history archive`).
	archives []journal.ArchiveRef
}

// inspect reads the journal of state through the keeper, read-only and
// without an index: a live journal up to its watermark.
func inspect(state string, log *slog.Logger) (inspection, error) {
	o := historyOptions(Config{State: state}, nil, nil, log)
	o.ReadOnly = true
	k, op, err := history.Open(o)
	reportOpened(log, op)
	if err != nil {
		return inspection{}, err
	}
	defer k.Close()
	st := op.State.(*replayState)
	b, _ := k.Journal().Base()
	return inspection{journal: k.Journal().Dir(), records: st.Seq, snapshot: op.Snapshot, from: op.From.Seq,
		replayed: op.Replayed, answers: st.Answers, archives: b.Archives}, nil
}

// inspectCommand is `steward-appliance inspect`.
func inspectCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	state := fs.String("state", "", "state directory holding the journal (required)")
	if code, done := parseFlags(fs, inspectUsage, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 || *state == "" {
		fmt.Fprintln(stderr, "steward-appliance inspect: --state DIR is required, and nothing else")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	in, err := inspect(*state, log)
	if err != nil {
		fmt.Fprintf(stderr, "steward-appliance inspect: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "journal %s: %d records\n", in.journal, in.records)
	for _, a := range in.archives {
		fmt.Fprintf(stdout, "archived records %d..%d in %s (%s)\n", a.First, a.Last, a.Name, a.Dir)
	}
	if in.snapshot == "" {
		fmt.Fprintf(stdout, "no snapshot: replayed all %d records\n", in.replayed)
	} else {
		fmt.Fprintf(stdout, "snapshot %s (record %d): replayed %d records after it\n", in.snapshot, in.from, in.replayed)
	}
	fmt.Fprintf(stdout, "answers %d\n", in.answers)
	return 0
}
