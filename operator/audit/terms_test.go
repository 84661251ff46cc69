package audit_test

import (
	"testing"

	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/wire/msg"
)

// TestReceiptTermsFaults: a receipt whose own fields disagree (a charge at
// a price its status does not apply, a refusal that charges) is a fault
// of the file, whatever consent it carries.
func TestReceiptTermsFaults(t *testing.T) {
	fx := newReceiptsFixture(t)
	for _, tc := range []struct {
		name string
		edit func(r *msg.Receipt)
		want string
	}{
		{"a 4xx at the answer price", func(r *msg.Receipt) { r.Status = 422 },
			`receipt 4 (file entry 4): a 422 answer charging 10 applies the "answer" price, not "refusal"`},
		{"a refusal that charges", func(r *msg.Receipt) {
			r.Outcome, r.Reason, r.ResponseSHA256 = msg.StateRefused, "refused before consent: x", nil
		},
			`receipt 4 (file entry 4): a receipt of refused charges 10 at the "answer" price: it charges nothing`},
		{"a not-sent with no reason", func(r *msg.Receipt) { r.Outcome, r.Charge, r.PriceApplied = msg.StateNotSent, 0, msg.PriceNone },
			`receipt 4 (file entry 4): a receipt of not-sent names no reason`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fx.file(t)
			r := fx.a4(t)
			tc.edit(&r)
			fx.appendSigned(t, &f, r, fx.host.Ed25519())
			code, _, errs := fx.verifyFile(t, f, "--host-key", fx.hostPub)
			if code != cli.ExitFailure || errs != "steward-operator receipts verify: receipt fault: "+tc.want+"\n" {
				t.Fatalf("exit %d %q", code, errs)
			}
		})
	}
}
