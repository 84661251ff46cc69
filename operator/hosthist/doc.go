// Package hosthist keeps the host's history on disk (DESIGN.md section
// 13): the snapshots of its state, signed with the operator key, and the
// history index of what ended (attempts, their asks, ask events), and it
// opens a store's journal through them (package journal/history).
//
//	o, err := hosthist.Open(hosthist.Options{Dir: store, Pub: pub, Key: key,
//		New: newReplay, Decode: decodeReplay, Logger: log})
//	live := o.State          // the snapshot's state and the records after it
//	ok, err := o.Index.Attempt(id, &a) // an ended attempt, found at once
//	go o.Keeper.Run(ctx, time.Second, forget)
//
// # Store layout
//
//	STORE/snapshots/         0700, the snapshots (journal/snapshot): the
//	                         state of a full replay up to a journal mark,
//	                         format StateFormat, signed (SignHybrid over the
//	                         digest) with the operator key
//	STORE/index/history.db   0600 in 0700, the history index (journal/index)
//
// It holds no state of its own and knows nothing of what a state holds:
// the custody core (package operator) gives it the replayer (a
// history.State) and the values it puts and gets, which it encodes and
// decodes as deterministic CBOR, strictly (Decode). It is below the core
// and above the record language (operator/hostlog) and package wire, whose
// hybrid signature it uses.
package hosthist
