package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// archived returns a closed journal archived before mark 25 (seq 1 to 21
// in five segments), its options and the archive's directory.
func archived(t *testing.T) (string, Options, string, map[uint64]Mark) {
	t.Helper()
	dir, opts, marks := markedLog(t)
	j := mustOpen(t, dir, opts)
	adir := filepath.Join(t.TempDir(), "arch")
	mustArchive(t, j, adir, marks[25])
	mustClose(t, j)
	return dir, opts, adir, marks
}

// copyTree copies the regular files of src into dst, keeping modes.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Damage to an archive is found by OpenArchive and named: a flipped byte
// in a segment, a changed manifest, a segment added or missing.
func TestOpenArchiveDamage(t *testing.T) {
	_, _, adir, _ := archived(t)
	for _, c := range []struct {
		name   string
		damage func(d string)
		file   string
		reason string
	}{
		{"flipped byte", func(d string) { flip(t, filepath.Join(d, segName(9)), 100) }, segName(9), "the manifest says"},
		{"manifest", func(d string) { flip(t, filepath.Join(d, manifestFileName), 20) }, manifestFileName, "its SHA-256 does not match its contents"},
		{"added segment", func(d string) { write(t, filepath.Join(d, segName(22)), []byte("x")) }, segName(22), "a segment the archive's manifest does not list"},
		{"missing segment", func(d string) { os.Remove(filepath.Join(d, segName(14))) }, segName(14), "the archive's manifest lists it, but it is not there"},
	} {
		d := filepath.Join(t.TempDir(), "copy")
		copyTree(t, adir, d)
		c.damage(d)
		_, err := OpenArchive(d)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Segment != filepath.Join(d, c.file) || !strings.Contains(ce.Reason, c.reason) {
			t.Fatalf("%s: %v, want a *CorruptError of %s saying %q", c.name, err, c.file, c.reason)
		}
	}
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	write(t, path, b)
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	os.Chmod(path, 0o600)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A live journal's base is the log's start: a damaged one refuses the
// open, one whose head the first live record does not chain on is
// corruption at that record, one without the segment it starts at too.
func TestBaseDamage(t *testing.T) {
	dir, opts, _, _ := archived(t)
	base := filepath.Join(dir, baseFileName)

	d := copyDir(t, dir)
	flip(t, filepath.Join(d, baseFileName), 30)
	_, err := Open(d, opts)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != filepath.Join(d, baseFileName) || !strings.Contains(ce.Reason, "the base file: its SHA-256 does not match") {
		t.Fatalf("a damaged base: %v", err)
	}

	d = copyDir(t, dir)
	b, err := readBase(dir)
	if err != nil {
		t.Fatal(err)
	}
	b.At.Head[0] ^= 1
	sb, _, err := sealed(b)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(d, baseFileName), sb)
	_, err = Open(d, opts)
	wantCorrupt(t, err, filepath.Join(d, segName(22)), 0)
	if !strings.Contains(err.Error(), "record 22: prev") {
		t.Fatalf("a base with another head: %v", err)
	}

	d = copyDir(t, dir)
	os.Remove(filepath.Join(d, segName(22)))
	_, err = Open(d, opts)
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "the base starts the log after seq 21, but there is no segment for seq 22") {
		t.Fatalf("no segment at the base: %v", err)
	}
	if _, err := os.Stat(base); err != nil {
		t.Fatal(err)
	}
}

// Segments the base archived that are still in the live directory (an
// Archive stopped before it removed them) are not read by Open and are
// shown; the next Archive removes them once their archive verifies, and
// keeps them when it does not.
func TestArchiveLeftovers(t *testing.T) {
	dir, opts, adir, marks := archived(t)
	// Put the archived segments back, as a kill before their removal
	// leaves them (the copies are cut short: Open must not read them).
	for _, n := range []string{segName(1), segName(5)} {
		b, err := os.ReadFile(filepath.Join(adir, n))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, n), b)
	}
	j := mustOpen(t, dir, opts)
	b, _ := j.Base()
	if len(b.Leftover) != 2 || j.Summary().Segments[0].FirstSeq != 22 {
		t.Fatalf("leftovers %v, first live segment %+v", b.Leftover, j.Summary().Segments[0])
	}
	// Its archive damaged, they are kept.
	flip(t, filepath.Join(adir, segName(9)), 100)
	_, err := j.Archive(adir, marks[25])
	want := "journal: " + dir + ": segments " + segName(1) + ", " + segName(5) + " were archived in arch, which does not verify, so they are kept: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("leftovers of a damaged archive:\n got %v\nwant %s...", err, want)
	}
	flip(t, filepath.Join(adir, segName(9)), 100)
	a, err := j.Archive(adir, marks[25])
	if err != nil || a.Last != 21 {
		t.Fatalf("the rerun: %+v, %v", a, err)
	}
	if b, _ := j.Base(); len(b.Leftover) != 0 || len(liveSegments(t, dir)) != 5 {
		t.Fatalf("after the rerun: leftovers %v, segments %v", b.Leftover, liveSegments(t, dir))
	}
	mustClose(t, j)
}
