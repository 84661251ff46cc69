// Package journal is steward's one durable log: an fsync'd, hash-chained,
// append-only sequence of records in a directory, used by the operator host,
// the controller and the reference appliance. The rule everywhere is journal
// first, then act, then reply: Append returns only after the record is on
// disk.
//
// # Use
//
//	j, err := journal.Open(dir, journal.Options{Owner: "steward-operator", Format: format, Config: cfg})
//	p, err := j.AppendAt("attempt.end", body) // durable when it returns
//	r, err := j.ReadAt(p)                     // that record again, at once
//	m := j.Mark()                             // a snapshot's point: Options.From at the next start
//	a, err := j.Archive(archiveDir, m)        // the segments before m leave the live directory
//	err = j.Close()
//
// Each is described below: the directory and the records, the binding,
// group commit and failures, opening (from a mark), places, reading a live
// journal, and archiving.
//
// # Directory
//
// A journal directory is mode 0700, owned by the process account and never a
// symlink. It holds:
//
//	lock                          flock(LOCK_EX|LOCK_NB) by the one owner
//	0000000000000001.seg          segments, named by their first sequence
//	0000000000004711.seg          number in 16 decimal digits
//	0000000000004711.seg.torn-96  evidence: a torn tail moved aside at offset 96
//	                              (".<k>" appended for the k-th distinct one)
//	0000000000004712.seg.tmp      a segment being created (removed at Open)
//	durable                       the owner's watermark: the durable end, for
//	                              readers of the live journal
//	base                          after Archive: the log here starts after
//	                              the seq it names (see Archiving and the base)
//	base.tmp                      a base being written (removed at Open)
//
// A segment is created under a temporary name, preallocated with fallocate
// (mode 0) to the segment size (DefaultSegmentSize unless the bind record
// says otherwise, see Binding), fsync'd, renamed into place without
// replacing anything and the directory fsync'd; a crash leaves either no
// segment or a complete zero-filled one. Because the space is preallocated,
// an append neither changes the file size nor allocates blocks, which makes
// its fdatasync cheaper than one that extends the file. fallocate leaves the
// blocks "unwritten", and the first fdatasync over such a block must also
// commit its conversion to written, which for a multi-kilobyte batch costs
// several times the data; so whenever a batch reaches past the written part
// of the segment, the same pwritev extends it with 1 MiB of zeros, and the
// batches after it overwrite written blocks. A segment rotates when the next record would not fit; a record
// larger than the segment size gets a segment of its own size. An empty last
// segment (a crash right after creating it) that is too small for the next
// record is grown in place, since it already bears that record's name.
//
// # Records
//
// A segment is a sequence of frames from offset 0, followed by zeros to the
// end of the preallocation:
//
//	+----------------+----------------+---------------------+
//	| length (u32le) | CRC-32C (u32le)| payload (length B)  |
//	+----------------+----------------+---------------------+
//
// The CRC is CRC-32C (Castagnoli) of the payload. A length of 0 (a header of
// zeros) marks the end of the log; fewer than 8 bytes left at the end of a
// segment, all zero, end it too. length is at most MaxRecordBytes.
//
// The payload is the RFC 8949 core deterministic CBOR encoding of Record, a
// map of five pairs in key order at, seq, body, kind, prev:
//
//	seq   uint   1, 2, 3, ... with no gap, across segments
//	prev  bytes  SHA-256 of the previous record's payload; 32 zero bytes for record 1
//	kind  text   1 to 64 of A-Za-z0-9._:/-
//	at    int    unix milliseconds when the record was framed
//	body  any    deterministic CBOR chosen by the caller
//
// Payloads are decoded strictly: no duplicate keys, no unknown fields, no
// indefinite lengths, nesting at most 16 levels, arrays and maps at most 4096
// elements, and the bytes must be exactly the deterministic re-encoding of
// the decoded record. The log is a hash chain: Head is the hash of the last
// payload, which the next record's prev must equal.
//
// # Binding
//
// Record 1 has kind "bind" and body {owner, format, binding, config,
// segmentSize}: config is the owner's config, bytes the journal does not
// interpret (every steward owner passes canonical JSON, see package
// canonjson, so that a reformatted config file binds the same), binding is
// their SHA-256, which is all Open verifies of them, and segmentSize (1 to
// MaxSegmentSize) is the segment size the log was made with, which every
// later open keeps whatever its Options.SegmentSize says (a dev journal of
// a few MiB stays so under the 64 MiB default, and the reverse). A bind
// record without segmentSize was written before the size was recorded
// (journal/testdata/golden/v1); such a log takes Options.SegmentSize. A "rebind" record has body {before, after,
// binding}: the config in force before it, the one in force from it, and
// SHA-256(after). Open refuses (ErrBindingMismatch) a config, owner or format
// that does not match what the log says is in force.
//
// # Group commit
//
// Appends frame their record into the open batch under a mutex (sequence,
// prev and CRC are assigned there, in log order). The goroutine that opened
// a batch leads it: when the batch before it is done, it writes the whole
// batch with one pwritev and makes it durable with one fdatasync, while the
// next batch fills.
//
// # Failures
//
// A failed or short write (a full disk; a sparse segment allocates blocks
// as it is written) has a known outcome once it is undone: the leader
// zeroes the batch's range in a preallocated segment, or truncates a sparse
// one back to the end of the last durable record, fdatasyncs, logs the
// offset, length and record count it removed, and only then fails the
// batch and every batch queued behind it (their records chain on its) with
// ErrNotWritten. The next batch preallocates the segment again first, so
// once the disk has room appends succeed again, without a restart. A failure
// to create or preallocate a segment writes nothing a scan would read: the
// segment is made under a temporary name and renamed into place only when
// complete. A failed fdatasync (of a batch, of a removal or of the directory
// after a segment's rename) has an unknown outcome: the journal stops for
// good, every waiting and later append fails with ErrFailed and Failed is
// closed, so that the owner exits and its supervisor restarts it; the reopen
// reads what is really on disk. Nothing is retried on a caller's behalf.
//
// A record appended with AppendLinked is a link the owner builds on before
// it is durable (the host's receipts: receipt N+1 names N while N is being
// written). If it is not written (its batch or one before it failed and
// was removed, or it was refused), the journal stops for good in the
// leader, before any append of that batch is answered and before any
// later batch is written: otherwise a later link could land while the one
// it names never does, and the owner's chain would be broken on disk for
// good. Its appends fail with ErrFailed and ErrNotWritten (known not in
// the log), later ones with ErrFailed; Failed is closed. The owner frames
// its links in chain order by releasing its own lock in AppendLinked's
// framed callback, which runs once the record has its place in the log.
//
// # Opening and recovery
//
// Open scans every segment (every one from the mark's, with
// Options.From; see Starting from a mark) and verifies every frame, the sequence, the chain
// and the bind/rebind records, then checks owner, format and binding; it
// changes nothing on disk before all of that passed. In the last segment a bad frame (incomplete,
// checksum-failing or undecodable, or non-zero bytes after an end marker) is
// a torn tail if no valid frame (the payload's first bytes, a length within
// bounds and a matching CRC) starts anywhere after it: the bytes from the bad
// frame to the end of non-zero data are written to the evidence file
// "<segment>.torn-<offset>", fsync'd with the directory, then zeroed in the
// segment and fdatasync'd, so the log ends at the last good record. The
// recovery is logged (slog) and reported by Recoveries and Summary; later
// opens report it from the evidence file. A bad frame that valid frames
// follow, any bad frame or non-zero byte past the end in a segment that is
// not the last, a broken chain or sequence and a misplaced or inconsistent
// bind or rebind are corruption: Open refuses with a *CorruptError naming the
// segment and offset, and changes nothing.
//
// A crash can tear only the batch being written, which has not been
// acknowledged. If the kernel persisted a later page of that batch but not
// an earlier one, valid frames can follow the tear; Open then refuses as
// corrupt rather than guess, and the operator decides.
//
// # Starting from a mark
//
// An owner that snapshots its state keeps, with the snapshot, the Mark of
// the last record the snapshot reflects, and at start opens from it,
// replaying only what follows, as Open verifies it:
//
//	m := j.Mark() // after the records the snapshot reflects
//	...
//	opts.From = &snap.Mark
//	opts.OnRecord = func(r journal.Record) error { return state.apply(r) }
//	j, err := journal.Open(dir, opts)
//	if errors.Is(err, journal.ErrMarkMismatch) {
//		state = empty() // discard what OnRecord built
//		opts.From = nil // replay the whole log
//		j, err = journal.Open(dir, opts)
//	}
//	if err != nil {
//		return err // and what OnRecord built is not a log
//	}
//
// A mark is a record's seq and payload hash (Head), where its frame ends
// (Segment, End) and the binding in force there. Open with From lists the
// directory and reads nothing of the segments before the mark's (Summary
// counts them from their names; their Used is their size). It checks the
// mark's own fields agree (seq, head of 32 bytes, End that can hold the
// segment's records, binding the SHA-256 of config, rebinds below seq,
// segment size in bounds), that its segment is there, as long as End and
// of the mark's segment size, and that the frame ending at End is record
// Seq whose payload hashes to Head (found by its length, CRC-32C and hash,
// as frames have no back links); a bind or rebind record there must say
// what the mark says. Then it scans from End on with the chain state
// taken from the mark: the first record must be seq Seq+1 with prev Head,
// or the log ends at the mark. The mark's owner, format and config must
// be what Options say (after the rebinds that follow it), and a rebind
// after the mark must start from the mark's config. A mismatch anywhere in
// that is ErrMarkMismatch, with nothing changed on disk: a From open
// cannot tell a wrong mark from a wrong option, so the full Open that
// follows gives the verdict (ErrBindingMismatch, a *CorruptError). A mark
// is trusted as far as its head binds it: its rebind count is only checked
// where the log shows it (none at the bind record, one or more at a
// rebind), and a log whose bind record records no segment size takes the
// mark's. The records after the mark are verified as a full Open
// verifies them: damage is a *CorruptError, and a torn tail is moved aside
// as ever.
//
// OnRecord is the owner's replay during that one scan: every record after
// the mark (every record, bind and rebind included, without From), in
// order, each once, with its Place, after it passed every check; before
// the first, the owner and format are checked, so that another owner's
// log is refused as such. Its error stops Open, which returns it as is
// and writes nothing. What it built is valid only if Open succeeds.
//
// # Places
//
// A record's Place (seq, segment, offset) is where its frame is. Iterate
// and OnRecord fill Record.Place, and AppendAt and AppendLinkedAt return
// it once the record is durable. An owner keeps places in an index of its
// own (what ended, by key) and reads one record back at once:
//
//	r, err := j.ReadAt(p) // one open, one pread (two past 16 KiB)
//
// ReadAt verifies the frame's CRC-32C, the strict decoding and that the
// record is p.Seq; it cannot check the hash link to the record before,
// which it does not read. A place that is none of a durable record is
// ErrBadPlace; bytes there that are not the record, a *CorruptError.
//
// # Reading a live journal
//
// A read-only Open (journal inspect, the owners' read-only commands) may
// run while the owner appends. The owner rewrites the watermark file
// "durable" in place after every fdatasync, before it answers the batch's
// appends: 32 bytes, magic "jwm1", the durable end's seq, segment and end
// offset, CRC-32C; written with one pwrite, never fsync'd (it is only read
// while the owner runs, and it never names more than is durable). A
// read-only Open probes the lock (flock LOCK_SH|LOCK_NB on the lock file,
// released at once; an owner starting meanwhile tries again while the lock
// can be had shared). When an owner holds it, the reader reads the
// watermark, then the segments up to the one it names, up to its end, and
// nothing past it: the batch being written is not judged, so a live
// journal is never reported torn or corrupt. A watermark that is absent,
// damaged or that the log does not bear out (a restored log under an old
// one) is not used: the reader then reads leniently, a bad frame or an
// early end in the last segment ending its read unjudged (it may then read
// a batch that is not yet durable). With no owner running, the read is a
// full one as ever; if the lock is held once it is done, an owner started
// meanwhile and the read is done again up to its watermark (records
// OnRecord was given are not given again). Iterate on a read-only journal
// reads what Open found, not more.
//
// # Archiving and the base
//
// The owner's account moves the segments wholly before a mark its
// snapshot names out of the live directory, into an archive of their own,
// so that the live directory does not grow with every record ever written
// (DESIGN.md section 13, "Retention with evidence"):
//
//	a, err := j.Archive("/var/lib/steward/archive/journal-0001", snap.Mark)
//	switch {
//	case errors.Is(err, journal.ErrNothingToArchive): // the mark is in the first segment
//	case err != nil:
//		return err // nothing removed; Archive again completes an interrupted one
//	}
//	ar, err := journal.OpenArchive(a.Dir) // read-only, verified whole
//	err = ar.Iterate(0, func(r journal.Record) error { ... })
//	b, _ := j.Base() // b.Head == ar.Archived().Head: one chain
//
// An archive is a new directory holding the segments (each cut to the
// end of its last record, mode 0400) and "manifest": the deterministic
// CBOR of {version "steward-journal-archive-v1", from, to, segments}
// followed by its SHA-256 (the manifest's digest), where from and to are
// the chain state before its first record and after its last (seq, head,
// owner, format, config in force, rebinds, segment size) and each
// segment has its name, seqs, bytes and SHA-256. The live directory's
// "base" is the same kind of file, {version "steward-journal-base-v1",
// at, archives}: at is the chain state after the last archived record,
// archives every archive of records 1 to at.seq, oldest first, with its
// name (the directory's base name, which ErrArchived names), its path
// when it was made, its seqs and its manifest's digest.
//
// Archive takes the segments from the live log's first through the last
// one wholly before the mark (the mark's own segment too when the mark is
// its last record and a later one exists; never the one appended to),
// after checking that the mark is a durable point of the log (its frame,
// as Open with From checks it). A mark in the first segment, or at the
// base, is ErrNothingToArchive and writes nothing. Then, in this order, it
// verifies those segments as Open verifies a log, from the base (or
// record 1), and that the first segment kept chains on them; copies them
// and writes the manifest into "<dir>.partial", each fsync'd, and fsyncs
// that directory; renames it to dir (which must not exist or be empty)
// and fsyncs dir's parent; verifies the archive with OpenArchive; writes
// the new base as base.tmp, fsyncs it, renames it over base and fsyncs
// the live directory; and only then removes the archived segments and
// fsyncs the directory again. A crash before the base's rename leaves the
// old journal whole (and a partial or complete archive that is not yet
// the journal's); one after it, the new journal, whose Open reads none of
// the archived segments left behind (Base().Leftover). Archive called
// again completes either: it removes the leftovers once the base's
// archive verifies (else it keeps them and says so), clears
// "<dir>.partial", and takes up a complete archive in dir that holds
// exactly the records it would copy. FailArchiveCopied,
// FailArchiveRenamed, FailArchiveBaseTmp, FailArchiveBased and
// FailArchiveRemoving name the steps, for crash tests
// (STEWARD_FAILPOINT, as package internal/failpoint reads it).
//
// With a base, Open verifies the live log from the base's chain state
// instead of from record 1 (a first segment other than at.seq+1, or a
// first record that does not chain on its head, is a *CorruptError), and a
// damaged base refuses the open. ReadAt and Iterate of a seq at or before
// the base fail with ErrArchived, naming the archive that holds it;
// Iterate(0) starts after the base. An Open from a mark at the base goes
// on from the base; one before it fails with ErrArchived and
// ErrMarkMismatch. An Open with OnRecord and no From, a replay from
// record 1, is refused with ErrArchived (the live log alone no longer
// holds the records), unless Options.ReplayArchives asks for the archives
// too: each is opened where it was made, verified whole and handed over
// first.
package journal
