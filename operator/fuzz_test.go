package operator

import (
	"encoding/json"
	"testing"

	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator/hostapi"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// FuzzControllerKeys: the keys file comes from the controller's account.
func FuzzControllerKeys(f *testing.F) {
	f.Add(peertest.NewPeer(f, "c").KeysFile())
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, b []byte) {
		st := newState()
		c, err := st.checkControllerAdd(hostlog.ControllerAddV2{Name: "c", UID: 1, Keys: b, Control: "/run/c.sock"})
		if err == nil && (c.tool == nil || c.dispatch == nil) {
			t.Fatal("accepted keys without a tool or dispatch key")
		}
	})
}

// FuzzFilterList: a listing comes from the application's account; a page
// filtered by a grant must keep only covered operations, or be refused.
func FuzzFilterList(f *testing.F) {
	f.Add([]byte(`{"operations":[{"id":"calc.evaluate"},{"id":"text.sha256"}],"next_offset":null,"limits":{"request_bytes":65536}}`))
	f.Add([]byte(`{"operations":[{"id":1}]}`))
	f.Add([]byte(`[]`))
	g := &msg.Grant{Application: "app", Operations: []string{"calc.*"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		kept, err := hostapi.FilterPage(b, listFilter{g: g}.keeps)
		if err != nil {
			return
		}
		for _, op := range kept {
			var id struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(op, &id); err != nil {
				t.Fatalf("kept operation does not parse: %v", err)
			}
			if !g.Covers("app", id.ID) {
				t.Fatalf("uncovered operation %q kept", id.ID)
			}
		}
	})
}

// FuzzRouteRequest: REQUEST.json.
func FuzzRouteRequest(f *testing.F) {
	f.Add([]byte(`{"controller":"c","upstream":"/a","forward":"/b","reverse":"/c","prefix":"/v1","timeouts":{"connectMs":1,"responseMs":2}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		views.ParseRouteRequest(b)
	})
}
