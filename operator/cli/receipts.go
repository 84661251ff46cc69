package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// cmdReceiptsVerify verifies the store's receipt history or an exported
// file. It prints the report even with findings (exit 1), so that every
// finding is seen, and refuses (exit 2) a file verify that would trust
// the file's own key.
func (c *CLI) cmdReceiptsVerify(args []string) error {
	fs, store := flags("receipts verify")
	file := fs.String("file", "", "verify an exported receipts `FILE` instead of a store")
	hostKey := fs.String("host-key", "", "with --file, required: the host public key `FILE` (operator.pub) its receipts must be signed with")
	ctlKeys := fs.String("controller-keys", "", "with --file: check consents against this controller's public keys `FILE` (controller.pub)")
	ctlName := fs.String("controller", "", "with --controller-keys: the controller `NAME` whose keys they are (default: the one the file names)")
	point := fs.String("from", "", "start from the verified point `FILE` (--save-point, or history archive's ARCHIVEDIR.point): verify only the records after it, needing no archive before it")
	savePoint := fs.String("save-point", "", "after a verify with no fault and no finding, write the verified point at the last record read to `FILE` (0600)")
	var archives listFlag
	fs.Var(&archives, "archive", "an archive `DIR` of the journal (`history archive`), one for each its base names, oldest first (default: where each was made)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	var rep audit.ReceiptReport
	var err error
	var saved string // the line saying a point was written
	if *file != "" {
		if len(archives) > 0 {
			return fmt.Errorf("%w: --archive is for a store: a receipts file holds its receipts whole", errUsage)
		}
		if *point != "" || *savePoint != "" {
			return fmt.Errorf("%w: --from and --save-point are for a store: a receipts file is verified whole", errUsage)
		}
		rep, err = verifyFileCommand(*file, *hostKey, *ctlKeys, *ctlName)
	} else {
		if *hostKey != "" || *ctlKeys != "" || *ctlName != "" {
			return fmt.Errorf("%w: --host-key, --controller-keys and --controller are for --file: a store verifies against the keys it pinned", errUsage)
		}
		s, oerr := readOnly(*store)
		if oerr != nil {
			return oerr
		}
		defer s.Close()
		rep, saved, err = c.verifyStore(*store, archives, *point, *savePoint)
	}
	if err != nil && len(rep.Findings) == 0 {
		return err
	}
	if *asJSON {
		if perr := c.printJSON(rep); perr != nil {
			return perr
		}
		if saved != "" {
			fmt.Fprintln(c.Stderr, saved)
		}
		return err
	}
	c.printReceiptReport(rep)
	if saved != "" {
		fmt.Fprintln(c.Stdout, saved)
	}
	return err
}

// verifyStore verifies the store's journal, from the verified point
// point when given, and after a clean verify writes the next point to
// save when given (atomically, 0600: it is the operator's, signed with
// its key). A verify with a fault or a finding writes none, and says so.
func (c *CLI) verifyStore(store string, archives []string, point, save string) (audit.ReceiptReport, string, error) {
	o := audit.VerifyOptions{Archives: archives, Now: hostAttemptState(store), PointName: point}
	if point != "" {
		b, err := readBounded(point, audit.MaxPointBytes)
		if err != nil {
			return audit.ReceiptReport{}, "", err
		}
		o.Point = b
	}
	if save != "" {
		key, err := operator.ReadKey(store)
		if err != nil {
			return audit.ReceiptReport{}, "", err
		}
		o.SavePoint = func(d []byte) ([]byte, error) { return wire.SignHybrid(key, d) }
	}
	rep, b, err := audit.Verify(store, o)
	switch {
	case save == "":
		return rep, "", err
	case err != nil:
		fmt.Fprintf(c.Stderr, "no verified point written to %s: the verify did not pass\n", save)
		return rep, "", err
	}
	if err := durable.WriteAtomic(save, b, 0o600); err != nil {
		return rep, "", err
	}
	return rep, fmt.Sprintf("verified point at journal record %d written to %s", rep.Records, save), nil
}

// hostAttemptState asks the host serving store, over its admin socket,
// for an attempt's state: whether a reservation with no outcome in the
// journal read is a call in flight (receipts verify on a live journal).
func hostAttemptState(store string) audit.AttemptState {
	return func(attempt string) (msg.State, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a, err := admin.Dial(ctx, store)
		if err != nil {
			return "", err
		}
		defer a.Close()
		rep, err := a.Do(admin.Request{Op: admin.OpAttemptInspect, Name: attempt})
		if err != nil {
			return "", err
		}
		if rep.Attempt == nil {
			return msg.StateNotSeen, nil
		}
		return rep.Attempt.State, nil
	}
}

// verifyFileCommand reads the file and the keys named and verifies the file.
func verifyFileCommand(file, hostKey, ctlKeys, ctlName string) (audit.ReceiptReport, error) {
	if hostKey == "" {
		return audit.ReceiptReport{}, fmt.Errorf("%w: --host-key FILE is required with --file: the file's own key proves nothing about who made it", errUsage)
	}
	if ctlName != "" && ctlKeys == "" {
		return audit.ReceiptReport{}, fmt.Errorf("%w: --controller names whose --controller-keys are given; none were", errUsage)
	}
	var k audit.FileKeys
	kb, err := readBounded(hostKey, 64<<10)
	if err != nil {
		return audit.ReceiptReport{}, err
	}
	if k.Host, err = wire.ParseHybridPublicKey(kb); err != nil {
		return audit.ReceiptReport{}, views.Refusedf("host key %s: %v", hostKey, err)
	}
	if ctlKeys != "" {
		if k.Dispatch, err = readDispatchKey(ctlKeys); err != nil {
			return audit.ReceiptReport{}, err
		}
		k.Controller = ctlName
	}
	b, err := readBounded(file, 1<<30)
	if err != nil {
		return audit.ReceiptReport{}, err
	}
	return audit.VerifyFileKeys(b, k)
}

// readDispatchKey reads a controller's public keys file (msg.ControllerKeys,
// as `steward-controller keys init` writes it) and returns its dispatch key.
func readDispatchKey(path string) (*wire.PublicKey, error) {
	b, err := readBounded(path, 64<<10)
	if err != nil {
		return nil, err
	}
	var ck msg.ControllerKeys
	if err := wire.Unmarshal(b, &ck); err != nil {
		return nil, views.Refusedf("controller keys %s: %v", path, err)
	}
	k, err := wire.ParsePublicKey(ck.Dispatch)
	if err != nil {
		return nil, views.Refusedf("controller keys %s: dispatch key: %v", path, err)
	}
	return k, nil
}

// printReceiptReport prints a report as text: the chain, how far the
// checkpoints cover it, the purses, whose consents were checked, and
// every finding.
func (c *CLI) printReceiptReport(rep audit.ReceiptReport) {
	if rep.Records > 0 {
		fmt.Fprintln(c.Stdout, rep.Checked())
	}
	fmt.Fprintf(c.Stdout, "%d receipts verified, chain head %s; %d checkpoints cover receipts 1..%d; %d not yet covered\n",
		rep.Receipts, rep.Head, rep.Checkpoints, rep.CoveredThrough, rep.Uncovered)
	if rep.LastSeq > 0 {
		fmt.Fprintf(c.Stdout, "last receipt %d, head %s\n", rep.LastSeq, rep.Head)
	}
	if cp := rep.Covering; cp != nil {
		fmt.Fprintf(c.Stdout, "checkpoint at receipt %d, head %s, signed %s\n", cp.Seq, cp.Head, time.UnixMilli(cp.At).UTC().Format(time.RFC3339))
	}
	if rep.Uncovered > 0 {
		fmt.Fprintf(c.Stdout, "receipts %d..%d: not yet covered by a checkpoint\n", rep.CoveredThrough+1, rep.LastSeq)
	}
	for _, p := range rep.Purses {
		fmt.Fprintf(c.Stdout, "purse %s: funded %d, charged %d, balance %d, %d receipts add up\n", p.Controller, p.Funded, p.Charged, p.Balance, p.Receipts)
	}
	for _, cr := range rep.Consents {
		if cr.Checked {
			fmt.Fprintf(c.Stdout, "consents of controller %s checked against its dispatch key %s: %d receipts\n", cr.Controller, cr.DispatchID, cr.Receipts)
		} else {
			fmt.Fprintf(c.Stdout, "consents of controller %s NOT checked (no --controller-keys for it): %d receipts\n", cr.Controller, cr.Receipts)
		}
	}
	for _, ar := range rep.Agents {
		name := "agent " + ar.Agent
		if ar.Agent == "" {
			name = "no agent named"
		}
		fmt.Fprintf(c.Stdout, "%s: %d receipts, charged %d\n", name, ar.Receipts, ar.Charged)
	}
	for _, f := range rep.Findings {
		fmt.Fprintf(c.Stdout, "finding: %s\n", f)
	}
	if len(rep.Open) > 0 {
		fmt.Fprintf(c.Stdout, "%d reservations open while the host serves (calls in flight, or uncertain: steward-operator attempts list --state uncertain names those)\n", len(rep.Open))
	}
	for _, f := range rep.Open {
		fmt.Fprintf(c.Stdout, "open: %s\n", f)
	}
}

func (c *CLI) cmdReceiptsExport(args []string) error {
	fs, store := flags("receipts export")
	out := fs.String("out", "", "write the receipts to `FILE`")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: --out FILE is required", errUsage)
	}
	s, err := readOnly(*store)
	if err != nil {
		return err
	}
	defer s.Close()
	b, err := audit.ExportStore(*store)
	if err != nil {
		return err
	}
	// The operator's record of every charge: private to the operator,
	// 0600 whatever the umask, replacing what was at --out.
	if err := durable.WriteAtomic(*out, b, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "receipts written to %s\n", *out)
	return nil
}

func (c *CLI) cmdJournalInspect(args []string) error {
	fs, store := flags("journal inspect")
	// The summary has no text form: it prints the same indented JSON with
	// or without --json, which is accepted like every other command's.
	fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	if err := needStore(*store); err != nil {
		return err
	}
	sum, err := journal.Inspect(*store + "/" + hostlog.JournalDir)
	if err != nil {
		return err
	}
	return c.printJSON(sum)
}
