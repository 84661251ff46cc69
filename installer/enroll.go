package installer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal"
)

// EnrollProtocol names the enrollment request format.
const EnrollProtocol = "steward-controller-enrollment-v1"

// EnrollModeApplication is the one enrollment mode: a new controller config
// for the same controller, with its application services.
const EnrollModeApplication = "application"

// enrollRequest is the file controller-enroll reads.
type enrollRequest struct {
	Protocol              string `json:"protocol"`
	Mode                  string `json:"mode"`
	ExpectedBindingSha256 string `json:"expectedBindingSha256"`
	TargetConfigSha256    string `json:"targetConfigSha256"`
}

// EnrollResult is what controller-enroll prints. A repeated request prints
// the same result with Changed false.
type EnrollResult struct {
	Protocol      string `json:"protocol"`
	BindingBefore string `json:"bindingBefore"` // hex SHA-256: the binding the rebind replaced
	BindingAfter  string `json:"bindingAfter"`  // hex SHA-256: the binding from the rebind on
	Seq           uint64 `json:"seq"`           // the rebind record's sequence number
	Changed       bool   `json:"changed"`       // false when the rebind was already there
}

// errEnrollRequest is wrapped by every refusal of the request's shape.
var errEnrollRequest = errors.New("enrollment request refused")

