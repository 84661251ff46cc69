// Package index is a daemon's history index: an on-disk map, in named
// buckets, from what ended (an attempt's end, an ask's decision, a
// requestId's answer) to where the journal holds it, usually the
// journal.Place of the record with the answer (DESIGN.md section 13).
//
//	x, err := index.Open(filepath.Join(stateDir, "index", "history.db"), index.Options{})
//	...
//	x.PutPlace("answers", []byte(requestID), place) // held in memory, visible at once
//	p, ok, err := x.GetPlace("answers", []byte(requestID))
//	rec, err := j.ReadAt(p)                          // the record, without iterating to it
//	...
//	x.SetMeta("mark", encodedMark) // what the index covers, in the same batch
//	x.Sync()                       // durable: now a snapshot may name the mark
//	x.Close()
//
// # What it owns and may touch
//
// It owns one bbolt (go.etcd.io/bbolt) file, mode 0600, in a directory
// of mode 0700 that it creates if absent, and the file's marker beside it
// (path + MarkerSuffix). It imports journal for Place and bbolt, nothing
// else of steward's. The index is derived from the journal: it can always
// be rebuilt by replaying the journal, which is why it may be written
// without an fsync per batch, and why a damaged file is reported
// (*DamagedError, naming the file) for the owner to remove and rebuild,
// never repaired.
//
// # Writes in batches, without fsync
//
// Put holds an entry in memory, where Get, Last and Range see it at
// once. Flush writes every held entry in one bbolt transaction with
// NoSync; Sync flushes and fsyncs; Close syncs. The held set is bounded:
// a Put that would take it past MaxPendingEntries entries or
// MaxPendingBytes bytes flushes first. A failed write or fsync stops the
// index for good (ErrFailed) until it is reopened: what the file holds
// past the last sync is unknown to it, and the owner re-feeds the index
// from the mark it recorded with SetMeta before its last Sync (a put is
// idempotent).
//
// A process crash after a Flush loses nothing (the kernel holds every
// write) and leaves a file bbolt opens: bbolt writes a transaction's
// pages before the meta page that makes them the tree. A power loss is
// another matter: without fsync the disk may persist a meta page before
// the pages it names, or a page a later transaction reused, so a file
// written without fsync before a machine restart cannot be trusted, and
// bbolt might not notice. The marker tells the two apart: before the
// first write without fsync since the last Sync, Flush creates the marker
// holding the machine's boot id (/proc/sys/kernel/random/boot_id)
// and fsyncs it and the directory; Sync removes it once the file is
// fsync'd. Open finding a marker of this boot (the owner crashed) fsyncs
// the file and removes it; one of another boot (the machine restarted in
// between) makes the file a *DamagedError.
//
// # Concurrency
//
// An Index is safe for concurrent use; the type's comment says which lock
// guards what. Gets read the file while a Flush writes it. Values
// returned are copies, never bbolt's memory-mapped bytes. Range's
// callback runs with no lock and no transaction held, so it may call the
// index. The file's flock (bbolt's, per open file description) refuses a
// second opener, in this process or another, with ErrLocked after
// Options.LockTimeout: Open never waits without a bound.
//
// # Read-only
//
// Options.ReadOnly opens an existing file under a shared flock, for a
// command that reads history while its owner is stopped: it creates,
// writes and syncs nothing, and the owner's exclusive lock and a reader's
// shared one refuse each other (ErrLocked), so a reader never sees a file
// being written.
package index
