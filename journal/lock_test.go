package journal

import (
	"errors"
	"strings"
	"testing"
)

func TestSecondOpenerSameProcess(t *testing.T) {
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	_, err := Open(dir, testOptions())
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open: %v, want ErrLocked naming %s", err, dir)
	}
	// Read-only inspection takes no lock and works meanwhile.
	s, err := Inspect(dir)
	if err != nil || s.LastSeq != 1 {
		t.Fatalf("Inspect while locked: %+v, %v", s, err)
	}
	mustClose(t, j)
	j = mustOpen(t, dir, testOptions())
	mustClose(t, j)
}

func TestSecondOpenerOtherProcess(t *testing.T) {
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	c := startHelper(t, "JOURNAL_HELPER=lock", "JOURNAL_DIR="+dir)
	line := c.firstLine(t, "locked", "opened", "error")
	if !strings.HasPrefix(line, "locked ") || !strings.Contains(line, dir) {
		t.Fatalf("child opening a locked journal: %q, want ErrLocked naming %s", line, dir)
	}
	c.cmd.Wait()
	mustClose(t, j)
	// Once released, the other process gets it.
	c = startHelper(t, "JOURNAL_HELPER=lock", "JOURNAL_DIR="+dir)
	if line := c.firstLine(t, "locked", "opened", "error"); line != "opened" {
		t.Fatalf("child after Close: %q, want opened", line)
	}
	c.cmd.Wait()
}
