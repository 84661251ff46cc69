package wire

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxKeyFile bounds a key file read; the largest (a hybrid public key set)
// is about 2 KiB.
const maxKeyFile = 16384

// keyFileKind says how private a key file and its directory must be.
type keyFileKind struct {
	what     string      // "private key" or "public key"
	fileMode os.FileMode // mode a new file is created with
	dirMode  os.FileMode // mode a missing directory is created with
	fileDeny uint32      // permission bits the file must not have
	dirDeny  uint32      // permission bits the directory must not have
}

var (
	privateKeyFile = keyFileKind{"private key", 0o600, 0o700, 0o077, 0o077}
	publicKeyFile  = keyFileKind{"public key", 0o644, 0o755, 0o022, 0o022}
)

func unsafeKeyFile(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrUnsafeKeyFile, path, fmt.Sprintf(format, args...))
}

// WriteSigningKey writes k as a private COSE_Key (with d) to a new file,
// mode 0600, created O_EXCL|O_NOFOLLOW and fsync'd, in a directory that must
// be owned by this user and closed to group and other (created 0700 if absent).
func WriteSigningKey(path string, k *SigningKey) error {
	return writeKeyFile(path, k.marshalPrivateCOSEKey(), privateKeyFile)
}

// ReadSigningKey reads a file written by WriteSigningKey. It refuses a
// symlink, a file that is not regular, a file or directory owned by another
// user, a file readable or writable by group or other, and a directory that
// group or other can access; every error names the file and the reason.
func ReadSigningKey(path string) (*SigningKey, error) {
	b, err := readKeyFile(path, privateKeyFile)
	if err != nil {
		return nil, err
	}
	k, err := parseSigningKey(b)
	if err != nil {
		return nil, fmt.Errorf("wire: key file %s: %w", path, err)
	}
	return k, nil
}

// WriteHybridKey writes k as a COSE_KeySet of its two private COSE_Keys,
// with the same file rules as WriteSigningKey.
func WriteHybridKey(path string, k *HybridSigningKey) error {
	return writeKeyFile(path, k.marshalPrivate(), privateKeyFile)
}

// ReadHybridKey reads a file written by WriteHybridKey, with the checks of ReadSigningKey.
func ReadHybridKey(path string) (*HybridSigningKey, error) {
	b, err := readKeyFile(path, privateKeyFile)
	if err != nil {
		return nil, err
	}
	k, err := parseHybridSigningKey(b)
	if err != nil {
		return nil, fmt.Errorf("wire: key file %s: %w", path, err)
	}
	return k, nil
}

// WritePublicKeyFile writes p's COSE_Key to a new file, mode 0644, created
// O_EXCL|O_NOFOLLOW and fsync'd, in a directory owned by this user or root
// and not writable by group or other (created 0755 if absent).
func WritePublicKeyFile(path string, p *PublicKey) error {
	return writeKeyFile(path, p.cose, publicKeyFile)
}

// ReadPublicKeyFile reads a pinned public key. Since a pinned key decides
// whom this side trusts, the file must be a regular file (not a symlink),
// owned by this user or root, and neither it nor its directory writable by
// group or other.
func ReadPublicKeyFile(path string) (*PublicKey, error) {
	b, err := readKeyFile(path, publicKeyFile)
	if err != nil {
		return nil, err
	}
	p, err := ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("wire: key file %s: %w", path, err)
	}
	return p, nil
}

// WriteHybridPublicKeyFile writes p's COSE_KeySet like WritePublicKeyFile.
func WriteHybridPublicKeyFile(path string, p *HybridPublicKey) error {
	return writeKeyFile(path, p.cose, publicKeyFile)
}

// ReadHybridPublicKeyFile reads a hybrid public key with the checks of ReadPublicKeyFile.
func ReadHybridPublicKeyFile(path string) (*HybridPublicKey, error) {
	b, err := readKeyFile(path, publicKeyFile)
	if err != nil {
		return nil, err
	}
	p, err := ParseHybridPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("wire: key file %s: %w", path, err)
	}
	return p, nil
}

