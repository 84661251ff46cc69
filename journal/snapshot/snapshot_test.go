package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestWriteLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	w := write(t, dir, 123456)
	if w.Name != "0000000000123456.snap" || w.Removed != nil || w.Cleaned != nil {
		t.Fatalf("Written %+v", w)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700 | fs.ModeDir, fileOf(dir, 123456): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Fatalf("%s: mode %v, %v; want %v", path, fi.Mode(), err, want)
		}
	}
	var accepted []uint64
	l, err := Load(dir, testFormat, verify, func(s Snapshot) error {
		accepted = append(accepted, s.Mark.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l.Snapshot, snap(123456)) || l.Name != w.Name || l.Rejected != nil || !slices.Equal(accepted, []uint64{123456}) {
		t.Fatalf("Loaded %+v, accepted %v", l, accepted)
	}
	// Unsigned, loaded without verify.
	udir := filepath.Join(t.TempDir(), "unsigned")
	if _, err := Write(udir, snap(5), nil); err != nil {
		t.Fatal(err)
	}
	if l, err := Load(udir, testFormat, nil, nil); err != nil || l.Mark.Seq != 5 {
		t.Fatalf("unsigned: %+v %v", l, err)
	}
	// Empty and nil byte strings (an empty state, a mark without a
	// config) load as they were written.
	for i, state := range [][]byte{nil, {}} {
		s := snap(uint64(10 + i))
		s.State, s.Mark.Config, s.Mark.Binding = state, state, nil
		edir := filepath.Join(t.TempDir(), "empty")
		if _, err := Write(edir, s, nil); err != nil {
			t.Fatal(err)
		}
		l, err := Load(edir, testFormat, nil, nil)
		if err != nil || len(l.State) != 0 || (l.State == nil) != (state == nil) || l.Mark.Binding != nil {
			t.Fatalf("empty state %#v: %#v %v", state, l.State, err)
		}
	}
}

// One snapshot is one file, byte for byte, wherever it is written.
func TestDeterministic(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	write(t, a, 9)
	write(t, b, 9)
	fa, _ := os.ReadFile(fileOf(a, 9))
	fb, _ := os.ReadFile(fileOf(b, 9))
	if len(fa) == 0 || !bytes.Equal(fa, fb) {
		t.Fatalf("two writes of one snapshot differ:\n%x\n%x", fa, fb)
	}
}

func TestKeepAndSameSeq(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	for seq := uint64(10); seq <= 30; seq += 10 {
		if w := write(t, dir, seq); w.Removed != nil {
			t.Fatalf("removed %v with %d written", w.Removed, seq/10)
		}
	}
	w := write(t, dir, 40)
	if !slices.Equal(w.Removed, []string{Name(10)}) {
		t.Fatalf("the 4th write removed %v", w.Removed)
	}
	if got, want := names(t, dir), []string{Name(20), Name(30), Name(40)}; !slices.Equal(got, want) {
		t.Fatalf("directory %v, want %v", got, want)
	}
	// A snapshot older than the newest (a Load rejected the newer ones)
	// removes older ones only, never a newer one or itself.
	w = write(t, dir, 25)
	if !slices.Equal(w.Removed, []string{Name(20)}) {
		t.Fatalf("writing 25 removed %v", w.Removed)
	}
	_, err := Write(dir, snap(40), sign)
	wantErr(t, err, "snapshot: "+fileOf(dir, 40)+": file already exists")
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("%v does not match fs.ErrExist", err)
	}
	if len(tempsIn(t, dir)) != 0 {
		t.Fatalf("a refused write left %v", tempsIn(t, dir))
	}
}

func TestWriteRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	s := snap(1)
	s.Format = strings.Repeat("f", MaxFormatBytes)
	if _, err := Write(dir, s, nil); err != nil {
		t.Fatalf("format at MaxFormatBytes: %v", err)
	}
	cases := []struct {
		name   string
		change func(*Snapshot)
		want   string
	}{
		{"format one past", func(s *Snapshot) { s.Format = strings.Repeat("f", MaxFormatBytes+1) }, "snapshot: format name of 65 bytes, not 1 to 64"},
		{"no format", func(s *Snapshot) { s.Format = "" }, "snapshot: format name of 0 bytes, not 1 to 64"},
		{"format char", func(s *Snapshot) { s.Format = "a b" }, `snapshot: format name "a b" has ' ', outside A-Za-z0-9._:/-`},
		{"seq 0", func(s *Snapshot) { s.Mark.Seq = 0 }, "snapshot: the mark's seq is 0: a snapshot covers at least record 1"},
		{"head", func(s *Snapshot) { s.Mark.Head = s.Mark.Head[:31] }, "snapshot: the mark's head is 31 bytes, want 32"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := snap(2)
			c.change(&s)
			_, err := Write(dir, s, nil)
			wantErr(t, err, c.want)
		})
	}
	_, err := Write(dir, snap(3), func([]byte) ([]byte, error) { return nil, errors.New("no key") })
	wantErr(t, err, "snapshot: sign: no key")
	_, err = Write(dir, snap(3), func([]byte) ([]byte, error) { return nil, nil })
	wantErr(t, err, "snapshot: sign returned no signature")
	loose := filepath.Join(t.TempDir(), "loose")
	os.Mkdir(loose, 0o755)
	os.Chmod(loose, 0o755)
	_, err = Write(loose, snap(1), nil)
	wantErr(t, err, "snapshot: "+loose+" has mode 0755: group or others have access; want 0700")
	_, err = Load(loose, testFormat, nil, nil)
	wantErr(t, err, "snapshot: "+loose+" has mode 0755: group or others have access; want 0700")
	_, err = Load(dir, "", nil, nil)
	wantErr(t, err, "snapshot: format name of 0 bytes, not 1 to 64")
}

// MaxBytes: a file of exactly MaxBytes is written and loaded; one byte
// more is refused by Write before anything is written, and a file of
// MaxBytes+1 is rejected by Load without being read.
func TestMaxBytes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	probe := snap(1)
	probe.State = make([]byte, 1<<20)
	b, err := encode(probe, sign)
	if err != nil {
		t.Fatal(err)
	}
	overhead := b.size() - len(probe.State) // the same for every state of 64 KiB to 4 GiB
	s := snap(1)
	s.State = bytes.Repeat([]byte{0x5a}, MaxBytes-overhead)
	w, err := Write(dir, s, sign)
	if err != nil {
		t.Fatalf("a file of MaxBytes: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, w.Name)); err != nil || fi.Size() != MaxBytes {
		t.Fatalf("file of %d bytes, %v; want MaxBytes", fi.Size(), err)
	}
	l, err := Load(dir, testFormat, verify, nil)
	if err != nil || !bytes.Equal(l.State, s.State) {
		t.Fatalf("loading a file of MaxBytes: %v", err)
	}
	s.Mark = mark(2)
	s.State = append(s.State, 0x5a)
	_, err = Write(dir, s, sign)
	wantErr(t, err, "snapshot: too large: 67108865 bytes, over MaxBytes (67108864)")
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%v does not match ErrTooLarge", err)
	}
	s.State = make([]byte, MaxBytes+1)
	_, err = Write(dir, s, sign)
	wantErr(t, err, "snapshot: too large: a state of 67108865 bytes, over MaxBytes (67108864)")
	if got := names(t, dir); !slices.Equal(got, []string{Name(1)}) {
		t.Fatalf("refused writes left %v", got)
	}
	// A file one byte past the bound (sparse: never read).
	if err := os.WriteFile(fileOf(dir, 3), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(fileOf(dir, 3), MaxBytes+1); err != nil {
		t.Fatal(err)
	}
	l, err = Load(dir, testFormat, verify, nil)
	if err != nil || l.Mark.Seq != 1 || len(l.Rejected) != 1 {
		t.Fatalf("Load with a file past MaxBytes: %+v, %v", l.Rejected, err)
	}
	r := l.Rejected[0]
	if r.Name != Name(3) || r.Reason != "snapshot: too large: 67108865 bytes, over MaxBytes (67108864)" || !errors.Is(r.Err, ErrTooLarge) {
		t.Fatalf("rejected %+v", r)
	}
}

