// Package peertest is what surrounds a host in a test, played by the test
// with real parts: the controller's side of the custody sockets (Peer: its
// keys, a reverse socket that consents, a forward client), the reference
// application behind a counting front (App), the dispatches a controller
// sends and the checks of what the host answers, and a clock a test sets.
// It knows nothing of the operator's store, so the custody core's own
// tests use it too; package hosttest builds a whole store and a serving
// host on it.
//
// It is test support: no package of steward imports it outside its tests
// (internal/deps).
package peertest
