// Package msg is the language the operator's host and the controller share:
// the bodies of the frames that cross the forward and reverse sockets, and the
// signed artifacts both sides read (grants, route records, bundles, receipts,
// checkpoints, payer consents).
//
// Neither package operator nor package controller imports the other; both
// import msg. Every body here is encoded with wire.Marshal (core deterministic
// CBOR) and decoded with wire.Unmarshal (strict: unknown fields refused), so
// the bytes a signature covers are the bytes either side would produce.
//
// # Frames on the forward socket (controller dials the host's route socket)
//
//	dispatch  -> dispatch-result   a discovery or invocation, and its outcome
//	inspect   -> inspect-result    the host's record of one attempt
//
// # Frames on the control socket (controller dials the host's control socket)
//
// See control.go: routes, inspect and allowance.
//
// # Frames on the reverse socket (the host dials the controller)
//
//	reserve   -> consent           the payer's signed consent to one charge
//
// Any request may instead be answered with `refused` (Refusal), which says in
// one line what was refused and why.
//
// # Signed artifacts
//
// Long-lived authority (Grant, RouteRecord, Bundle, Checkpoint) is signed
// with the operator's hybrid key (wire.SignHybrid: Ed25519 and ML-DSA-65).
// Per-call objects (Consent, Receipt) are signed with Ed25519 alone
// (wire.Sign1); a Checkpoint over the receipt chain head covers them with a
// post-quantum signature within a second.
package msg