// Each kind of bad file is rejected with its reason, and the next older
// one loaded; when none is left, ErrNoSnapshot lists every rejection.
func TestRejections(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	write(t, dir, 1)
	mismatch := errors.New("journal: mark mismatch")
	type bad struct {
		seq    uint64
		make   func(path string)
		reason string
	}
	bads := []bad{
		{2, func(p string) { flip(t, p, -3) }, "its SHA-256 does not match its content"},
		{3, func(p string) { cut(t, p) }, "does not decode: unexpected EOF"},
		{4, func(p string) { rewrite(t, p, otherFormat) }, `format "other-format", want "steward-test-snapshot-v1"`},
		{5, func(p string) { os.Rename(fileOf(dir, 50), p) }, "named for seq 5, but its mark is at seq 50"},
		{6, func(p string) { rewrite(t, p, unsign) }, "signature: unsigned"},
		{7, func(p string) { rewrite(t, p, forge) }, "signature: not the operator key's signature"},
		{8, func(p string) { rewrite(t, p, extraField) }, `does not decode: cbor: found unknown field at map element index 1`},
		{9, func(p string) { rewrite(t, p, nonCanonical) }, "not in deterministic encoding"},
		{10, func(p string) {}, "refused: journal: mark mismatch"},
	}
	for _, b := range bads {
		if b.seq == 5 {
			place(t, dir, 50)
		} else {
			place(t, dir, b.seq)
		}
		b.make(fileOf(dir, b.seq))
	}
	accept := func(s Snapshot) error {
		if s.Mark.Seq == 10 {
			return mismatch
		}
		return nil
	}
	l, err := Load(dir, testFormat, verify, accept)
	if err != nil || l.Mark.Seq != 1 {
		t.Fatalf("Load: %+v %v", l.Snapshot.Mark, err)
	}
	if len(l.Rejected) != len(bads) {
		t.Fatalf("rejected %+v", l.Rejected)
	}
	for i, r := range l.Rejected {
		b := bads[len(bads)-1-i] // newest first
		if r.Name != Name(b.seq) || r.Reason != b.reason {
			t.Errorf("rejected %s: %q\nwant       %s: %q", r.Name, r.Reason, Name(b.seq), b.reason)
		}
	}
	if !errors.Is(l.Rejected[0].Err, mismatch) {
		t.Fatalf("accept's error is not the rejection's cause: %v", l.Rejected[0].Err)
	}
	// Signed, loaded without verify.
	if _, err := Load(dir, testFormat, nil, func(s Snapshot) error { return mismatch }); !errors.Is(err, ErrNoSnapshot) {
		t.Fatal(err)
	}
	l, _ = Load(dir, testFormat, nil, nil)
	if r := l.Rejected[0]; r.Reason != "it is signed, and this owner takes no signed snapshot" {
		t.Fatalf("signed without verify: %+v", r)
	}
	os.Remove(fileOf(dir, 1))
	_, err = Load(dir, testFormat, verify, accept)
	want := fmt.Sprintf("snapshot: no valid snapshot in %s: %d rejected: ", dir, len(bads))
	if !errors.Is(err, ErrNoSnapshot) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("none valid: %v", err)
	}
	_, err = Load(filepath.Join(dir, "absent"), testFormat, verify, accept)
	wantErr(t, err, "snapshot: no valid snapshot in "+filepath.Join(dir, "absent")+": it does not exist")
	empty := filepath.Join(t.TempDir(), "empty")
	os.Mkdir(empty, 0o700)
	_, err = Load(empty, testFormat, verify, accept)
	wantErr(t, err, "snapshot: no valid snapshot in "+empty+": it has none")
}