// parseEnrollRequest decodes a request strictly: valid JSON without
// duplicate keys, exactly the four fields, each present and well-formed.
// Hashes are 64 lowercase hex digits.
func parseEnrollRequest(raw []byte) (enrollRequest, error) {
	if _, err := canonjson.CanonicalJSON(raw); err != nil {
		return enrollRequest{}, fmt.Errorf("%w: %w", errEnrollRequest, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var r enrollRequest
	if err := dec.Decode(&r); err != nil {
		return enrollRequest{}, fmt.Errorf("%w: %w", errEnrollRequest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return enrollRequest{}, fmt.Errorf("%w: data after the request object", errEnrollRequest)
	}
	if r.Protocol != EnrollProtocol {
		return enrollRequest{}, fmt.Errorf("%w: protocol %q, want %q", errEnrollRequest, r.Protocol, EnrollProtocol)
	}
	if r.Mode != EnrollModeApplication {
		return enrollRequest{}, fmt.Errorf("%w: mode %q, want %q", errEnrollRequest, r.Mode, EnrollModeApplication)
	}
	for _, f := range []struct{ name, v string }{
		{"expectedBindingSha256", r.ExpectedBindingSha256}, {"targetConfigSha256", r.TargetConfigSha256},
	} {
		if !isHash(f.v) {
			return enrollRequest{}, fmt.Errorf("%w: %s %q is not 64 lowercase hex digits", errEnrollRequest, f.name, f.v)
		}
	}
	if r.ExpectedBindingSha256 == r.TargetConfigSha256 {
		return enrollRequest{}, fmt.Errorf("%w: expectedBindingSha256 equals targetConfigSha256: nothing to enroll", errEnrollRequest)
	}
	return r, nil
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// runControllerEnroll rebinds the stopped controller's journal to its
// installed config (DESIGN.md section 9). It is root's alone (no sudo
// column), like controller-config: the rebind is what makes the
// controller run with a new config, the payer's policy included. See
// doc.go for the rules.
func runControllerEnroll(ctx context.Context, c *call, o options) int {
	owner, exit, ok := c.rootInput()
	if !ok {
		return exit
	}
	raw, err := ReadPrivateFile(o.operand, owner, EnrollRequestLimit)
	if err != nil {
		return c.refusef("%v", err)
	}
	req, err := parseEnrollRequest(raw)
	if err != nil {
		return c.refusef("%s: %v", o.operand, err)
	}
	if err := c.env.Controller.becomeController(); err != nil {
		return c.failf("%v", err)
	}
	files, err := c.env.Controller.locateController(true)
	if err != nil {
		return c.failf("%v", err)
	}
	ic := files.config
	// The journal binds the bytes it is given: the canonical form, as the
	// controller binds at its start, so that the rebind's binding is the
	// one the controller computes from the same file.
	canon, err := canonjson.CanonicalJSON(ic.raw)
	if err != nil {
		return c.failf("%s: %v", ic.path, err)
	}
	target := sha256.Sum256(canon)
	if hex.EncodeToString(target[:]) != req.TargetConfigSha256 {
		return c.refusef("%s: targetConfigSha256 %s is not the installed config %s, whose canonical SHA-256 is %x",
			o.operand, req.TargetConfigSha256, ic.path, target)
	}
	dir := files.journalDir
	// A journal is created by the controller's first start, bound to the
	// config it started with; there is nothing to rebind before that, and
	// opening read-write here would create one. Read-only, from the
	// controller's newest snapshot: its ledger says which attempts are
	// unresolved without replaying the whole journal.
	ro, err := ledger.OpenReadOnly(dir)
	if err != nil {
		return c.failf("the controller's journal: %v (the controller creates it at its first start)", err)
	}
	for _, r := range ro.Rejected {
		fmt.Fprintf(c.stderr, "steward-installer %s: the controller's snapshot %s was not used: %s\n", c.verb, r.Name, r.Reason)
	}
	seen, head, bound := ro.Journal.LastSeq(), ro.Journal.Head(), ro.Journal.Binding()
	open := ro.Ledger.UncertainAttempts()
	ro.Journal.Close()
	if seen == 0 {
		return c.failf("the controller's journal %s is empty: the controller binds its config at its first start; there is nothing to enroll", dir)
	}
	if bound == target {
		return c.enrolledAlready(o, req, dir, target)
	}
	var from *journal.Mark
	if ro.Snapshot != "" {
		from = &ro.From
	}
	j, err := journal.Open(dir, journal.Options{Owner: ledger.JournalOwner, Format: ledger.JournalFormat, From: from})
	if errors.Is(err, journal.ErrLocked) {
		return c.failf("the controller is running (its journal %s is locked): stop it first (systemctl stop %s)", dir, "steward-controller.service")
	}
	if err != nil {
		return c.failf("the controller's journal: %v", err)
	}
	defer j.Close()
	// Checked again under the lock: nothing can append from here on, and
	// the ledger read above is of this very journal only if nothing was
	// appended since.
	cur := j.Binding()
	if hex.EncodeToString(cur[:]) != req.ExpectedBindingSha256 {
		return c.refusef("%s: expectedBindingSha256 %s is not the journal's binding %x", o.operand, req.ExpectedBindingSha256, cur)
	}
	if j.LastSeq() != seen || j.Head() != head {
		return c.failf("the controller's journal %s changed while it was read (last record %d, now %d): the controller ran meanwhile; stop it and enroll again", dir, seen, j.LastSeq())
	}
	if len(open) > 0 {
		return c.failf("%d unresolved attempt(s) block enrollment (%s): %s", len(open), attemptIDs(open), resolveHint(open))
	}
	failpoint.Hit("installer-enroll-before-rebind")
	seq, err := j.Rebind(canon)
	if err != nil {
		return c.failf("the controller's journal %s: rebind: %v", dir, err)
	}
	failpoint.Hit("installer-enroll-after-rebind")
	if j.Binding() != target {
		return c.failf("the controller's journal %s: after the rebind (seq %d) the binding is %x, not %x", dir, seq, j.Binding(), target)
	}
	return c.enrolled(EnrollResult{Protocol: EnrollProtocol, BindingBefore: req.ExpectedBindingSha256,
		BindingAfter: req.TargetConfigSha256, Seq: seq, Changed: true})
}

// enrolledAlready answers a repeat: the journal in dir is already bound to
// the target config, and the last rebind must be the one req asks for.
// Nothing is written, so the controller may be running.
func (c *call) enrolledAlready(o options, req enrollRequest, dir string, target [32]byte) int {
	ro, err := journal.Open(dir, journal.Options{ReadOnly: true})
	if err != nil {
		return c.failf("the controller's journal: %v", err)
	}
	defer ro.Close()
	seq, before, after, found, err := lastRebind(ro)
	if err != nil {
		return c.failf("the controller's journal %s: %v", dir, err)
	}
	if !found || hex.EncodeToString(before[:]) != req.ExpectedBindingSha256 || after != target {
		from := "no rebind record made it so"
		if found {
			from = fmt.Sprintf("the last rebind (seq %d) was from %x", seq, before)
		}
		return c.refusef("%s: expectedBindingSha256 %s: the journal is already bound to the target config, but %s",
			o.operand, req.ExpectedBindingSha256, from)
	}
	return c.enrolled(EnrollResult{Protocol: EnrollProtocol, BindingBefore: req.ExpectedBindingSha256,
		BindingAfter: req.TargetConfigSha256, Seq: seq, Changed: false})
}

func (c *call) enrolled(r EnrollResult) int {
	if err := c.printJSON(r); err != nil {
		return c.failf("%v", err)
	}
	return ExitOK
}

// rebindBody is the journal's rebind record body (see package journal).
type rebindBody struct {
	Before  []byte `cbor:"before"`
	After   []byte `cbor:"after"`
	Binding []byte `cbor:"binding"`
}

// lastRebind finds the journal's last rebind record and the bindings it
// went from and to.
func lastRebind(j *journal.Journal) (seq uint64, before, after [32]byte, found bool, err error) {
	err = j.Iterate(1, func(r journal.Record) error {
		if r.Kind != "rebind" {
			return nil
		}
		var b rebindBody
		if err := cbor.Unmarshal(r.Body, &b); err != nil {
			return fmt.Errorf("rebind record %d: %v", r.Seq, err)
		}
		seq, found = r.Seq, true
		before = sha256.Sum256(b.Before)
		after = sha256.Sum256(b.After)
		return nil
	})
	return seq, before, after, found, err
}
