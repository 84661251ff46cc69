package host_test

import (
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
)

// TestMain re-executes this test binary as steward-operator when a test
// runs the host as a child process (hosttest.StartChild).
func TestMain(m *testing.M) { hosttest.Main(m) }
