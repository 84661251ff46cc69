package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
)

// TestHistoryArchiveCrash kills the controller (a child process,
// SIGKILL) at each of the journal's archive failpoints while `history
// archive` runs through it, restarts it, and runs the same command again:
// it completes the archive (one archive, the base naming it, nothing left
// behind), the receipts file holds exactly the archive's receipts, and an
// archived requestId is refused naming the archive.
func TestHistoryArchiveCrash(t *testing.T) {
	for _, fp := range []string{journal.FailArchiveCopied, journal.FailArchiveRenamed, journal.FailArchiveBaseTmp,
		journal.FailArchiveBased, journal.FailArchiveRemoving} {
		t.Run(fp, func(t *testing.T) {
			s := newStack(t, stackOpts{})
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			s.startControllerWith(Options{JournalSegmentSize: archSegment})
			archCalls(t, ctx, s.client(ctx), "crash", 8)
			s.stopController()

			child := s.startChild("STEWARD_FAILPOINT=" + fp)
			dir := filepath.Join(s.dir, "ctl-archive")
			if out, errs, code := archiveCmd(t, s, dir); code != ExitFailure {
				t.Fatalf("history archive through a controller killed at %s: exit %d: %s%s", fp, code, out, errs)
			}
			select {
			case err := <-child.done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("controller exit: %v, want SIGKILL at %s", err, fp)
				}
			case <-ctx.Done():
				t.Fatal("the controller did not reach the failpoint")
			}
			j, err := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("the journal after a kill at %s: %v", fp, err)
			}
			_, based := j.Base()
			j.Close()
			if want := fp == journal.FailArchiveBased || fp == journal.FailArchiveRemoving; based != want {
				t.Fatalf("after a kill at %s the journal is based: %v", fp, based)
			}

			s.startController()
			if out, errs, code := archiveCmd(t, s, dir); code != 0 || !strings.Contains(out, "archived journal records 1..") {
				t.Fatalf("history archive again after a kill at %s: exit %d: %s%s", fp, code, out, errs)
			}
			j, err = journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			base, _ := j.Base()
			j.Close()
			a := readArchived(t, dir)
			if len(base.Archives) != 1 || base.Archives[0].Dir != dir || len(base.Leftover) != 0 || base.Seq != a.last || a.first != 1 {
				t.Fatalf("after the rerun: base %+v, archive %d..%d", base, a.first, a.last)
			}
			if _, err := os.Lstat(dir + ".partial"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the rerun left %s.partial: %v", dir, err)
			}
			checkReceiptsFile(t, s, dir, a.receipts)
			cs := s.client(ctx)
			for rid, attempt := range a.answered {
				replayArchived(t, ctx, s, cs, rid, attempt, dir)
				break
			}
		})
	}
}

// TestHistoryArchiveBadReceipt archives a journal whose receipts do not
// verify under the host key the controller pins (its bundle replaced by
// another host's): the command stops at the first receipt, naming its
// record, exit 1, and nothing is archived or written.
func TestHistoryArchiveBadReceipt(t *testing.T) {
	s := newStack(t, stackOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s.startControllerWith(Options{JournalSegmentSize: archSegment})
	archCalls(t, ctx, s.client(ctx), "bad", 6)
	s.stopController()

	// The first receipt the journal holds: the first call's result.
	var seq uint64
	var attempt string
	j, err := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	j.Iterate(0, func(r journal.Record) error {
		var x ledger.Result
		if r.Kind == ledger.KindResult && ledger.Decode(r, &x) == nil {
			seq, attempt = r.Seq, x.Attempt
			return errStop
		}
		return nil
	})
	j.Close()
	if seq == 0 {
		t.Fatal("no result in the journal")
	}

	other := filepath.Join(t.TempDir(), "other-host")
	if _, err := operator.Init(other); err != nil {
		t.Fatal(err)
	}
	st, err := operator.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(s.cfg.KeyDir, PublicKeysFile))
	if err != nil {
		t.Fatal(err)
	}
	uid := uint32(os.Getuid())
	if _, err := st.AddController("dev", uid, pub, filepath.Join(s.dir, "control.sock")); err != nil {
		t.Fatal(err)
	}
	bundle, err := st.BuildBundle("dev", uid)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.WriteFile(s.cfg.Bundle, bundle, 0o600); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(s.dir, "ctl-archive")
	before := journalState(t, s, dir)
	_, errs, code := archiveCmd(t, s, dir)
	want := fmt.Sprintf("steward-controller: history archive: the host's receipt in journal record %d (attempt %s) does not verify: ", seq, attempt)
	if code != ExitFailure || !strings.HasPrefix(lastLine(errs), want) || !strings.HasSuffix(errs, "; nothing was archived\n") {
		t.Fatalf("exit %d: %q\nwant a line starting %q", code, errs, want)
	}
	if after := journalState(t, s, dir); after != before {
		t.Fatalf("a receipt that does not verify changed:\n%s\nto\n%s", before, after)
	}
}
