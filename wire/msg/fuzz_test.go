package msg

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/stewardrt/steward/wire"
)

// bodies returns a fresh value of every message a peer account can send.
func bodies() []any {
	return []any{
		&Dispatch{}, &DispatchResult{}, &Inspect{}, &InspectResult{},
		&Reserve{}, &Consent{}, &ConsentReply{},
		&Refusal{}, &Receipt{}, &Checkpoint{}, &Grant{}, &RouteRecord{},
		&Bundle{}, &ControllerKeys{},
		&Collect{}, &VerdictPush{}, &Asks{}, &AsksResult{}, &Advise{}, &AdviseResult{}, &AgentLimits{},
	}
}

// FuzzDecodeBodies feeds arbitrary bytes to the strict decoder of every
// message body. Whatever decodes must re-encode to bytes that decode to the
// same value: deterministic encoding means one value has one form.
func FuzzDecodeBodies(f *testing.F) {
	seeds := []any{
		Dispatch{Attempt: "a1", Method: "POST", Path: "/v1/invoke", Body: []byte(`{"arguments":{}}`)},
		Dispatch{Attempt: "a1", Method: "POST", Path: "/v1/invoke", Body: []byte(`{"arguments":{}}`),
			DispatchV1: DispatchV1{Application: "appliance", Kind: KindInvoke, Operation: "calc.evaluate", RequestSHA256: make([]byte, 32)}},
		DispatchResult{Attempt: "a1", Outcome: StateDefinite, Status: 200, Body: []byte("{}")},
		Reserve{Attempt: "a1", Controller: "c", Charge: 1},
		Refusal{Code: CodeNoGrant, Reason: "no grant"},
		Receipt{Seq: 1, Prev: make([]byte, 32)},
		Grant{ID: "g1", Operations: []string{"calc.*"}},
		DispatchResult{Attempt: "a1", Outcome: StateAwaitingApproval, Ask: &AskTicket{ID: "ask-0123456789ab", ParkUntil: 1, ExpiresAt: 2, OnTimeout: VerdictDeny}},
		Collect{Attempt: "a1", Deadline: 1},
		VerdictPush{Attempt: "a1", Ask: "ask-0123456789ab", State: AskApproved},
		Advise{Advisor: "rev", Ask: "ask-0123456789ab", Verdict: VerdictWait, Sentence: "wait"},
		AdviseResult{Ask: AskView{ID: "ask-0123456789ab", Arguments: []byte(`{}`)}, Refused: &Refusal{Code: CodeApprovals, Reason: "spent"}},
		AgentLimits{Controller: "c", Agent: "alice", Revision: 1, Approval: &ApprovalPolicy{Operations: []string{"app/*"}, Advisors: []string{"rev"}}},
	}
	for _, s := range seeds {
		b, err := wire.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range bodies() {
			if wire.Unmarshal(data, v) != nil {
				continue
			}
			again, err := wire.Marshal(v)
			if err != nil {
				t.Fatalf("%T decoded but does not encode: %v", v, err)
			}
			w := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := wire.Unmarshal(again, w); err != nil {
				t.Fatalf("%T re-encoded to bytes its decoder refuses: %v", v, err)
			}
			if !reflect.DeepEqual(v, w) {
				t.Fatalf("%T changed across a re-encoding: %+v != %+v", v, v, w)
			}
			if b2, _ := wire.Marshal(w); !bytes.Equal(again, b2) {
				t.Fatalf("%T has two encodings", v)
			}
		}
	})
}
