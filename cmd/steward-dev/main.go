// Command steward-dev runs the whole of steward in one process under the
// current user, for trying it and for tests: the host, the controller and
// the reference appliance, each with its own state, keys, journal and
// sockets, over the same Unix sockets and signed frames as in production.
//
//	steward-dev [--state DIR] [--once [--keep]] [--log-level LEVEL]
//
// See package dev.
package main

import (
	"os"

	"github.com/stewardrt/steward/dev"
)

func main() {
	os.Exit(dev.Main(os.Args[1:], os.Stdout, os.Stderr))
}
