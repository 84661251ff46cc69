package nspawn

import (
	"strings"
	"testing"
)

// TestParseNotify reads nspawn's two notifications and refuses a leader
// pid that is not one.
func TestParseNotify(t *testing.T) {
	leader, ready, err := parseNotify("STATUS=Container running.\nX_NSPAWN_LEADER_PID=21469")
	if err != nil || leader != 21469 || ready {
		t.Fatalf("the status message: %d %v %v", leader, ready, err)
	}
	leader, ready, err = parseNotify("READY=1\n")
	if err != nil || leader != 0 || !ready {
		t.Fatalf("the ready message: %d %v %v", leader, ready, err)
	}
	for _, bad := range []string{"X_NSPAWN_LEADER_PID=1", "X_NSPAWN_LEADER_PID=x", "X_NSPAWN_LEADER_PID="} {
		if _, _, err := parseNotify(bad); err == nil || !strings.Contains(err.Error(), "nspawn sent") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
