// Package ledger is the controller journal's record language and the index
// rebuilt from it: the one place that says what each record kind means.
// The controller writes the records and keeps a Ledger while it runs; the
// root installer reads the same journal to refuse an enrollment while an
// attempt is unresolved (Uncertain), without linking the controller.
//
// Usage (the controller opens through journal/history, whose State a
// Ledger is: Apply replays one record, Encode and DecodeState are its
// snapshot form, StateFormat and StateVersion name it):
//
//	l := ledger.NewIndexed(x)                    // x: the history index
//	... history.Open(... New: l, Decode: ledger.DecodeState ...) applies the records
//	prior, ok := l.Begin(b)                      // before journaling begin: memory, then the index
//	if !ok { /* prior decides: replay (j.ReadAt(prior.Answer)), conflict or refusal; prior.Err: refuse */ }
//	seq, err := j.Append(ledger.KindBegin, b)
//	if err != nil { l.Abort(b.Attempt) } else { l.Journaled(b.Attempt, seq) }
//	...
//	l.Finish(res, place)                         // after journaling the result (j.AppendAt)
//	l.Forget(mark.Seq)                           // after the keeper's snapshot at mark
//
// A requestId whose attempt ended is in the index (requests.go: its key,
// and the place of its answer), not in memory, once the keeper's snapshot
// has synced the index past it. The read-only readers (the controller's
// commands, the installer: OpenReadOnly) use Discard, keeping none.
//
// Records (kind: body):
//
//	begin       Begin: journaled before anything of a call is sent, naming
//	            its agent (fields added in place, omitted when empty, as
//	            a begin's always have been: older begins still read)
//	result      Result: the dispatch's outcome, with the host's receipt
//	resolve     Resolve: an uncertain attempt settled from the host's word
//	            (first version, still read)
//	resolve.v2  ResolveV2: the same, with the host operator's resolution
//	            (released or performed on the host: who and why), which
//	            answers the attempt's requestId from then on
//	awaiting    Awaiting: the host raised an ask for the attempt (an
//	            operation marked for approval); nothing reserved or sent
//	consented   Consented: the consent to such an attempt's reserve,
//	            journaled before the consent leaves (only for attempts
//	            with an awaiting record)
//	fg-submit   FgSubmit: a foreground request accepted
//	fg-result   FgResult: its result, kept until acknowledged
//	fg-ack      FgAck: the result forgotten
//
// The index finds an earlier attempt by (agent, application, requestId),
// the agent being Begin.Owner: one agent's attempts decide nothing of
// another's.
//
// Every begin without a result or resolution is uncertain after a restart:
// whether it was consented to or sent cannot be known, so it is never
// consented to again and its requestId is refused until it is resolved.
// One exception: a begin with an awaiting record and no consented record
// is awaiting approval (msg.StateAwaitingApproval), since the host reserves
// and delivers nothing of it before this controller consents and the
// consented record is journaled before any consent leaves. Such an
// attempt is not uncertain (Uncertain leaves it out: it blocks no
// enrollment), counts nothing for the payer's day (Spending), and may be
// consented to once (Consent). With a consented record and no result it
// is uncertain as any other, counted at the amount consented.
package ledger
