// Package hosttest is the operator's side as tests drive it: a store with
// a controller, a funded purse, a grant and a route, the reference
// application and the controller's peer around it (World, on package
// peertest), the host serving in process (World.Serve) or as a child
// process (StartChild, Main), the steward-operator command in process
// (RunCLI), and the host journal as a test reads or forges it (Kinds,
// Append, NextLedger). Every part is real: real sockets, SO_PEERCRED,
// fsync and signatures; only the controller is played by the test.
//
// It is test support: no package of steward imports it outside its tests
// (internal/deps).
package hosttest
