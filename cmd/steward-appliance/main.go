// Command steward-appliance is the reference oracle-operations-v1
// application: exact arithmetic, unit conversion, durations and hashes
// served over HTTP/1.1 on a Unix socket, with a journal of request ids.
//
//	steward-appliance serve --socket PATH --state DIR [--prefix /v1] [--peer-uid N]... [--log-level info]
//
// It only hands its arguments to package appliance, which does the work.
package main

import (
	"os"

	"github.com/stewardrt/steward/appliance"
)

func main() {
	os.Exit(appliance.Main(os.Args[1:], os.Stdout, os.Stderr))
}
