package appliance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal"
)

// mustRefuse runs a history command that must be refused with want (the
// whole of stderr), exit 2, nothing on stdout, and nothing changed under
// the roots.
func mustRefuse(t *testing.T, want string, roots []string, args ...string) {
	t.Helper()
	before := tree(t, roots...)
	code, out, errs := runMain(args...)
	if code != 2 || out != "" || errs != want {
		t.Fatalf("%q: exit %d\nstdout: %s\nstderr: %s\nwant:   %s", args, code, out, errs, want)
	}
	if after := tree(t, roots...); !reflect.DeepEqual(before, after) {
		t.Fatalf("%q changed what it refused to:\nbefore %v\nafter  %v", args, before, after)
	}
}

// Every refusal of history snapshot and archive is one line, exit 2, and
// changes nothing: the state directory and the archive directory are as
// they were, byte for byte.
func TestHistoryRefusals(t *testing.T) {
	const ar, sn = "steward-appliance history archive: ", "steward-appliance history snapshot: "
	dir := shortDir(t)
	for _, args := range [][]string{{"history", "archive", "--state", dir}, {"history", "archive", "--to", dir},
		{"history", "snapshot"}, {"history", "snapshot", "--state", dir, "extra"}} {
		code, _, errs := runMain(args...)
		if code != 2 || errs == "" {
			t.Fatalf("%q: exit %d, %s", args, code, errs)
		}
	}
	if code, _, errs := runMain("history", "rotate"); code != 2 || errs[:len(`steward-appliance history: unknown command "rotate"`)] != `steward-appliance history: unknown command "rotate"` {
		t.Fatalf("history rotate: %d %s", code, errs)
	}

	// Nothing recorded: no journal (nothing is created).
	empty, to := filepath.Join(dir, "empty"), filepath.Join(dir, "archive")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	none := "nothing is recorded in " + empty + ": it has no journal\n"
	mustRefuse(t, ar+none, []string{empty, to}, "history", "archive", "--state", empty, "--to", to)
	mustRefuse(t, sn+none, []string{empty}, "history", "snapshot", "--state", empty)

	// Nothing to archive: every record is in the journal's first segment.
	small := generatedState(t, 3)
	mustRefuse(t, ar+fmt.Sprintf("journal: %s: archive before the mark at seq 4: no whole segment precedes it (it is in %s, the first the log has here): journal: nothing to archive\n",
		journalDir(small), "0000000000000001.seg"), []string{small, to}, "history", "archive", "--state", small, "--to", to)

	// The archive directory in use: a file in it, or inside the journal.
	state, _ := recordedState(t)
	if err := os.Mkdir(to, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(to, "notes"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, ar+"journal: archive directory "+to+" is not empty (it holds notes) and has no archive manifest: journal: archive directory in use\n",
		[]string{state, to}, "history", "archive", "--state", state, "--to", to)
	inside := filepath.Join(journalDir(state), "old")
	mustRefuse(t, ar+fmt.Sprintf("journal: archive directory %s is inside the journal %s: journal: archive directory in use\n", inside, journalDir(state)),
		[]string{state}, "history", "archive", "--state", state, "--to", inside)

	// Archived already: the same directory again, or another one.
	done := filepath.Join(dir, "answers-0001")
	if code, out, errs := runMain("history", "archive", "--state", state, "--to", done); code != 0 {
		t.Fatalf("archive: %d %s %s", code, out, errs)
	}
	b := baseOf(t, state)
	mustRefuse(t, ar+fmt.Sprintf("records 1..%d are archived in answers-0001 already\n", b.Seq), []string{state, done},
		"history", "archive", "--state", state, "--to", done)
	other := filepath.Join(dir, "answers-0002")
	first := liveSegs(t, journalDir(state))[0]
	mustRefuse(t, ar+fmt.Sprintf("journal: %s: archive before the mark at seq %d: no whole segment precedes it (it is in %s, the first the log has here): journal: nothing to archive\n",
		journalDir(state), archiveCalls+1, first), []string{state, other}, "history", "archive", "--state", state, "--to", other)
}

// A mark the journal does not take, or one past the newest snapshot's,
// is a refusal of archiveTo, and nothing is archived.
func TestHistoryArchiveMarks(t *testing.T) {
	state, _ := recordedState(t)
	to := filepath.Join(shortDir(t), "archive")
	st, err := openOffline(state, quietLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	m := st.k.LastMark()
	bad := m
	bad.Head = append([]byte(nil), m.Head...)
	bad.Head[0] ^= 1
	past := m
	past.Seq++
	for _, c := range []struct {
		m    journal.Mark
		want string
	}{
		{past, fmt.Sprintf("the mark at record %d is past the newest snapshot's (record %d): archive up to a snapshot's mark", m.Seq+1, m.Seq)},
		{bad, fmt.Sprintf("journal: %s: archive before the mark at seq %d: the mark does not match: ", journalDir(state), m.Seq)},
	} {
		_, err := st.archiveTo(to, c.m)
		var r *historyRefusal
		if !errors.As(err, &r) || len(err.Error()) < len(c.want) || err.Error()[:len(c.want)] != c.want {
			t.Fatalf("archive before %+v: %v\nwant a refusal %s...", c.m.Seq, err, c.want)
		}
	}
	if _, ok := st.j.Base(); ok {
		t.Fatal("a refused mark archived")
	}
	if _, err := os.Lstat(to); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused mark made %s: %v", to, err)
	}
}

// While the appliance serves, both commands are refused, one line, exit
// 2; the journal and the archive directory are untouched, and it serves
// on.
func TestHistoryWhileServing(t *testing.T) {
	dir := shortDir(t)
	sock, state, to := filepath.Join(dir, "a.sock"), filepath.Join(dir, "state"), filepath.Join(dir, "archive")
	c := startChild(t, sock, state)
	childCalls(t, sock, 0, 3)
	for _, args := range [][]string{{"history", "snapshot", "--state", state}, {"history", "archive", "--state", state, "--to", to}} {
		mustRefuse(t, "steward-appliance "+args[0]+" "+args[1]+": the appliance is serving (it holds the journal): stop it first\n",
			[]string{journalDir(state), snapshotDir(state), to}, args...)
	}
	childCalls(t, sock, 3, 1)
	c.stop(t)
}

// A history archive SIGKILLed at each of the journal's archive
// failpoints is completed by the same command run again; the appliance
// then starts from its snapshot, refuses the archived calls and replays
// the others byte for byte.
func TestHistoryArchiveCrash(t *testing.T) {
	// What the rerun's open warns of, after each kill ("" for nothing).
	for fp, warns := range map[string]string{
		journal.FailArchiveCopied:   "",
		journal.FailArchiveRenamed:  "",
		journal.FailArchiveBaseTmp:  `msg="journal: removed an unfinished base file left by a crash inside Archive"`,
		journal.FailArchiveBased:    `msg="journal: segments already archived are still here`,
		journal.FailArchiveRemoving: `msg="journal: segments already archived are still here`,
	} {
		t.Run(fp, func(t *testing.T) {
			state, answers := recordedState(t)
			to := filepath.Join(shortDir(t), "answers-0001")
			args := []string{"history", "archive", "--state", state, "--to", to}
			c := startProc(t, []string{childEnv + "=main", failpoint.Env + "=" + fp}, args...)
			c.cmd.Wait()
			if ws, _ := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the command was not killed at %s: %v\nstderr: %s", fp, c.cmd.ProcessState, c.stderr)
			}
			code, out, errs := runMain(args...)
			b := baseOf(t, state)
			want := fmt.Sprintf("archived journal records 1..%d (%d segments) in %s, before the snapshot at record %d\n",
				b.Seq, len(liveSegs(t, to)), to, archiveCalls+1)
			if code != 0 || out != want || (warns == "") != (errs == "") || !strings.Contains(errs, warns) || strings.Count(errs, "\n") > 1 {
				t.Fatalf("the rerun: exit %d\nstdout: %s\nstderr: %s\nwant: %s", code, out, errs, want)
			}
			if _, err := os.Lstat(to + ".partial"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the rerun left %s.partial: %v", to, err)
			}
			a := startApp(t, Config{State: state})
			checkArchived(t, a, answers, b.Seq, "answers-0001")
		})
	}
}
