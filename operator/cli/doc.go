// Package cli is the steward-operator command line: it parses each
// command's flags and arguments and runs it through the admin language
// (package operator/admin), the audit (package operator/audit) or the host
// daemon (package operator/host), printing what it got as text or JSON.
//
//	os.Exit((&cli.CLI{Stdout: os.Stdout, Stderr: os.Stderr}).Main(os.Args[1:]))
//
// # What it owns and what it may touch
//
// The commands, their flags, their output and their exit codes (0 ok, 1
// failure, 2 refused input: a usage error or a refusal of the store, the
// admin language or the audit). It decides nothing: every change is a
// request of the admin language, every check the store's. It reads the
// files a command names (a route request, keys, a receipts file), each
// within its bound, and opens a store read-only for the commands that only
// show.
package cli
