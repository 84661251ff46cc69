package journal

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const (
	testOwner  = "steward-test"
	testFormat = "steward-test-journal-v1"
)

var testConfig = []byte(`{"name":"test","limits":{"b":2,"a":1}}`)

func testOptions() Options {
	return Options{Owner: testOwner, Format: testFormat, Config: testConfig, SegmentSize: 4096}
}

// journalDir returns a path for a journal that does not exist yet.
func journalDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "journal")
}

func mustOpen(t testing.TB, dir string, opts Options) *Journal {
	t.Helper()
	j, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return j
}

func mustClose(t testing.TB, j *Journal) {
	t.Helper()
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

type tick struct {
	N    int    `cbor:"n"`
	Note string `cbor:"note"`
}

func mustAppend(t testing.TB, j *Journal, kind string, body any) uint64 {
	t.Helper()
	seq, err := j.Append(kind, body)
	if err != nil {
		t.Fatalf("Append(%s): %v", kind, err)
	}
	return seq
}

// collect returns every record from seq from.
func collect(t testing.TB, j *Journal, from uint64) []Record {
	t.Helper()
	var out []Record
	if err := j.Iterate(from, func(r Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatalf("Iterate(%d): %v", from, err)
	}
	return out
}

// frameSpan is where one frame lies in a segment file.
type frameSpan struct{ off, len int64 }

// frames parses the frame boundaries of a segment file (headers only).
func frames(t testing.TB, path string) []frameSpan {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []frameSpan
	off := int64(0)
	for off+headerSize <= int64(len(b)) {
		n := int64(binary.LittleEndian.Uint32(b[off:]))
		if n == 0 {
			break
		}
		out = append(out, frameSpan{off, headerSize + n})
		off += headerSize + n
	}
	return out
}

// copyDir copies the regular files of src into a new directory (0700).
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := journalDir(t)
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
	return dst
}

func wantCorrupt(t testing.TB, err error, segPath string, off int64) *CorruptError {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("want *CorruptError at %s:%d, got %v", segPath, off, err)
	}
	if ce.Segment != segPath || ce.Offset != off {
		t.Fatalf("corruption reported at %s:%d, want %s:%d (%v)", ce.Segment, ce.Offset, segPath, off, err)
	}
	return ce
}
