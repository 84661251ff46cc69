package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
)

// A child puts entries, Syncs and is SIGKILLed right after: every entry
// and the meta are there after a reopen, and no marker is left.
func TestSyncSurvivesSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idx", "history.db")
	const n = 10000
	c := startHelper(t, "INDEX_HELPER=sync", "INDEX_PATH="+path, "INDEX_N="+strconv.Itoa(n))
	c.waitKilled(t)
	if _, err := os.Stat(path + MarkerSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker after Sync: %v", err)
	}
	x := reopen(t, path)
	check(t, x)
	for i := range n {
		if v, ok := inFile(t, x, "b", SeqKey(uint64(i))); !ok || !bytes.Equal(v, value(i)) {
			t.Fatalf("entry %d after the kill: %x %v", i, v, ok)
		}
	}
	if v, ok, err := x.Meta("mark"); !ok || err != nil || !bytes.Equal(v, SeqKey(n)) {
		t.Fatalf("meta after the kill: %x %v %v", v, ok, err)
	}
}

// A child Flushes without Sync and is SIGKILLed right after: the marker
// says this boot, and Open fsyncs the file, removes the marker and finds
// every entry in a file bbolt's check passes.
func TestKillAfterFlushWithoutSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idx", "history.db")
	const n = 10000
	c := startHelper(t, "INDEX_HELPER=flush", "INDEX_PATH="+path, "INDEX_N="+strconv.Itoa(n))
	c.waitKilled(t)
	boot, err := bootID()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path + MarkerSuffix); err != nil || string(b) != boot+"\n" {
		t.Fatalf("marker after a Flush without Sync: %q %v, want this boot %s", b, err, boot)
	}
	x := reopen(t, path)
	if _, err := os.Stat(path + MarkerSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker left by Open after a crash of this boot: %v", err)
	}
	check(t, x)
	for i := range n {
		if _, ok := inFile(t, x, "b", SeqKey(uint64(i))); !ok {
			t.Fatalf("flushed entry %d lost by a process crash", i)
		}
	}
}

// The parent kills a child that flushes in a loop, wherever it is (in
// the middle of a transaction, most likely): the file opens, passes
// bbolt's check, and holds every batch the child said it flushed.
func TestKillDuringFlushesNeverCorrupts(t *testing.T) {
	for round := range 5 {
		path := filepath.Join(t.TempDir(), "idx", "history.db")
		const n = 500
		c := startHelper(t, "INDEX_HELPER=flush-loop", "INDEX_PATH="+path, "INDEX_N="+strconv.Itoa(n))
		var flushed int
		for range 3 + round*4 {
			l := c.line(t)
			v, err := strconv.Atoi(strings.TrimPrefix(l, "flushed "))
			if err != nil {
				t.Fatalf("child said %q", l)
			}
			flushed = v
		}
		c.cmd.Process.Kill()
		c.waitKilled(t)
		x := reopen(t, path)
		check(t, x)
		for i := range flushed {
			if _, ok := inFile(t, x, "b", SeqKey(uint64(i))); !ok {
				t.Fatalf("round %d: entry %d of %d flushed is lost", round, i, flushed)
			}
		}
		x.Close()
	}
}