// Load and Write remove the temporaries a crashed Write left, and report
// them; a temporary whose lock is held (a Write under way) is left.
func TestTemporariesCleaned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	write(t, dir, 1)
	stale := filepath.Join(dir, ".0000000000000002.snap.123.tmp")
	os.WriteFile(stale, []byte("half"), 0o600)
	held := filepath.Join(dir, ".0000000000000003.snap.456.tmp")
	os.WriteFile(held, []byte("under way"), 0o600)
	f := lockFile(t, held)
	other := filepath.Join(dir, "notes.txt")
	os.WriteFile(other, nil, 0o600)
	l, err := Load(dir, testFormat, verify, nil)
	if err != nil || !slices.Equal(l.Cleaned, []string{filepath.Base(stale)}) {
		t.Fatalf("Load cleaned %v, %v", l.Cleaned, err)
	}
	for path, want := range map[string]bool{stale: false, held: true, other: true} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("%s there: %v, want %v", path, err == nil, want)
		}
	}
	f.Close()
	if w := write(t, dir, 4); !slices.Equal(w.Cleaned, []string{filepath.Base(held)}) {
		t.Fatalf("Write cleaned %v", w.Cleaned)
	}
	// A temporary Load cannot remove (here a directory with a file in
	// it) is reported, and Load goes on; Write refuses.
	stuck := filepath.Join(dir, ".0000000000000005.snap.789.tmp")
	os.MkdirAll(filepath.Join(stuck, "x"), 0o700)
	l, err = Load(dir, testFormat, verify, nil)
	if err != nil || l.Mark.Seq != 4 || len(l.Rejected) != 1 || l.Rejected[0].Name != filepath.Base(stuck) ||
		!strings.HasPrefix(l.Rejected[0].Reason, "a temporary left by an interrupted write, not removed: remove "+stuck+": ") {
		t.Fatalf("Load with a stuck temporary: %+v %v", l.Rejected, err)
	}
	_, err = Write(dir, snap(6), sign)
	if err == nil || !strings.HasPrefix(err.Error(), "snapshot: .0000000000000005.snap.789.tmp: a temporary left by an interrupted write, not removed: ") {
		t.Fatalf("Write with a stuck temporary: %v", err)
	}
}

// place writes snapshot seq into dir by a Write elsewhere and a rename,
// so that no Write prunes dir.
func place(t *testing.T, dir string, seq uint64) {
	t.Helper()
	other := filepath.Join(t.TempDir(), "other")
	write(t, other, seq)
	if err := os.Rename(fileOf(other, seq), fileOf(dir, seq)); err != nil {
		t.Fatal(err)
	}
}

func TestNames(t *testing.T) {
	for name, want := range map[string]uint64{
		"0000000000000001.snap": 1, "9999999999999999.snap": 9999999999999999,
		"0000000000000000.snap": 0, "000000000000001.snap": 0, "00000000000000001.snap": 0,
		"000000000000000a.snap": 0, "0000000000000001.snap.tmp": 0, "+000000000000001.snap": 0,
	} {
		seq, ok := parseName(name)
		if seq != want || ok != (want != 0) {
			t.Errorf("parseName(%q) = %d, %v", name, seq, ok)
		}
	}
	for name, want := range map[string]bool{
		".0000000000000001.snap.123.tmp": true, ".0000000000000001.snap.tmp": false,
		"0000000000000001.snap.123.tmp": false, ".notes.snap.1.tmp": false,
	} {
		if isTemp(name) != want {
			t.Errorf("isTemp(%q) = %v", name, !want)
		}
	}
}

// SetAside moves a snapshot out of the list without replacing anything
// set aside before, and takes no name that is not a snapshot's.
func TestSetAside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	for i, want := range []string{"0000000000000007.snap.refused", "0000000000000007.snap.refused.1"} {
		w := write(t, dir, 7)
		got, err := SetAside(dir, w.Name)
		if err != nil || got != want {
			t.Fatalf("set aside %d: %q, %v; want %q", i, got, err, want)
		}
		if l, err := list(dir); err != nil || len(l) != 0 {
			t.Fatalf("listed after set aside: %v %v", l, err)
		}
	}
	for _, name := range []string{"0000000000000007.snap.refused", "../0000000000000007.snap", "x"} {
		if _, err := SetAside(dir, name); err == nil || !strings.Contains(err.Error(), "not a snapshot's name") {
			t.Fatalf("set aside %q: %v", name, err)
		}
	}
	if des, _ := os.ReadDir(dir); len(des) != 2 {
		t.Fatalf("the directory holds %d files, not the two set aside", len(des))
	}
}
