package cli_test

import (
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
)

// TestMain makes the test binary, re-executed with hosttest.MainEnv=1,
// the steward-operator command (TestInitAfterKilledInit runs it so).
func TestMain(m *testing.M) { hosttest.Main(m) }
