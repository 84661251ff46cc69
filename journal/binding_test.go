package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"github.com/stewardrt/steward/internal/testenv"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// TestBinding: the journal binds the config bytes it is given, without
// interpreting them (its owners canonicalize before they call), refuses
// another config, owner or format without writing, and moves the binding
// only by a rebind that retains both configs.
func TestBinding(t *testing.T) {
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	if string(j.Config()) != string(testConfig) || j.Binding() != sha256.Sum256(testConfig) {
		t.Fatalf("config %s binding %x, want %s as given", j.Config(), j.Binding(), testConfig)
	}
	mustClose(t, j)
	mustClose(t, mustOpen(t, dir, testOptions()))

	// The same meaning spelled differently is other bytes, so another
	// binding: canonicalizing is the caller's job.
	before := snapshot(t, dir)
	opts := testOptions()
	opts.Config = []byte(`{"limits":{"a":1,"b":2},"name":"test"}`)
	_, err := Open(dir, opts)
	if !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("respelled config: %v, want ErrBindingMismatch naming %s", err, dir)
	}
	// So are another owner and another format.
	for _, o := range []Options{{Owner: "steward-other"}, {Format: "other-format-v1"}} {
		if _, err := Open(dir, o); !errors.Is(err, ErrBindingMismatch) {
			t.Fatalf("Open(%+v) = %v, want ErrBindingMismatch", o, err)
		}
	}
	// An empty config is refused before anything is opened.
	opts.Config = []byte{}
	want := "journal: config for " + dir + ": journal: the config is empty; a journal binds a non-empty config"
	if _, err := Open(dir, opts); err == nil || err.Error() != want {
		t.Fatalf("empty config: %v, want %q", err, want)
	}
	if !sameFiles(before, snapshot(t, dir)) {
		t.Fatal("a refused Open changed the directory")
	}

	// nil config skips the check.
	j = mustOpen(t, dir, Options{})
	if j.Owner() != testOwner || j.Format() != testFormat {
		t.Fatalf("owner %q format %q", j.Owner(), j.Format())
	}

	// Rebind retains both configs, as given, and moves the binding.
	last := j.LastSeq()
	if _, err := j.Rebind(nil); err == nil || err.Error() != errEmptyConfig.Error() || j.LastSeq() != last {
		t.Fatalf("Rebind(nil) = %v, LastSeq %d; want %q", err, j.LastSeq(), errEmptyConfig)
	}
	after := []byte(`{ "z": [1.50], "name": "\u00fc" }`)
	confB := bytes.Clone(after)
	seq, err := j.Rebind(after)
	if err != nil || seq != last+1 {
		t.Fatalf("Rebind = %d, %v", seq, err)
	}
	after[0] = 'x' // the journal kept its own copy
	if string(j.Config()) != string(confB) || j.Binding() != sha256.Sum256(confB) {
		t.Fatalf("after rebind: config %s binding %x", j.Config(), j.Binding())
	}
	recs := collect(t, j, seq)
	var rb rebindBody
	if err := cbor.Unmarshal(recs[0].Body, &rb); err != nil || recs[0].Kind != "rebind" {
		t.Fatalf("rebind record %+v: %v", recs[0], err)
	}
	sumB := sha256.Sum256(confB)
	if string(rb.Before) != string(testConfig) || string(rb.After) != string(confB) || string(rb.Binding) != string(sumB[:]) {
		t.Fatalf("rebind body before %s after %s binding %x", rb.Before, rb.After, rb.Binding)
	}
	mustClose(t, j)

	opts.Config = testConfig
	if _, err := Open(dir, opts); !errors.Is(err, ErrBindingMismatch) {
		t.Fatalf("old config after rebind: %v, want ErrBindingMismatch", err)
	}
	opts.Config = confB
	j = mustOpen(t, dir, opts)
	defer mustClose(t, j)
	s := j.Summary()
	if s.Rebinds != 1 || string(s.Config) != string(confB) || s.Owner != testOwner {
		t.Fatalf("summary %+v", s)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Fatal(err)
	}
}