// openKeyDir opens the directory of a key file without following a symlink
// and checks its owner and mode on the open descriptor.
func openKeyDir(path string, kind keyFileKind, create bool) (int, error) {
	dir := filepath.Dir(path)
	made := false
	if create {
		err := os.Mkdir(dir, kind.dirMode)
		if err != nil && !errors.Is(err, os.ErrExist) {
			return -1, fmt.Errorf("wire: %s file %s: create directory: %w", kind.what, path, err)
		}
		made = err == nil
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, unsafeKeyFile(path, "directory %s is a symlink or not a directory", dir)
		}
		return -1, fmt.Errorf("wire: %s file %s: open directory: %w", kind.what, path, err)
	}
	if made {
		// The directory this call made has exactly its mode, whatever the
		// umask left of it; one that existed keeps its own and is checked.
		if err := unix.Fchmod(fd, uint32(kind.dirMode)); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("wire: %s file %s: chmod directory: %w", kind.what, path, err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("wire: %s file %s: stat directory: %w", kind.what, path, err)
	}
	if err := checkOwner(st.Uid); err != nil {
		unix.Close(fd)
		return -1, unsafeKeyFile(path, "directory %s %v", dir, err)
	}
	if perm := st.Mode & 0o7777; perm&kind.dirDeny != 0 {
		unix.Close(fd)
		return -1, unsafeKeyFile(path, "directory %s has mode %04o; a %s directory must not grant group or other %s",
			dir, perm, kind.what, denyWord(kind.dirDeny))
	}
	return fd, nil
}

// checkOwner admits files owned by this process's user or by root.
func checkOwner(uid uint32) error {
	if euid := uint32(os.Geteuid()); uid != euid && uid != 0 {
		return fmt.Errorf("is owned by uid %d, not by uid %d or root", uid, euid)
	}
	return nil
}

func denyWord(deny uint32) string {
	if deny == 0o077 {
		return "any access"
	}
	return "write access"
}

// writeKeyFile creates path with data, O_EXCL and with exactly the kind's
// mode, fsyncs it and its directory.
func writeKeyFile(path string, data []byte, kind keyFileKind) (err error) {
	dfd, err := openKeyDir(path, kind, true)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	base := filepath.Base(path)
	fd, err := unix.Openat(dfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(kind.fileMode))
	if err != nil {
		return fmt.Errorf("wire: write %s file %s: %w", kind.what, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer func() {
		if err != nil {
			// The file is ours (O_EXCL) and incomplete: remove it so that a
			// half-written key is never read back as a key.
			unix.Unlinkat(dfd, base, 0)
		}
	}()
	// Exactly the kind's mode, whatever the umask left of it at create.
	if err = unix.Fchmod(fd, uint32(kind.fileMode)); err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Fsync(dfd)
	}
	if err != nil {
		return fmt.Errorf("wire: write %s file %s: %w", kind.what, path, err)
	}
	return nil
}

// readKeyFile opens path under its checked directory without following a
// symlink, checks type, owner and mode on the descriptor, and reads it.
func readKeyFile(path string, kind keyFileKind) ([]byte, error) {
	dfd, err := openKeyDir(path, kind, false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	// O_NONBLOCK: opening a FIFO planted here must not hang.
	fd, err := unix.Openat(dfd, filepath.Base(path), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, unsafeKeyFile(path, "is a symlink")
		}
		return nil, fmt.Errorf("wire: read %s file %s: %w", kind.what, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("wire: read %s file %s: %w", kind.what, path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, unsafeKeyFile(path, "is not a regular file")
	}
	if err := checkOwner(st.Uid); err != nil {
		return nil, unsafeKeyFile(path, "%v", err)
	}
	if perm := st.Mode & 0o7777; perm&kind.fileDeny != 0 {
		return nil, unsafeKeyFile(path, "has mode %04o; a %s file must not grant group or other %s",
			perm, kind.what, denyWord(kind.fileDeny))
	}
	if st.Size > maxKeyFile {
		return nil, unsafeKeyFile(path, "is %d bytes, more than the %d-byte key file bound", st.Size, maxKeyFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("wire: read %s file %s: %w", kind.what, path, err)
	}
	if len(b) > maxKeyFile {
		return nil, unsafeKeyFile(path, "is more than the %d-byte key file bound", maxKeyFile)
	}
	return b, nil
}
