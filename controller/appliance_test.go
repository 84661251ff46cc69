package controller

import (
	"testing"

	"github.com/stewardrt/steward/appliance"
)

// startAppliance runs the reference application (package appliance) on
// sock with its journal in state, until the test ends.
func startAppliance(t testing.TB, sock, state string) {
	t.Helper()
	srv, err := appliance.Start(appliance.Config{Socket: sock, State: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
}