// TestOpenKeepsItsConfig: Open binds a copy, so a caller reusing its slice
// changes neither the journal's config nor what a later Rebind retains.
func TestOpenKeepsItsConfig(t *testing.T) {
	opts := testOptions()
	opts.Config = bytes.Clone(testConfig)
	j := mustOpen(t, journalDir(t), opts)
	defer mustClose(t, j)
	opts.Config[0] = 'x'
	if string(j.Config()) != string(testConfig) {
		t.Fatalf("config %s changed with the caller's slice", j.Config())
	}
}

func TestNewJournal(t *testing.T) {
	// nil Config on a new journal binds {}.
	dir := journalDir(t)
	j := mustOpen(t, dir, Options{Owner: testOwner, Format: testFormat})
	if string(j.Config()) != "{}" || j.Binding() != sha256.Sum256([]byte("{}")) {
		t.Fatalf("nil config bound %s", j.Config())
	}
	mustClose(t, j)
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created directory mode %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	// Creating needs an owner and a format, and writes nothing without.
	dir = journalDir(t)
	if _, err := Open(dir, Options{Format: testFormat}); err == nil || !strings.Contains(err.Error(), "Owner") {
		t.Fatalf("Open without owner: %v", err)
	}
	if s, err := Inspect(dir); err != nil || s.LastSeq != 0 || len(s.Segments) != 0 {
		t.Fatalf("after a refused create: %+v, %v", s, err)
	}
	// Read-only does not create.
	missing := journalDir(t)
	if _, err := Open(missing, Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only Open created a journal")
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only Open left %s: %v", missing, err)
	}
	if _, err := Open(journalDir(t), Options{Owner: "o", Format: "f", SegmentSize: -1}); err == nil {
		t.Fatal("negative SegmentSize accepted")
	}
}

func TestReadOnly(t *testing.T) {
	dir := journalDir(t)
	mustClose(t, mustOpen(t, dir, testOptions()))
	before := snapshot(t, dir)
	j := mustOpen(t, dir, Options{ReadOnly: true})
	if _, err := j.Append("tick", 1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only Append: %v", err)
	}
	if _, err := j.Rebind([]byte(`{}`)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only Rebind: %v", err)
	}
	if len(collect(t, j, 0)) != 1 {
		t.Fatal("read-only Iterate")
	}
	mustClose(t, j)
	if !sameFiles(before, snapshot(t, dir)) {
		t.Fatal("read-only open changed the directory")
	}
}

func TestDirectoryChecks(t *testing.T) {
	t.Run("symlink", func(t *testing.T) {
		real := journalDir(t)
		mustClose(t, mustOpen(t, real, testOptions()))
		link := filepath.Join(t.TempDir(), "link")
		os.Symlink(real, link)
		for _, ro := range []bool{false, true} {
			if _, err := Open(link, Options{ReadOnly: ro}); err == nil || !strings.Contains(err.Error(), "symlink") {
				t.Fatalf("symlinked dir (read-only %v): %v", ro, err)
			}
		}
	})
	t.Run("group or world access", func(t *testing.T) {
		for _, mode := range []os.FileMode{0o750, 0o701, 0o705, 0o770} {
			dir := journalDir(t)
			os.Mkdir(dir, 0o700)
			os.Chmod(dir, mode)
			_, err := Open(dir, testOptions())
			if err == nil || !strings.Contains(err.Error(), "want 0700") {
				t.Fatalf("mode %04o: %v", mode, err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("mode %04o: refused Open wrote %v", mode, entries)
			}
		}
	})
	t.Run("not a directory", func(t *testing.T) {
		p := journalDir(t)
		os.WriteFile(p, nil, 0o600)
		if _, err := Open(p, testOptions()); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("file: %v", err)
		}
	})
	t.Run("another owner", func(t *testing.T) {
		testenv.NeedRoot(t, "to give the directory to another uid")
		dir := journalDir(t)
		os.Mkdir(dir, 0o700)
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, testOptions())
		if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("foreign directory: %v", err)
		}
		// Read-only inspection of another account's journal is allowed.
		if _, err := Inspect(dir); err != nil {
			t.Fatalf("Inspect foreign directory: %v", err)
		}
		var st syscall.Stat_t
		syscall.Stat(dir, &st)
		if st.Uid != 65534 {
			t.Fatal("chown did not take")
		}
	})
}
