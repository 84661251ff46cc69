package installer

import (
	"encoding/json"
	"testing"
)

// The operator's request files and the controller's journal bodies are
// bytes from another account: their decoders must refuse, never panic, and
// what they accept must be what they claim.

func FuzzParseEnrollRequest(f *testing.F) {
	f.Add([]byte(`{"protocol":"steward-controller-enrollment-v1","mode":"application","expectedBindingSha256":"` +
		"00000000000000000000000000000000000000000000000000000000000000aa" + `","targetConfigSha256":"` +
		"00000000000000000000000000000000000000000000000000000000000000bb" + `"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseEnrollRequest(b)
		if err != nil {
			return
		}
		if r.Protocol != EnrollProtocol || r.Mode != EnrollModeApplication || !isHash(r.ExpectedBindingSha256) ||
			!isHash(r.TargetConfigSha256) || r.ExpectedBindingSha256 == r.TargetConfigSha256 {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func FuzzParseToolRequest(f *testing.F) {
	f.Add([]byte(`{"tool":"oracle_discover","arguments":{"application":"appliance"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseToolRequest(b)
		if err != nil {
			return
		}
		var obj map[string]any
		if r.Tool == "" || json.Unmarshal(r.Arguments, &obj) != nil || obj == nil {
			t.Fatalf("accepted %q with arguments %q", r.Tool, r.Arguments)
		}
	})
}

func FuzzCBORToJSON(f *testing.F) {
	f.Add([]byte{0xa2, 0x61, 0x61, 0x01, 0x61, 0x62, 0x42, 0xff, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := cborToJSON(b)
		if err != nil {
			return
		}
		if !json.Valid(j) {
			t.Fatalf("%x rendered as invalid JSON %q", b, j)
		}
	})
}