// A marker from another boot: the file was written without fsync and the
// machine restarted, so it is damaged whatever bbolt thinks of it.
func TestMarkerFromAnotherBoot(t *testing.T) {
	x, path := open(t)
	if err := x.Put("b", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+MarkerSuffix, []byte("00000000-1111-2222-3333-444444444444\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	boot, _ := bootID()
	_, err := Open(path, Options{Logger: quiet})
	wantErr(t, err, "index: "+path+" is damaged: written without fsync in boot 00000000-1111-2222-3333-444444444444, "+
		"and the machine has restarted since (boot "+boot+"); remove it and rebuild it from the journal")
	var d *DamagedError
	if !errors.As(err, &d) || d.Path != path || !errors.Is(err, ErrDamaged) {
		t.Fatalf("%v is not a *DamagedError naming the file", err)
	}
	// The refusal released the lock: the owner can remove and rebuild.
	os.Remove(path)
	os.Remove(path + MarkerSuffix)
	reopen(t, path)
}

// Gets of keys already put never miss while Flushes write the file.
func TestConcurrentGetsDuringFlush(t *testing.T) {
	x, _ := open(t)
	const n = 20000
	var put sync.WaitGroup
	published := make(chan int, n)
	put.Add(1)
	go func() {
		defer put.Done()
		defer close(published)
		for i := range n {
			if err := x.Put("b", SeqKey(uint64(i)), value(i)); err != nil {
				t.Error(err)
				return
			}
			published <- i
			if i%997 == 0 {
				if err := x.Flush(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	var readers sync.WaitGroup
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := range published {
				for _, j := range []int{i, i / 2, i / 7} {
					v, ok, err := x.Get("b", SeqKey(uint64(j)))
					if err != nil || !ok || !bytes.Equal(v, value(j)) {
						t.Errorf("Get %d after its Put: %x %v %v", j, v, ok, err)
						return
					}
				}
			}
		}()
	}
	readers.Add(1)
	go func() {
		defer readers.Done()
		for range 50 {
			if _, err := x.Last("b", 10); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	put.Wait()
	readers.Wait()
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	check(t, x)
}

// A file that is not bbolt's is damaged, named, and the lock released.
func TestDamagedFileRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	os.Mkdir(dir, 0o700)
	path := filepath.Join(dir, "history.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not bbolt "), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{Logger: quiet})
	wantErr(t, err, "index: "+path+" is damaged: bbolt: invalid database; remove it and rebuild it from the journal")
	_, err = Open(path, Options{Logger: quiet, LockTimeout: 20 * 1e6})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("second Open of a damaged file: %v (a refused Open must release the lock)", err)
	}
}

// bigFile writes an index of n entries, closes it and returns its path.
func bigFile(t *testing.T, n int) string {
	t.Helper()
	x, path := open(t)
	for i := range n {
		if err := x.Put("b", SeqKey(uint64(i)), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Page flags of bbolt's page header (id u64, flags u16, count u16,
// overflow u32), as the file format has them.
const (
	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
)

// damagePages overwrites with garbage every 4 KiB page of the file whose
// header has one of the flags, and returns how many it overwrote.
func damagePages(t *testing.T, path string, flags uint16) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for off := 2 * 4096; off+4096 <= len(b); off += 4096 {
		if f := binary.LittleEndian.Uint16(b[off+8:]); f&flags != 0 && f&^0x1f == 0 {
			copy(b[off:off+4096], bytes.Repeat([]byte{0xa5}, 4096))
			n++
		}
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// A damaged freelist page is found by Open, which names the file and
// releases the lock.
func TestDamagedFreelistRefused(t *testing.T) {
	path := bigFile(t, 20000)
	if damagePages(t, path, freelistPage) == 0 {
		t.Fatal("no freelist page found")
	}
	_, err := Open(path, Options{Logger: quiet})
	if !errors.Is(err, ErrDamaged) || !strings.HasPrefix(err.Error(), "index: "+path+" is damaged: bbolt: ") {
		t.Fatalf("Open of a file with a damaged freelist: %v", err)
	}
	t.Logf("refused: %v", err)
	_, err = Open(path, Options{Logger: quiet, LockTimeout: 20 * 1e6})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("second Open: %v (a refused Open must release the lock)", err)
	}
}

// Pages damaged inside a file bbolt opens (the tree's leaves and
// branches), and pages cut off by a truncation (a memory fault when
// read), are found when read: the error names the file, and the index
// stops (every later call fails the same way) rather than answer from a
// tree it cannot trust.
func TestDamagedPagesReported(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"leaves", func(t *testing.T, path string) {
			if damagePages(t, path, leafPage|branchPage) == 0 {
				t.Fatal("no leaf page found")
			}
		}},
		{"truncated", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := bigFile(t, 20000)
			c.damage(t, path)
			x, err := Open(path, Options{Logger: quiet})
			if err != nil {
				if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
					t.Fatalf("Open of a damaged file: %v", err)
				}
				t.Logf("Open refused: %v", err)
				return
			}
			defer x.Close()
			var first error
			for i := 0; i < 20000 && first == nil; i += 101 {
				_, _, first = x.Get("b", SeqKey(uint64(i)))
			}
			if first == nil {
				_, first = x.Last("b", 100)
			}
			if !errors.Is(first, ErrDamaged) || !strings.HasPrefix(first.Error(), "index: "+path+" is damaged: bbolt: ") {
				t.Fatalf("reading damaged pages: %v", first)
			}
			t.Logf("found on reading: %v", first)
			if _, _, err := x.Get("b", SeqKey(0)); err != first {
				t.Fatalf("after the damage was found: %v, want the same error", err)
			}
		})
	}
}

// A file truncated under an open index: reading a page past the new end
// is a memory fault (SIGBUS), which is reported as damage, not a crash.
func TestTruncatedUnderAnOpenIndex(t *testing.T) {
	path := bigFile(t, 20000)
	x := reopen(t, path)
	if err := os.Truncate(path, 4*4096); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; i < 20000 && err == nil; i += 101 {
		_, _, err = x.Get("b", SeqKey(uint64(i)))
	}
	if !errors.Is(err, ErrDamaged) || !strings.HasPrefix(err.Error(), "index: "+path+" is damaged: bbolt: ") {
		t.Fatalf("reading past the end of a truncated file: %v", err)
	}
	t.Logf("found: %v", err)
}

// A flush that fails (a full disk) stops the index for good: the entries
// it held are not answered as if they were written, and every later
// call fails with ErrFailed until a reopen.
func TestFailedFlushStops(t *testing.T) {
	dir := testenv.SmallTmpfs(t, 4<<20)
	path := filepath.Join(dir, "idx", "history.db")
	x, err := Open(path, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	// A first flush makes the marker: the failure below is bbolt's write.
	if err := x.Put("b", []byte("first"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	testenv.FillDisk(t, filepath.Join(dir, "filler"))
	big := bytes.Repeat([]byte{3}, MaxValueBytes)
	var failed error
	for i := 0; i < 1000 && failed == nil; i++ {
		failed = x.Put("b", SeqKey(uint64(i)), big)
	}
	if failed == nil {
		failed = x.Flush()
	}
	if !errors.Is(failed, ErrFailed) {
		t.Fatalf("a flush on a full disk: %v, want ErrFailed", failed)
	}
	if err := x.Put("b", []byte("later"), []byte("v")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Put after a failed flush: %v", err)
	}
	if _, _, err := x.Get("b", SeqKey(0)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Get after a failed flush: %v", err)
	}
	if err := x.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync after a failed flush: %v", err)
	}
}
