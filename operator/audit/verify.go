package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// faultf is a receipt fault (hostlog.ErrReceiptFault): the chain, a
// receipt or a balance does not verify. The error names the first fault
// found.
func faultf(format string, args ...any) error { return hostlog.Faultf(format, args...) }

// ReceiptReport summarizes a verified receipt chain. A chain that does not
// verify is a fault (an error, the first found); what verifies but is not
// backed by the payer's word is a finding, and every finding is listed.
type ReceiptReport struct {
	Receipts       int    `json:"receipts"`
	Checkpoints    int    `json:"checkpoints"`
	CoveredThrough uint64 `json:"coveredThrough"` // receipts 1..N are under a hybrid checkpoint
	Uncovered      int    `json:"uncovered"`      // receipts after the last checkpoint: not a fault
	// LastSeq and Head name the last receipt, and Covering the checkpoint
	// over receipt CoveredThrough (nil: none), so that whoever recorded
	// receipts can see whether the chain shown them stops short.
	LastSeq  uint64          `json:"lastSeq"`
	Head     string          `json:"head"` // hex ReceiptHash of the last receipt
	Covering *CheckpointView `json:"covering,omitempty"`
	Purses   []PurseReport   `json:"purses,omitempty"`
	Consents []ConsentReport `json:"consents,omitempty"`
	// Agents groups the receipts by the agent they name (agents.go).
	Agents   []AgentReport `json:"agents,omitempty"`
	Findings []string      `json:"findings,omitempty"`
	// Records is the last journal record read, Point the verified point
	// the verify went on from (nil: from record 1), and Archives the
	// archives records up to the journal's base were read from (none: the
	// whole journal was live, or before the point); Checked says it in a
	// line. A file's report has none of them.
	Records  uint64        `json:"records,omitempty"`
	Point    *PointRead    `json:"point,omitempty"`
	Archives []ArchiveRead `json:"archives,omitempty"`
	// Open lists, for a journal read while its host served
	// (VerifyServing), the reservations with no outcome in what was read
	// that the host then said were still being delivered, or had ended
	// since: not findings. One it said was uncertain is a finding.
	Open []string `json:"open,omitempty"`
}

// CheckpointView is one verified checkpoint: the receipt it covers, that
// receipt's hash and when the host signed it (Unix ms).
type CheckpointView struct {
	Seq  uint64 `json:"seq"`
	Head string `json:"head"`
	At   int64  `json:"at"`
}

// ConsentReport says, per controller, how many of its receipts were
// checked against its payer consents and how many were not.
type ConsentReport struct {
	Controller string `json:"controller"`
	Receipts   int    `json:"receipts"`
	Checked    bool   `json:"checked"` // false: no dispatch key was given for it
	DispatchID string `json:"dispatchKid,omitempty"`
}

// PurseReport is one controller's purse as the verifier recomputed it.
type PurseReport struct {
	Controller string `json:"controller"`
	Funded     uint64 `json:"funded"`
	Charged    uint64 `json:"charged"`
	Balance    int64  `json:"balance"`
	Receipts   int    `json:"receipts"`
}

type chainReceipt struct {
	signed []byte
	r      msg.Receipt
	where  string // "journal record N" or "file entry N"
	order  int    // position of its record (journal seq or file index)
}

type chainCheckpoint struct {
	signed []byte
	c      msg.Checkpoint
	where  string
	order  int
}

