// Package audit is `steward-operator receipts verify` and `receipts
// export`: it checks a host's receipt history, from a store's journal
// opened read-only or from an exported receipts file, against the keys
// the operator pinned.
//
//	rep, err := audit.VerifyStore(storeDir) // signatures, chain, checkpoints, consents, purses
//	b, err := audit.ExportStore(storeDir)
//	rep, err = audit.VerifyFileKeys(b, audit.FileKeys{Host: pub, Dispatch: dk, Controller: "ctl"})
//	rep, err = audit.VerifyArchived(storeDir, []string{archive1, archive2}, nil) // an archived journal
//	b, rep, err = audit.ExportVerified(storeDir, mark.Seq) // what `history archive` exports first
//	b, pt, rep, err := audit.ExportVerifiedPoint(storeDir, mark, sign) // and its verified point
//	rep, next, err := audit.Verify(storeDir, audit.VerifyOptions{Point: pt, PointName: f, SavePoint: sign})
//
// A journal `history archive` archived is read from its archives, then its
// live directory (archives.go): rep.Checked() says what came from where.
// A verify from a verified point (point.go) reads only the records after
// its mark: the audit checks a record at a time and carries only what is
// under way (audit.go, chain.go, ledger.go, pointstate.go).
//
// # What it owns and what it may touch
//
// The audit's pass over the host journal (audit.go, ends.go,
// attempts.go, asks.go: a hostlog.Visitor checking each record against
// what the records before it left), the chain and checkpoints as they come
// (chain.go), the purse arithmetic in ledger order as numbers settle
// (ledger.go), the receipts by agent (agents.go), the verified point
// (point.go, pointstate.go), and a receipts file's checks (verify.go). It reads the journal through package
// operator/hostlog and the operator's public key from the store's
// directory, and never the store or its private key: what it reports is
// what the records prove, not what the host believes, so it may run while
// the host serves and after the host is gone. A fault (the chain breaks, a
// receipt does not match its records) is an error wrapping
// hostlog.ErrReceiptFault; what verifies but is not backed by the payer's
// word or an approval is a finding, each listed.
package audit
