// Package appliance is steward-appliance, the reference
// oracle-operations-v1 application: real operations with real schemas,
// served over HTTP/1.1 on a Unix socket, with a journal of request ids.
// It knows nothing of custody; it speaks only oracleops.
//
// # Operations
//
//	calc.evaluate          live_direct  exact rational arithmetic (math/big) over decimals
//	units.convert          live_direct  length, mass, time, data size (SI and IEC), temperature
//	time.duration          live_direct  elapsed time between two RFC 3339 times
//	text.sha256            live_direct  SHA-256 of a text's UTF-8 bytes
//	reference.si_prefixes  text_only    the SI and IEC prefixes, as description text
//	units.currency         unavailable  needs exchange rates this appliance does not have
//
// Each descriptor carries its JSON Schema, units, sources and examples;
// the tests invoke every example and compare the result byte for byte.
//
// # HTTP
//
// Under PREFIX (default /v1):
//
//	GET  PREFIX/operations?query=&availability=&limit=&offset=   a page of descriptors
//	GET  PREFIX/operations/ID                                    one descriptor (any availability)
//	POST PREFIX/invoke                                           run a live_direct operation
//
// Discovery matches every blank-separated term of query, case-insensitive,
// against id, title, description and units; availability is live_direct
// (default), text_only, unavailable or any; next_offset is null on the last
// page; limits.request_bytes is 65,536.
//
// Every answer is canonical JSON (oracleops.CanonicalJSON). Success:
//
//	200 {"operationId":ID,"result":{...}}
//
// Errors all have one shape, details null when there are none:
//
//	{"error":{"code":CODE,"details":{...}|null,"message":"one line"}}
//
//	400 bad_request        malformed body or query, ids past their bounds (also 405, wrong method)
//	403 unavailable        the operation is text_only or unavailable; details {"availability"}
//	404 not_found          unknown operation or path; details {"operationId"} for operations
//	409 conflict           requestId already used with a different body; details {"requestId"}
//	409 archived           requestId's answer was moved out by history archive; nothing runs;
//	                       details {"archive","requestId"}
//	413 too_large          body over 65,536 bytes, refused before it is read whole; details {"limit"}
//	422 invalid_arguments  arguments fail the input schema; details {"violations":[...],"omitted":N}
//	422 refused            the operation refuses the input; details {"reason", and e.g. "position"}
//	                       reasons: syntax, division_by_zero, overflow (calc, with the 1-based
//	                       position), unit, value, incompatible_dimensions (units), time (duration)
//	429 busy               the operation's concurrent invocations are at its cap; details {"capacity"}
//	500 fault              the answer could not be journaled, or the operation failed
//	503 timeout            the operation ran past the handler bound and was abandoned;
//	                       details {"boundMs"}
//
// # Request ids and the journal
//
// The journal (package journal) lives in STATE/journal, owner
// "steward-appliance", format "steward-appliance-journal-v1", bound to
// {"application":"steward-appliance","protocol":"oracle-operations-v1"}.
// Each answered invocation appends one record of kind "answer":
//
//	{"requestId": R, "bodySha256": SHA-256 of the canonical invocation body (32 bytes),
//	 "status": HTTP status, "response": the exact response body bytes}
//
// and it is on disk (fdatasync) before the first byte of the answer is
// written. Every answer to a well-formed invocation is recorded, refusals
// included (404, 403, 422, 503 timeout), except busy (429) and faults (500), after
// which nothing ran and the same request may be sent again. The same
// requestId with the same canonical body replays the recorded status and
// body byte for byte, and a different body is a 409 conflict; neither runs
// anything nor writes to the journal. Two calls with one requestId at
// once: the second waits for the first and replays it.
//
// # History
//
// Memory and start time do not grow with the calls served (DESIGN.md
// section 13, "The appliance's history"). The replay of the journal is a
// history.State (state.go): the last record applied, the answers among
// them and the journal's origin, in snapshots of format
// "steward-appliance-state" version 1 in STATE/snapshots, unsigned. Each
// answer's requestId maps, in the history index STATE/index/answers.db
// (journal/index on bbolt), to the SHA-256 of its canonical body and the
// journal place of its record, which a repeat reads at once
// (journal.ReadAt) and checks against the entry. A start opens the
// journal from the newest snapshot the index covers and the journal
// accepts and replays only what follows, each record decoded once; the
// answers recorded since the last snapshot stay in memory until the next
// (every 10,000 records, and at a clean stop). A damaged index is logged,
// renamed NAME.damaged (NAME.N.damaged when taken; never deleted) and
// rebuilt by a full replay: at start, or, found by a repeat while serving
// (answered 500 fault, nothing run), by stopping the server with an error
// so that its supervisor restarts it. `steward-appliance inspect` reads
// the same way, read-only and without the index.
//
// `history snapshot` and `history archive` (archive.go) run on a stopped
// appliance's state, as its account, taking the locks a start takes (and
// refused while it serves: its socket is the host's, no administrator's).
// Archive makes the snapshot, then journal.Archive moves the segments
// wholly before its mark into a new directory; the journal holds no
// receipts, so nothing is exported. A requestId whose answer record is
// archived (ReadAt's *journal.ArchivedError) is answered 409 archived,
// naming the archive only, and never run again; its id stays taken (the
// index still holds it, and another body under it is a conflict).
//
// # Socket and state
//
// The socket is created with mode 0660 at bind time (umask on a thread of
// its own, never chmod after listen); a stale socket nobody listens on is
// removed with a log line, a live one or a non-socket is refused. Only the
// host's account is served, by SO_PEERCRED at accept: the appliance's own
// uid, a peer whose group is the socket's, and the uids given with
// --peer-uid (Config.PeerUIDs); any other peer is answered 403 at once and
// closed, holding no slot.
//
// No peer can hold a connection slot (MaxConnections, 64) by saying
// nothing: request headers are due within the header bound (10 s) of the
// connection or of an idle connection's first byte, a kept-alive
// connection is closed after the idle bound (2 min) of quiet, and an
// operation that runs past the handler bound (20 s) is answered 503
// timeout, recorded for its requestId, while the operation's late answer
// is dropped; the write deadline is the handler bound plus 10 s, the last
// resort. The host's route timeouts are set under these. The state
// directory is created 0700 and refused if others can enter it. Serve stops
// on context cancellation: the socket is closed and removed, running
// requests finish (up to 10 s), a last snapshot is made, and the journal
// and the history index are closed.
//
// # Command
//
// Main is the steward-appliance command (its cmd main only calls it):
// `serve --socket PATH --state DIR [--prefix /v1] [--peer-uid N]... [--log-level LEVEL]`
// prints "ready PATH" on stdout once it serves and stops cleanly on SIGINT
// or SIGTERM; `inspect --state DIR` prints the journal's records, the
// snapshot it read from, the records replayed and the answers, writing
// nothing (also while the appliance serves); `history snapshot --state
// DIR` and `history archive --state DIR --to ARCHIVEDIR` as above. Exit
// status 0 after help, a clean stop, an inspection or a history command
// done, 1 when one failed, 2 for a usage error or a refusal.
package appliance