// verifyChain checks receipt signatures and links (in Seq order, from 1 with
// no gap) and every checkpoint (hybrid signature, the head it names, and
// that every receipt it covers came before it). Receipts with Seq < from
// are linked but not signature-checked.
func verifyChain(rs []chainReceipt, cps []chainCheckpoint, host *wire.HybridPublicKey, from uint64) (ReceiptReport, error) {
	ring := wire.NewKeyring(host.Ed25519())
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].r.Seq < rs[j].r.Seq })
	prev := make([]byte, 32)
	maxOrder := make([]int, len(rs)) // running max of record position by seq
	for i := range rs {
		c := &rs[i]
		if c.r.Seq != uint64(i)+1 {
			if i > 0 && c.r.Seq == rs[i-1].r.Seq {
				return ReceiptReport{}, faultf("receipt %d (%s) appears twice", c.r.Seq, c.where)
			}
			return ReceiptReport{}, faultf("receipt %d is missing (the next is receipt %d, %s)", i+1, c.r.Seq, c.where)
		}
		if c.r.Seq >= from {
			if _, err := msg.VerifyReceipt(c.signed, ring); err != nil {
				return ReceiptReport{}, faultf("receipt %d (%s): %v", c.r.Seq, c.where, err)
			}
		}
		if !bytes.Equal(c.r.Prev, prev) {
			return ReceiptReport{}, faultf("receipt %d (%s): its link does not name receipt %d: the chain is broken", c.r.Seq, c.where, c.r.Seq-1)
		}
		prev = msg.ReceiptHash(c.signed)
		maxOrder[i] = c.order
		if i > 0 && maxOrder[i-1] > maxOrder[i] {
			maxOrder[i] = maxOrder[i-1]
		}
	}
	rep := ReceiptReport{Receipts: len(rs), Checkpoints: len(cps), Head: hex.EncodeToString(prev)}
	for _, cp := range cps {
		c, err := msg.VerifyCheckpoint(cp.signed, host)
		if err != nil {
			return rep, faultf("checkpoint (%s): %v", cp.where, err)
		}
		if c.Seq == 0 || c.Seq > uint64(len(rs)) {
			return rep, faultf("checkpoint (%s) covers receipt %d, but there are %d receipts", cp.where, c.Seq, len(rs))
		}
		if !bytes.Equal(c.Head, msg.ReceiptHash(rs[c.Seq-1].signed)) {
			return rep, faultf("checkpoint (%s): its head is not receipt %d", cp.where, c.Seq)
		}
		if maxOrder[c.Seq-1] > cp.order {
			return rep, faultf("checkpoint (%s) covers receipt %d, which was recorded after it", cp.where, c.Seq)
		}
		if c.Seq > rep.CoveredThrough {
			rep.CoveredThrough = c.Seq
			rep.Covering = &CheckpointView{Seq: c.Seq, Head: hex.EncodeToString(c.Head), At: c.At}
		}
	}
	rep.LastSeq = uint64(len(rs))
	rep.Uncovered = len(rs) - int(rep.CoveredThrough)
	return rep, nil
}

// FileKeys are what an exported receipts file is checked against. None
// comes from the file: a key the file carries proves only that whoever
// wrote the file held it.
type FileKeys struct {
	// Host is the operator's public key (operator.pub); required.
	Host *wire.HybridPublicKey
	// Dispatch is the dispatch key of the controller named Controller (the
	// Dispatch of its msg.ControllerKeys), which signs its consents. With
	// Dispatch nil no consent is checked, and the report says so. With
	// Controller empty the file's receipts must all name one controller.
	Dispatch   *wire.PublicKey
	Controller string
}

// ErrRefused marks what the audit refuses to check as given: a receipts
// file without the host's key, or one of several controllers with none
// named. It is the audit's own, as views.ErrRefused is the host's;
// both are refused input, which a command answers with exit code 2.
var ErrRefused = errors.New("refused")

// refusedf is a refusal of the audit's input, described.
func refusedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// errNoHostKey refuses a file verify without the host's key.
var errNoHostKey = refusedf("no host key given: the file's own key proves nothing about who made it; pass the operator's public key (operator.pub)")

// VerifyFile checks an exported receipts file against the host's
// pinned public key, required (nil is refused): every receipt's signature
// and chain link and every checkpoint. It checks no consent (see
// VerifyFileKeys).
func VerifyFile(b []byte, pinned *wire.HybridPublicKey) (ReceiptReport, error) {
	return VerifyFileKeys(b, FileKeys{Host: pinned})
}

