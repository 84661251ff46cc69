package index

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPutGetPendingAndFlushed(t *testing.T) {
	x, path := open(t)
	if _, ok, err := x.Get("b", []byte("k")); ok || err != nil {
		t.Fatalf("empty index: found %v, %v", ok, err)
	}
	if err := x.Put("b", []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := x.Get("b", []byte("k")); !ok || err != nil || string(v) != "v1" {
		t.Fatalf("pending: %q %v %v", v, ok, err)
	}
	if _, ok := inFile(t, x, "b", []byte("k")); ok {
		t.Fatal("a pending put is in the file before Flush")
	}
	if n, b := x.Pending(); n != 1 || b != 3 {
		t.Fatalf("Pending() = %d, %d; want 1, 3", n, b)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if v, ok := inFile(t, x, "b", []byte("k")); !ok || string(v) != "v1" {
		t.Fatalf("flushed: file has %q %v", v, ok)
	}
	if n, _ := x.Pending(); n != 0 {
		t.Fatalf("Pending() = %d after Flush", n)
	}
	// A pending value hides the file's until it is flushed over it.
	if err := x.Put("b", []byte("k"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	v, ok, err := x.Get("b", []byte("k"))
	if !ok || err != nil || string(v) != "v2" {
		t.Fatalf("pending over flushed: %q %v %v", v, ok, err)
	}
	v[0] = 'X' // a copy: changing it changes nothing held
	if v, _, _ := x.Get("b", []byte("k")); string(v) != "v2" {
		t.Fatalf("the returned value was not a copy: %q", v)
	}
	if _, ok, _ := x.Get("other", []byte("k")); ok {
		t.Fatal("found a key in a bucket never written")
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	y := reopen(t, path)
	if v, ok, err := y.Get("b", []byte("k")); !ok || err != nil || string(v) != "v2" {
		t.Fatalf("after Close and reopen: %q %v %v", v, ok, err)
	}
}

func TestMetaInTheSameBatch(t *testing.T) {
	x, path := open(t)
	if err := x.Put("b", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := x.SetMeta("mark", []byte("m1")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := x.Meta("mark"); !ok || err != nil || string(v) != "m1" {
		t.Fatalf("pending meta: %q %v %v", v, ok, err)
	}
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, ok := inFile(t, x, metaBucket, []byte("mark")); !ok {
		t.Fatal("meta not in the file after Sync")
	}
	x.Close()
	y := reopen(t, path)
	if v, ok, err := y.Meta("mark"); !ok || err != nil || string(v) != "m1" {
		t.Fatalf("meta after reopen: %q %v %v", v, ok, err)
	}
	if _, ok, _ := y.Get("b", []byte("mark")); ok {
		t.Fatal("a meta key is visible in a bucket")
	}
	if err := y.Put(metaBucket, []byte("x"), []byte("y")); !errors.Is(err, ErrBounds) {
		t.Fatalf("Put into the meta bucket: %v", err)
	}
}

// The held set flushes when the next Put would take it past
// MaxPendingEntries: at the bound nothing is flushed, one past it is.
func TestAutoFlushAtEntryBound(t *testing.T) {
	x, _ := open(t)
	for i := range MaxPendingEntries {
		if err := x.Put("b", SeqKey(uint64(i)), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, b := x.Pending(); n != MaxPendingEntries || b != MaxPendingEntries*(8+PlaceBytes) {
		t.Fatalf("at the bound: Pending() = %d, %d", n, b)
	}
	if _, ok := inFile(t, x, "b", SeqKey(0)); ok {
		t.Fatal("flushed at the bound, before one past it")
	}
	// Overwriting a held key adds no entry: still no flush.
	if err := x.Put("b", SeqKey(0), value(1)); err != nil {
		t.Fatal(err)
	}
	if n, _ := x.Pending(); n != MaxPendingEntries {
		t.Fatalf("overwrite at the bound: Pending() = %d", n)
	}
	if err := x.Put("b", SeqKey(MaxPendingEntries), value(MaxPendingEntries)); err != nil {
		t.Fatal(err)
	}
	if n, _ := x.Pending(); n != 1 {
		t.Fatalf("one past the bound: Pending() = %d, want 1 (the flush came first)", n)
	}
	for _, i := range []int{0, MaxPendingEntries - 1} {
		if _, ok := inFile(t, x, "b", SeqKey(uint64(i))); !ok {
			t.Fatalf("entry %d not in the file after the automatic flush", i)
		}
	}
	if _, ok := inFile(t, x, "b", SeqKey(MaxPendingEntries)); ok {
		t.Fatal("the entry past the bound was flushed with the batch")
	}
}

// The same at MaxPendingBytes: exactly the bound is held; one byte past
// it flushes first.
func TestAutoFlushAtByteBound(t *testing.T) {
	x, _ := open(t)
	big := bytes.Repeat([]byte{7}, MaxValueBytes-8) // an entry of 64 KiB with its key
	n := MaxPendingBytes / MaxValueBytes
	for i := range n - 1 {
		if err := x.Put("b", SeqKey(uint64(i)), big); err != nil {
			t.Fatal(err)
		}
	}
	// One entry short of 64 KiB by 2 bytes, then a 2-byte entry: exactly
	// MaxPendingBytes.
	if err := x.Put("b", SeqKey(uint64(n-1)), big[2:]); err != nil {
		t.Fatal(err)
	}
	if err := x.Put("c", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if e, b := x.Pending(); e != n+1 || b != MaxPendingBytes {
		t.Fatalf("at the bound: Pending() = %d, %d; want %d, %d", e, b, n+1, MaxPendingBytes)
	}
	// Growing the 2-byte entry by 1 byte: one past the bound.
	if err := x.Put("c", []byte("k"), []byte("vv")); err != nil {
		t.Fatal(err)
	}
	if e, b := x.Pending(); e != 1 || b != 3 {
		t.Fatalf("one past the bound: Pending() = %d, %d; want 1, 3", e, b)
	}
	if v, ok := inFile(t, x, "c", []byte("k")); !ok || string(v) != "v" {
		t.Fatalf("the batch flushed before the put: file has %q %v", v, ok)
	}
}

func TestEntryBounds(t *testing.T) {
	x, _ := open(t)
	key := bytes.Repeat([]byte("k"), MaxKeyBytes)
	val := bytes.Repeat([]byte("v"), MaxValueBytes)
	bucket := strings.Repeat("b", MaxBucketBytes)
	if err := x.Put(bucket, key, val); err != nil {
		t.Fatalf("at every bound: %v", err)
	}
	if v, ok, err := x.Get(bucket, key); !ok || err != nil || !bytes.Equal(v, val) {
		t.Fatalf("at every bound: %v %v", ok, err)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"key one past", x.Put("b", append(key, 'k'), []byte("v")), "index: key of 1025 bytes, not 1 to 1024: index: out of bounds"},
		{"empty key", x.Put("b", nil, []byte("v")), "index: key of 0 bytes, not 1 to 1024: index: out of bounds"},
		{"value one past", x.Put("b", []byte("k"), append(val, 'v')), "index: value of 65537 bytes, not 1 to 65536: index: out of bounds"},
		{"empty value", x.Put("b", []byte("k"), nil), "index: value of 0 bytes, not 1 to 65536: index: out of bounds"},
		{"bucket one past", x.Put(bucket+"b", []byte("k"), []byte("v")), "index: bucket name of 65 bytes, not 1 to 64: index: out of bounds"},
		{"empty bucket", x.Put("", []byte("k"), []byte("v")), "index: bucket name of 0 bytes, not 1 to 64: index: out of bounds"},
		{"bucket char", x.Put("a b", []byte("k"), []byte("v")), `index: bucket name "a b" has ' ', outside A-Za-z0-9._:/-: index: out of bounds`},
		{"get key one past", get(x, "b", append(key, 'k')), "index: key of 1025 bytes, not 1 to 1024: index: out of bounds"},
		{"meta key one past", x.SetMeta(string(append(key, 'k')), []byte("v")), "index: key of 1025 bytes, not 1 to 1024: index: out of bounds"},
		{"last one past", last(x, MaxLast+1), "index: Last of 10001 entries, not 1 to 10000: index: out of bounds"},
		{"last zero", last(x, 0), "index: Last of 0 entries, not 1 to 10000: index: out of bounds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, c.err, c.want) })
	}
	if n, _ := x.Pending(); n != 0 {
		t.Fatalf("a refused put was held: Pending() = %d", n)
	}
	if err := last(x, MaxLast); err != nil {
		t.Fatalf("Last at MaxLast: %v", err)
	}
}

func get(x *Index, bucket string, key []byte) error {
	_, _, err := x.Get(bucket, key)
	return err
}

func last(x *Index, n int) error {
	_, err := x.Last("b", n)
	return err
}

// Last and Range walk the file in chunks and the held puts together, in
// key order, a held value in place of the file's.
func TestLastAndRangeOrder(t *testing.T) {
	x, _ := open(t)
	const n = 3*chunkEntries + 7
	for i := 0; i < n; i += 2 { // the even keys in the file
		if err := x.Put("b", SeqKey(uint64(i)), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i += 2 { // the odd ones held
		if err := x.Put("b", SeqKey(uint64(i)), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Put("b", SeqKey(10), []byte("held")); err != nil { // over a flushed one
		t.Fatal(err)
	}
	want := func(i int) []byte {
		if i == 10 {
			return []byte("held")
		}
		return value(i)
	}
	got, err := x.Last("b", 2*chunkEntries+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2*chunkEntries+1 {
		t.Fatalf("Last gave %d entries", len(got))
	}
	for j, e := range got {
		if i := n - 1 - j; !bytes.Equal(e.Key, SeqKey(uint64(i))) || !bytes.Equal(e.Value, want(i)) {
			t.Fatalf("Last[%d] = %x %x, want key %d", j, e.Key, e.Value, i)
		}
	}
	all, err := x.Last("b", MaxLast)
	if err != nil || len(all) != n || !bytes.Equal(all[n-1-10].Value, []byte("held")) {
		t.Fatalf("Last(MaxLast) of %d: %d entries, %v", n, len(all), err)
	}
	next := 5
	err = x.Range("b", SeqKey(5), func(k, v []byte) error {
		if !bytes.Equal(k, SeqKey(uint64(next))) || !bytes.Equal(v, want(next)) {
			return fmt.Errorf("Range gave %x %x, want key %d", k, v, next)
		}
		next++
		return nil
	})
	if err != nil || next != n {
		t.Fatalf("Range from 5: %v, ended at %d of %d", err, next, n)
	}
	stop := errors.New("stop")
	count := 0
	err = x.Range("b", nil, func(k, v []byte) error {
		if count++; count == 3 {
			return stop
		}
		return nil
	})
	if err != stop || count != 3 {
		t.Fatalf("Range stopped by fn: %v after %d", err, count)
	}
	if got, err := x.Last("none", 3); err != nil || len(got) != 0 {
		t.Fatalf("Last of a bucket never written: %v %v", got, err)
	}
}

// Range's fn may Put, even past the held bound (a flush that may grow
// the file and remap it, which waits for every read transaction).
func TestRangeCallbackMayPut(t *testing.T) {
	x, _ := open(t)
	for i := range 2 * chunkEntries {
		if err := x.Put("b", SeqKey(uint64(i)), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{1}, MaxValueBytes)
	seen := 0
	err := x.Range("b", nil, func(k, v []byte) error {
		seen++
		return x.Put("copy", k, big)
	})
	if err != nil || seen != 2*chunkEntries {
		t.Fatalf("Range with Puts: %v after %d", err, seen)
	}
	if v, ok, err := x.Get("copy", SeqKey(0)); !ok || err != nil || !bytes.Equal(v, big) {
		t.Fatalf("a put made in Range's fn: %v %v", ok, err)
	}
}

func TestPlaceEncoding(t *testing.T) {
	p := placeOf(41)
	b := EncodePlace(p)
	if len(b) != PlaceBytes {
		t.Fatalf("%d bytes", len(b))
	}
	if q, err := DecodePlace(b); err != nil || q != p {
		t.Fatalf("round trip: %+v %v", q, err)
	}
	wantErr(t, decodeErr(b[1:]), "index: a place is 25 bytes; got 24")
	wantErr(t, decodeErr(append(b, 0)), "index: a place is 25 bytes; got 26")
	bad := bytes.Clone(b)
	bad[0] = 2
	wantErr(t, decodeErr(bad), "index: a place of version 2; this index reads version 1")
	zero := EncodePlace(placeOf(-1))
	wantErr(t, decodeErr(zero), "index: place {Seq:0 Segment:1 Offset:-100} is no record's place")
	x, _ := open(t)
	if err := x.PutPlace("p", []byte("r1"), p); err != nil {
		t.Fatal(err)
	}
	if q, ok, err := x.GetPlace("p", []byte("r1")); !ok || err != nil || q != p {
		t.Fatalf("GetPlace: %+v %v %v", q, ok, err)
	}
	if err := x.Put("p", []byte("r2"), []byte("not a place")); err != nil {
		t.Fatal(err)
	}
	_, _, err := x.GetPlace("p", []byte("r2"))
	wantErr(t, err, fmt.Sprintf(`index: %s: bucket "p" key 7232: index: a place is 25 bytes; got 11`, x.Path()))
	if s, err := KeySeq(SeqKey(1 << 40)); err != nil || s != 1<<40 {
		t.Fatalf("KeySeq: %d %v", s, err)
	}
	_, err = KeySeq([]byte{1})
	wantErr(t, err, "index: a sequence key is 8 bytes; got 1")
}

func decodeErr(b []byte) error {
	_, err := DecodePlace(b)
	return err
}

func TestClosed(t *testing.T) {
	x, _ := open(t)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Put":   x.Put("b", []byte("k"), []byte("v")),
		"Get":   get(x, "b", []byte("k")),
		"Flush": x.Flush(),
		"Sync":  x.Sync(),
		"Last":  last(x, 1),
		"Close": x.Close(),
	} {
		if err != ErrClosed {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestOpenRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o750)
	_, err := Open(filepath.Join(dir, "x.db"), Options{})
	wantErr(t, err, "index: "+dir+" has mode 0750: group or others have access; want 0700")
	os.Chmod(dir, 0o700)
	loose := filepath.Join(dir, "loose.db")
	if err := os.WriteFile(loose, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(loose, 0o644)
	_, err = Open(loose, Options{})
	wantErr(t, err, "index: "+loose+" has mode 0644; want 0600")
	link := filepath.Join(dir, "link.db")
	os.Symlink(loose, link)
	_, err = Open(link, Options{})
	wantErr(t, err, "index: "+link+" is a symlink; an index file must be a real file")
	_, err = Open(filepath.Join(dir, "y.db"), Options{LockTimeout: -1})
	wantErr(t, err, "index: LockTimeout -1ns is negative (0 for the default 1s)")
	x, err := Open(filepath.Join(dir, "new.db"), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	fi, err := os.Stat(x.Path())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new file mode %v, %v; want 0600", fi.Mode(), err)
	}
}

// A second Open of a file already open, in the same process (the flock
// is per open file description) or another, is refused after the
// timeout.
func TestSecondOpenRefused(t *testing.T) {
	x, path := open(t)
	_, err := Open(path, Options{LockTimeout: 20 * 1e6})
	wantErr(t, err, "index: "+path+" is open by another owner (flock held past 20ms): index: locked by another opener")
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("%v does not match ErrLocked", err)
	}
	// Another process is refused the same way.
	c := startHelper(t, "INDEX_HELPER=lock", "INDEX_PATH="+path)
	if l, want := c.line(t), "refused index: "+path+" is open by another owner (flock held past 20ms): index: locked by another opener"; l != want {
		t.Fatalf("another process: %q\nwant %q", l, want)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if l := startHelper(t, "INDEX_HELPER=lock", "INDEX_PATH="+path).line(t); l != "opened" {
		t.Fatalf("another process after Close: %q", l)
	}
	y, err := Open(path, Options{LockTimeout: 20 * 1e6, Logger: quiet})
	if err != nil {
		t.Fatalf("Open after the first closed: %v", err)
	}
	y.Close()
}
