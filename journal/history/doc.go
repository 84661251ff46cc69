// Package history keeps a daemon's derived state light (DESIGN.md section
// 13): it opens the journal from the newest snapshot it can trust and
// replays only the records after it, and while the daemon runs it makes
// the next snapshot by replaying, in the background, the records since
// the last one onto a replica of the state.
//
//	k, op, err := history.Open(history.Options{
//		Journal: journalDir,
//		JournalOptions: journal.Options{Owner: "steward-operator", Format: hostlog.Format, Config: cfg},
//		Snapshots: snapDir, Format: "steward-host-state", Version: 1,
//		Index: x, New: newState, Decode: decodeState,
//		Sign: sign, Verify: verify,
//	})
//	for _, r := range op.Rejected { log.Warn("snapshot refused", "snapshot", r.Name, "reason", r.Reason) }
//	live := op.State.(*state) // what a full replay gives, ended items in the index
//	go k.Run(ctx, time.Second, func(m journal.Mark) { live.forgetEndedUpTo(m.Seq) })
//	...
//	err = k.Close() // a last snapshot, then the journal closed
//
// # The owner's part
//
// A State is the owner's replayer and what it rebuilt: Apply takes each
// record in order (the journal's own bind and rebind records too) and
// Encode gives the state as a snapshot holds it, deterministic, so that a
// state replayed to a mark and one decoded from that mark's snapshot
// encode alike. An owner keeps in a State only what is live (DESIGN.md
// section 13): what ended (an attempt's end, an ask's decision, a
// requestId's answer) its Apply puts into the history index (Options.Index)
// and drops, so a replay at start leaves nothing of history in memory,
// and a replayed item the index already holds from the same record (its
// seq is this record's) is the same item, not a duplicate: a snapshot, the
// index and a replay after a crash may overlap by the records between the
// index's last sync and the snapshot's mark. While the daemon runs, its
// live state keeps what ends until the keeper's next snapshot, after which
// the owner may drop what ended up to its mark (Run's callback): the index
// holds it then, durably.
//
// # Open
//
// Open loads the newest snapshot of Options.Format that verifies
// (journal/snapshot), whose mark the history index covers (the mark it
// last synced, recorded as its meta "history-covers"), and that the
// journal accepts: journal.Open from the mark, with each record after it
// given to the snapshot's decoded state (Options.OnRecord). A snapshot
// refused at any of these steps, or whose state refuses a record after
// it, is in Opened.Rejected with its name and why, and the next older one
// is tried, then a full replay onto Options.New's state. Nothing is
// refused silently: the owner logs every rejection. When no snapshot
// could be used and the full replay fails too, Open fails with the full
// replay's error, which is the journal's truth.
//
// After opening, Open makes the replica (the live state encoded and
// decoded again: a second state, the live one's equal) and, when the
// records replayed were at least Options.Every, writes a snapshot at once,
// before the owner serves anything, so a long replay is not paid twice.
//
// # Snapshots while running
//
// Snapshot applies the durable records since the replica's mark to the
// replica (journal.Iterate: records are read back from the segments, not
// kept), records the mark in the index and syncs it, writes the snapshot
// (encoded from the replica, never from the live state, so in-flight
// holds and claims are never in one) and returns the mark. Run does so
// every Options.Every records, checked at each tick; Close does so once
// more when anything was recorded since the last.
// A failed snapshot write (a full disk) is returned and logged, and the
// next one is due at the next tick: the journal stays the truth and no call waits for
// a snapshot. A record the replica refuses is a fault of the owner's
// records (the live path wrote what its replay refuses): the keeper stops
// making snapshots for good and Err reports it.
//
// # Read-only
//
// With Options.ReadOnly the journal opens read-only (a live journal is
// read up to its watermark), the index, when given, is not required to
// cover the snapshot (a running owner holds its lock, so a read-only
// command opens none), and the keeper writes nothing: Snapshot and Run
// refuse.
package history
