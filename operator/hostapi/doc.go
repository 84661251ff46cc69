// Package hostapi is what crosses between the operator's store and the
// running host that serves it: the Daemon the host gives the store (it
// asks the payer, delivers to the application, holds the listeners a
// change needs, is told what to push), the values that cross it, and the
// filtered listing the store pages over the host's Courier.
//
//	var d hostapi.Daemon = h                          // package operator/host implements it
//	s, err := operator.OpenWith(dir, operator.Options{Daemon: d})
//	dl := hostapi.Filtered(d, &rt, q, keeps, cutoff) // a listing through a grant's patterns
//
// The store decides (admission, reservations, receipts, asks, route and
// controller changes) and the daemon carries. The store never reaches a
// socket of the daemon's; the daemon never reads the store's state but
// through its methods. A store a command opened has no daemon: it is
// served by Offline, which listens on nothing and pushes nothing.
// Package operator names these types by alias (operator.Daemon,
// operator.Delivery...), so its callers and the host use either name.
//
// Nothing here holds state or takes a lock: what a Daemon's methods are
// called with is a copy the store made under its own lock (Store.mu),
// which it does not hold across a call into the daemon.
//
// # The filtered listing
//
// A listing through a grant with operation patterns is paged by the store
// over the covered operations alone (Filtered): it reads the
// application's listing from its start (pages of oracleops.MaxLimit, at
// most MaxFilteredPages) and answers the agent's offset and limit over
// what the grant covers, with next_offset computed over those, so that no
// offset, page or next_offset counts what the grant hid. A listing that
// cannot be filtered is answered 502, never passed through. Which
// operations a grant covers is the store's to say (the keeps func).
package hostapi