// VerifyFileKeys checks an exported receipts file: every receipt's
// signature under k.Host and chain link, every checkpoint, and, given a
// controller's dispatch key, every one of that controller's receipts
// against its payer consent (checkReceiptConsent). Checkpoints come after
// the receipts in a file, so coverage means only that each names a
// receipt of the chain. A fault returns at once; findings are all listed
// in the report, and the error names the first.
func VerifyFileKeys(b []byte, k FileKeys) (ReceiptReport, error) {
	if k.Host == nil {
		return ReceiptReport{}, errNoHostKey
	}
	f, err := msg.UnmarshalReceiptsFile(b)
	if err != nil {
		return ReceiptReport{}, faultf("receipts file: %v", err)
	}
	pub, err := wire.ParseHybridPublicKey(f.HostKey)
	if err != nil {
		return ReceiptReport{}, faultf("receipts file: host key: %v", err)
	}
	if !k.Host.Equal(pub) {
		return ReceiptReport{}, faultf("receipts file: the host key %s is not the pinned key %s", pub.KID(), k.Host.KID())
	}
	ring := wire.NewKeyring(k.Host.Ed25519())
	rs := make([]chainReceipt, 0, len(f.Receipts))
	for i, signed := range f.Receipts {
		where := fmt.Sprintf("file entry %d", i+1)
		r, err := msg.VerifyReceipt(signed, ring)
		if err != nil {
			return ReceiptReport{}, faultf("receipt (%s): %v", where, err)
		}
		if err := checkReceiptTerms(r); err != nil {
			return ReceiptReport{}, faultf("receipt %d (%s): %v", r.Seq, where, err)
		}
		rs = append(rs, chainReceipt{signed: signed, r: r, where: where, order: i})
	}
	if k.Dispatch != nil && k.Controller == "" {
		if k.Controller, err = fileController(rs); err != nil {
			return ReceiptReport{}, err
		}
	}
	cps := make([]chainCheckpoint, 0, len(f.Checkpoints))
	for i, signed := range f.Checkpoints {
		cps = append(cps, chainCheckpoint{signed: signed, where: fmt.Sprintf("file checkpoint %d", i+1), order: len(rs)})
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].r.Seq < rs[j].r.Seq })
	rep, err := verifyChain(rs, cps, k.Host, 1)
	if err != nil {
		return rep, err
	}
	rep.Consents, rep.Findings = fileConsents(rs, k)
	var agentFindings []string
	rep.Agents, agentFindings = agentReports(rs, func(c string) *wire.Keyring {
		if k.Dispatch == nil || c != k.Controller {
			return nil
		}
		return wire.NewKeyring(k.Dispatch)
	})
	rep.Findings = append(rep.Findings, agentFindings...)
	return rep, findingsError(rep.Findings)
}

// fileController is the one controller a file's receipts name, refusing
// a file of several (which dispatch key is whose cannot be guessed).
func fileController(rs []chainReceipt) (string, error) {
	names := map[string]bool{}
	var list []string
	for _, c := range rs {
		if !names[c.r.Controller] {
			names[c.r.Controller] = true
			list = append(list, c.r.Controller)
		}
	}
	if len(list) != 1 {
		return "", refusedf("the file holds receipts of %d controllers (%v): name the one whose keys were given", len(list), list)
	}
	return list[0], nil
}

// fileConsents checks the consent of every receipt of k.Controller under
// k.Dispatch, each consent used by one receipt only, and reports per
// controller whether its consents were checked. rs is in chain order.
func fileConsents(rs []chainReceipt, k FileKeys) ([]ConsentReport, []string) {
	var reps []ConsentReport
	at := map[string]int{}
	var findings []string
	usedBy := map[string]uint64{} // consent's attempt -> the receipt that used it
	var ring *wire.Keyring
	if k.Dispatch != nil {
		ring = wire.NewKeyring(k.Dispatch)
	}
	for _, c := range rs {
		i, ok := at[c.r.Controller]
		if !ok {
			i = len(reps)
			at[c.r.Controller] = i
			reps = append(reps, ConsentReport{Controller: c.r.Controller})
			if ring != nil && c.r.Controller == k.Controller {
				reps[i].Checked, reps[i].DispatchID = true, k.Dispatch.KID().String()
			}
		}
		reps[i].Receipts++
		if !reps[i].Checked {
			continue
		}
		if err := checkReceiptConsent(c.r, ring, usedBy); err != nil {
			findings = append(findings, fmt.Sprintf("receipt %d (%s): %v", c.r.Seq, c.where, err))
		}
	}
	return reps, findings
}

