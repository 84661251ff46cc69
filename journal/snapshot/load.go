package snapshot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	suffix     = ".snap"
	nameDigits = 16
	tmpSuffix  = ".tmp"
)

// Name is the file name of the snapshot at seq: the seq in 16 decimal
// digits and ".snap", so that names sort as seqs do.
func Name(seq uint64) string { return fmt.Sprintf("%0*d%s", nameDigits, seq, suffix) }

// parseName returns the seq a snapshot file name names.
func parseName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != nameDigits || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil && seq > 0
}

// tempPattern is os.CreateTemp's pattern for a temporary of name:
// ".<name>.<random>.tmp", a name no snapshot has.
func tempPattern(name string) string { return "." + name + ".*" + tmpSuffix }

// isTemp reports whether name is a temporary of some snapshot's:
// "." + a snapshot's name + "." + a non-empty random part + ".tmp".
func isTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return false
	}
	base, tail, ok := strings.Cut(rest, suffix+".")
	if _, isSnap := parseName(base + suffix); !ok || !isSnap {
		return false
	}
	random, ok := strings.CutSuffix(tail, tmpSuffix)
	return ok && random != ""
}

// entry is a snapshot file in the directory.
type entry struct {
	name string
	seq  uint64
}

// list returns the directory's snapshot files, oldest first. Other files
// are not the package's and are left alone.
func list(dir string) ([]entry, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var out []entry
	for _, de := range des {
		if seq, ok := parseName(de.Name()); ok {
			out = append(out, entry{name: de.Name(), seq: seq})
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return compare(a.seq, b.seq) })
	return out, nil
}

func compare(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cleanTemps removes the temporaries a crashed Write left and returns
// their names, and those it could not remove (another account's Load has
// no right to) with why. A temporary whose lock is held belongs to a
// Write under way (in another process) and is left to it. (A cleanup
// that runs between a Write's creating its temporary and locking it
// removes it, and that Write fails when it renames: an error, never a
// damaged snapshot.)
func cleanTemps(dir string) (cleaned []string, failed []Rejected, err error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	for _, de := range des {
		if !isTemp(de.Name()) {
			continue
		}
		switch err := removeTemp(filepath.Join(dir, de.Name())); {
		case err == nil:
			cleaned = append(cleaned, de.Name())
		case errors.Is(err, errHeld), errors.Is(err, fs.ErrNotExist):
			// under way, or renamed or removed since the listing
		default:
			failed = append(failed, Rejected{Name: de.Name(),
				Reason: oneLine("a temporary left by an interrupted write, not removed: " + err.Error()), Err: err})
		}
	}
	return cleaned, failed, nil
}

// errHeld says that a temporary's lock is held: a Write is under way.
var errHeld = errors.New("held by a write under way")

// removeTemp removes the temporary at path if no process holds its lock.
func removeTemp(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errHeld
	}
	if err != nil {
		return fmt.Errorf("flock: %w", err)
	}
	return os.Remove(path)
}

// Rejected is a snapshot file Load did not take, and why.
type Rejected struct {
	Name   string
	Reason string // one line
	Err    error  // the cause, for errors.Is (accept's error, ErrTooLarge, ...)
}

// Loaded is what Load found.
type Loaded struct {
	Snapshot
	// Name is the file the snapshot was loaded from.
	Name string
	// Rejected are the newer files that were tried first and refused,
	// newest first, after any temporary Load could not remove.
	Rejected []Rejected
	// Cleaned are the temporaries an interrupted Write had left, removed.
	Cleaned []string
}

// Load returns the newest snapshot in dir that is valid: a file that is
// not over MaxBytes, decodes strictly as an envelope in deterministic
// encoding, whose SHA-256 matches, of format, whose name's seq is its
// mark's, whose signature verify accepts (verify gets the snapshot, the
// digest and the signature, nil if there is none; with verify nil a signed
// snapshot is refused), and that accept (when not nil) accepts: accept
// checks what only the owner can, such as the journal accepting the mark
// (journal.Open with Options.From). Each file refused is a Rejected and
// the next older one is tried. When none is valid, or there is none (dir
// absent included), the error matches ErrNoSnapshot and Loaded still
// reports the rejections. Temporaries an interrupted Write left are
// removed first, and reported. Load changes nothing else in dir.
func Load(dir, format string, verify func(s Snapshot, digest, sig []byte) error, accept func(Snapshot) error) (Loaded, error) {
	var l Loaded
	if err := checkFormat(format); err != nil {
		return l, fmt.Errorf("snapshot: %w", err)
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return l, fmt.Errorf("%w in %s: it does not exist", ErrNoSnapshot, dir)
	}
	if err := prepareDir(dir, false); err != nil {
		return l, err
	}
	var err error
	if l.Cleaned, l.Rejected, err = cleanTemps(dir); err != nil {
		return l, err
	}
	all, err := list(dir)
	if err != nil {
		return l, err
	}
	for _, e := range slices.Backward(all) {
		s, err := read(filepath.Join(dir, e.name), e.seq, format, verify)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a Write's pruning since the listing
		}
		if err == nil && accept != nil {
			if aerr := accept(s); aerr != nil {
				err = fmt.Errorf("refused: %w", aerr)
			}
		}
		if err != nil {
			l.Rejected = append(l.Rejected, Rejected{Name: e.name, Reason: oneLine(err.Error()), Err: err})
			continue
		}
		l.Snapshot, l.Name = s, e.name
		return l, nil
	}
	return l, noSnapshot(dir, l.Rejected)
}

// noSnapshot is Load's error when nothing is valid.
func noSnapshot(dir string, rejected []Rejected) error {
	if len(rejected) == 0 {
		return fmt.Errorf("%w in %s: it has none", ErrNoSnapshot, dir)
	}
	var b strings.Builder
	for i, r := range rejected {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.Name + ": " + r.Reason)
	}
	return fmt.Errorf("%w in %s: %d rejected: %s", ErrNoSnapshot, dir, len(rejected), b.String())
}

// read reads and decodes the snapshot file at path, named seq.
func read(path string, seq uint64, format string, verify func(Snapshot, []byte, []byte) error) (Snapshot, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return Snapshot{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Snapshot{}, err
	}
	if !fi.Mode().IsRegular() {
		return Snapshot{}, fmt.Errorf("not a regular file (mode %v)", fi.Mode())
	}
	if fi.Size() > MaxBytes {
		return Snapshot{}, tooLarge(fi.Size())
	}
	// One byte more than the size, to see a file that grew.
	b := make([]byte, fi.Size()+1)
	n, err := io.ReadFull(f, b)
	switch {
	case err == nil:
		return Snapshot{}, fmt.Errorf("grew while read, past %d bytes", fi.Size())
	case !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF):
		return Snapshot{}, fmt.Errorf("read: %w", err)
	case int64(n) != fi.Size():
		return Snapshot{}, fmt.Errorf("shrank while read, from %d bytes to %d", fi.Size(), n)
	}
	b = b[:n]
	s, err := decode(b, format, verify)
	if err != nil {
		return Snapshot{}, err
	}
	if s.Mark.Seq != seq {
		return Snapshot{}, fmt.Errorf("named for seq %d, but its mark is at seq %d", seq, s.Mark.Seq)
	}
	return s, nil
}

// oneLine makes a reason one line.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
