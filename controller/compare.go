package controller

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Comparison is what `steward-controller receipts compare` found: the
// host's exported receipts against the ones this controller recorded in its
// own journal, each side checked with keys the controller pinned itself
// (the host's from its bundle, its own dispatch key for the consents).
type Comparison struct {
	Recorded     int      `json:"recorded"`     // receipts in this controller's journal
	Exported     int      `json:"exported"`     // receipts of this controller in the file
	Matched      int      `json:"matched"`      // recorded and exported, byte for byte
	LastExported uint64   `json:"lastExported"` // the file's last receipt sequence (all controllers)
	LastRecorded uint64   `json:"lastRecorded"` // the highest receipt sequence recorded here
	Findings     []string `json:"findings"`     // one line each; empty when the two agree
}

// CompareReceipts compares an exported receipts file with the receipts the
// controller of the config at cfgPath recorded (its journal is opened
// read-only: the daemon may be running). Findings:
//   - a receipt the controller recorded that the file lacks (omitted, or
//     the file is truncated before it) or holds with other bytes;
//   - a receipt in the file for this controller that does not verify
//     under the pinned host key, names an attempt this controller never
//     began, whose own terms do not hold (msg.Receipt.CheckTerms: an
//     answer's price for its status, a refusal or not-sent charging
//     nothing), or carries a consent this controller did not sign for that
//     attempt, request and charge;
//   - two receipts carrying consents for one requestId of this controller
//     (consentsByRequest), unless every one but the latest ended charging
//     nothing for it;
//   - a file that ends before the last receipt recorded here.
//
// A receipt in the file that the controller never recorded, for an
// attempt it began, is no finding: the controller may have lost the
// answer (an uncertain attempt), and the file is then the only copy.
func CompareReceipts(cfgPath string, file []byte) (Comparison, error) {
	cfg, _, err := LoadConfig(cfgPath)
	if err != nil {
		return Comparison{}, err
	}
	bind, err := LoadBundle(cfg)
	if err != nil {
		return Comparison{}, fmt.Errorf("%s: %w", cfgPath, err)
	}
	keys, err := LoadKeys(cfg.KeyDir)
	if err != nil {
		return Comparison{}, err
	}
	f, err := msg.UnmarshalReceiptsFile(file)
	if err != nil {
		return Comparison{}, fmt.Errorf("%w: receipts file: %w", errUsage, err)
	}
	// Through the history, as every read-only command opens the journal
	// (read-only, no index: the daemon may be running); the receipts are
	// every result's and resolution's, so they are read from the first
	// record, through the archives `history archive` made.
	k, _, err := openReadOnly(cfg.JournalDir(), nil)
	if err != nil {
		return Comparison{}, err
	}
	defer k.Close()
	read, err := ledger.ReadReceipts(journalRecords{k.Journal()})
	if err != nil {
		return Comparison{}, err
	}
	c := compareWith(cfg.Name, read, f, bind.HostRing, wire.NewKeyring(keys.Dispatch.Public()))
	return c, nil
}

// compareWith is CompareReceipts on what it read.
func compareWith(name string, read ledger.ReceiptsRead, f msg.ReceiptsFile, host, dispatch *wire.Keyring) Comparison {
	recorded, begun := read.Recorded, read.Begun
	c := Comparison{Recorded: len(recorded), Findings: []string{}}
	consents := consentsByRequest{}
	finding := func(format string, a ...any) { c.Findings = append(c.Findings, fmt.Sprintf(format, a...)) }
	exported := map[string][]byte{}
	for i, signed := range f.Receipts {
		rc, err := msg.VerifyReceipt(signed, host)
		if err != nil {
			finding("receipt %d of the file does not verify under the pinned host key: %v", i+1, err)
			continue
		}
		c.LastExported = max(c.LastExported, rc.Seq)
		if rc.Controller != name {
			continue
		}
		c.Exported++
		exported[rc.Attempt] = signed
		reqSHA, ok := begun[rc.Attempt]
		switch {
		case !ok:
			finding("receipt %d is for attempt %s, which this controller never began", rc.Seq, rc.Attempt)
			continue
		case !bytes.Equal(reqSHA, rc.RequestSHA256):
			finding("receipt %d (attempt %s) names another request than this controller began", rc.Seq, rc.Attempt)
		}
		if err := rc.CheckTerms(); err != nil {
			finding("receipt %d (attempt %s): %v", rc.Seq, rc.Attempt, err)
		}
		if rc.Charge > 0 || rc.Consent != nil {
			if err := checkOwnConsent(rc, dispatch); err != nil {
				finding("receipt %d (attempt %s): %v", rc.Seq, rc.Attempt, err)
			}
		}
		consents.add(read.Requests, rc)
	}
	c.Findings = append(c.Findings, consents.findings()...)
	ids := make([]string, 0, len(recorded))
	for id := range recorded {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		mine := recorded[id]
		if rc, err := msg.VerifyReceipt(mine, host); err == nil {
			c.LastRecorded = max(c.LastRecorded, rc.Seq)
		}
		theirs, ok := exported[id]
		switch {
		case !ok:
			finding("attempt %s: the receipt recorded here is not in the file (omitted, or the file ends before it)", id)
		case !bytes.Equal(theirs, mine):
			finding("attempt %s: the file's receipt differs from the one recorded here", id)
		default:
			c.Matched++
		}
	}
	if c.LastRecorded > c.LastExported {
		finding("the file ends at receipt %d, but this controller recorded receipt %d: the file is truncated", c.LastExported, c.LastRecorded)
	}
	return c
}

// checkOwnConsent verifies that a receipt's consent is this controller's
// own, for the receipt's attempt and request, and allows its charge.
func checkOwnConsent(rc msg.Receipt, dispatch *wire.Keyring) error {
	if rc.Consent == nil {
		return fmt.Errorf("a charge of %d without a payer consent", rc.Charge)
	}
	cs, err := msg.OpenConsent(rc.Consent, dispatch)
	if err != nil {
		return fmt.Errorf("its consent is not this controller's: %w", err)
	}
	switch {
	case cs.Attempt != rc.Attempt:
		return fmt.Errorf("its consent is for attempt %s", cs.Attempt)
	case !bytes.Equal(cs.RequestSHA256, rc.RequestSHA256):
		return fmt.Errorf("its consent is for another request")
	case !cs.Allows(rc.Charge):
		return fmt.Errorf("a charge of %d the consent does not allow", rc.Charge)
	}
	return rc.CheckCharge(cs)
}