// checkReceiptConsent checks a receipt against its payer consent: a charge
// above 0 needs one; one given must not have paid for another receipt
// already, must be signed by the controller's dispatch key, name this
// receipt's attempt, controller, application, operation and request hash,
// and allow at least its charge. usedBy maps each consent seen (its bytes)
// and each attempt paid for to the receipt that used it.
func checkReceiptConsent(r msg.Receipt, dispatch *wire.Keyring, usedBy map[string]uint64) error {
	if r.Consent == nil {
		if r.Charge > 0 {
			return fmt.Errorf("charges %d with no payer consent", r.Charge)
		}
		return nil
	}
	sum := sha256.Sum256(r.Consent)
	byBytes := "consent " + hex.EncodeToString(sum[:])
	if prev, dup := usedBy[byBytes]; dup {
		return fmt.Errorf("its payer consent already paid for receipt %d", prev)
	}
	usedBy[byBytes] = r.Seq
	c, err := checkConsent(r.Consent, dispatch, consentClaim{Attempt: r.Attempt, Controller: r.Controller,
		Application: r.Application, Operation: r.Operation, RequestSHA256: r.RequestSHA256, Charge: r.Charge})
	if err == nil {
		err = checkConsentTerms(r, c)
	}
	if err != nil {
		return err
	}
	byAttempt := "attempt " + c.Attempt
	if prev, dup := usedBy[byAttempt]; dup {
		return fmt.Errorf("attempt %s was already paid for by receipt %d", c.Attempt, prev)
	}
	usedBy[byAttempt] = r.Seq
	return nil
}

// checkReceiptTerms checks that a receipt's own fields agree
// (msg.Receipt.CheckTerms).
func checkReceiptTerms(r msg.Receipt) error { return r.CheckTerms() }

// checkConsentTerms checks a receipt's charge against its payer consent
// (msg.Receipt.CheckCharge).
func checkConsentTerms(r msg.Receipt, c msg.Consent) error { return r.CheckCharge(c) }

// consentClaim is what a receipt or a reservation says its consent agreed to.
type consentClaim struct {
	Attempt, Controller, Application, Operation string
	RequestSHA256                               []byte
	Charge                                      uint64
}

// checkConsent checks a signed consent under a dispatch key against a
// claim. It checks the fields msg.Consent has today; the charge may be
// below the consent's (a consent is a ceiling, not a price), never above.
func checkConsent(signed []byte, dispatch *wire.Keyring, want consentClaim) (msg.Consent, error) {
	payload, _, err := wire.Verify1(signed, dispatch)
	if err != nil {
		return msg.Consent{}, fmt.Errorf("payer consent: %w", err)
	}
	var c msg.Consent
	if err := wire.Unmarshal(payload, &c); err != nil {
		return msg.Consent{}, fmt.Errorf("payer consent: %w", err)
	}
	for _, f := range []struct{ what, got, want string }{
		{"attempt", c.Attempt, want.Attempt},
		{"controller", c.Controller, want.Controller},
		{"application", c.Application, want.Application},
		{"operation", c.Operation, want.Operation},
		{"request hash", hex.EncodeToString(c.RequestSHA256), hex.EncodeToString(want.RequestSHA256)},
	} {
		if f.got != f.want {
			return c, fmt.Errorf("its payer consent is for %s %s, not %s", f.what, shortField(f.got), shortField(f.want))
		}
	}
	if want.Charge > c.Charge {
		return c, fmt.Errorf("charges %d, more than the %d its payer consent allows", want.Charge, c.Charge)
	}
	return c, nil
}

// shortField quotes a field for a one-line finding, cut at 80 bytes.
func shortField(s string) string {
	if s == "" {
		return `""`
	}
	return strconv.Quote(trunc(s, 80))
}

// trunc cuts s to at most n bytes, "..." marking a cut: a finding quotes
// what the journal holds, and a line of it stays a line.
func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
