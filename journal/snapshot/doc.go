// Package snapshot keeps a daemon's snapshots of its live state, each
// bound to the journal mark it reflects (DESIGN.md section 13).
//
//	// In the background, after replaying the records up to mark onto the
//	// last snapshot's state, and syncing the history index:
//	w, err := snapshot.Write(dir, snapshot.Snapshot{
//		Format: "steward-host-snapshot-v1", Version: 1, Mark: mark, State: state,
//	}, signWithOperatorKey)
//
//	// At start:
//	l, err := snapshot.Load(dir, "steward-host-snapshot-v1", verifyOperatorSig,
//		func(s snapshot.Snapshot) error {
//			j, err = journal.Open(journalDir, journal.Options{From: &s.Mark, ...})
//			return err // a mark the journal refuses: the next older snapshot
//		})
//	for _, r := range l.Rejected { log(r.Name, r.Reason) }
//	if errors.Is(err, snapshot.ErrNoSnapshot) { /* full replay */ }
//
// # What it owns and may touch
//
// It owns one directory (mode 0700, created by Write if absent), the
// owner's alone, and in it only the files it names: snapshots,
// Name(seq) = "0000000000123456.snap" (the mark's seq in 16 decimal
// digits), and temporaries ".0000000000123456.snap.<random>.tmp". Other
// files there are left alone. It imports journal (for Mark),
// internal/durable (directory fsync) and internal/failpoint; it holds no
// key: the owner signs (Write's sign func) and verifies (Load's verify
// func) where its authority is in the state.
//
// # File
//
// A snapshot file is at most MaxBytes, the RFC 8949 core deterministic
// CBOR encoding of a map {content, sha256, sig}: content is the bytes of
// the deterministic encoding of {v, format, version, mark, state} (v the
// envelope's version, 1; format and version the owner's; mark the
// journal.Mark; state the owner's own encoding), sha256 is SHA-256 of
// "steward-snapshot-v1\n" followed by the content bytes (the digest; the
// prefix keeps it from being the digest of anything else an owner's key
// signs), and sig, absent when unsigned, the owner's signature over the
// digest. Load decodes both maps strictly (no unknown field, no
// duplicate key, no indefinite length, no tag, bounded nesting and
// sizes) and requires each to be exactly its deterministic re-encoding,
// so that one snapshot has one file, byte for byte. Loading a file at the
// bound holds about four copies of its size in memory for a moment (the
// file, the content, the state, a re-encoding).
//
// # Crashes
//
// Write writes a temporary file, holding an flock on it, fsyncs it,
// renames it into place without replacing anything and fsyncs the
// directory; only then does it remove the oldest snapshots past Keep. A
// crash (FailBeforeFsync ... FailAfterRename are its failpoints) leaves
// the earlier snapshots as they were and either no new snapshot, with a
// temporary, or a complete one. The next Write or Load removes a
// temporary no process holds locked and reports it (Written.Cleaned,
// Loaded.Cleaned); one whose lock is held is a Write under way, left
// alone.
package snapshot
