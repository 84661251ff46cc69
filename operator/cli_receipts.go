package operator

import (
	"fmt"

	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
)

func (c *CLI) cmdReceiptsVerify(args []string) error {
	fs, store := flags("receipts verify")
	from := fs.Uint64("from", 1, "check signatures from receipt `SEQ`")
	file := fs.String("file", "", "verify an exported receipts `FILE` instead of a store")
	hostKey := fs.String("host-key", "", "with --file: require this host public key `FILE` (operator.pub)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	var rep ReceiptReport
	var err error
	if *file != "" {
		b, rerr := readBounded(*file, 1<<30)
		if rerr != nil {
			return rerr
		}
		var pinned *wire.HybridPublicKey
		if *hostKey != "" {
			kb, kerr := readBounded(*hostKey, 64<<10)
			if kerr != nil {
				return kerr
			}
			if pinned, kerr = wire.ParseHybridPublicKey(kb); kerr != nil {
				return kerr
			}
		}
		rep, err = VerifyReceiptsFile(b, pinned)
	} else {
		s, oerr := readOnly(*store)
		if oerr != nil {
			return oerr
		}
		defer s.Close()
		rep, err = s.VerifyReceipts(*from)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(rep)
	}
	fmt.Fprintf(c.Stdout, "%d receipts verified, chain head %s; %d checkpoints cover receipts 1..%d; %d not yet covered\n",
		rep.Receipts, rep.Head, rep.Checkpoints, rep.CoveredThrough, rep.Uncovered)
	for _, p := range rep.Purses {
		fmt.Fprintf(c.Stdout, "purse %s: funded %d, charged %d, balance %d, %d receipts add up\n", p.Controller, p.Funded, p.Charged, p.Balance, p.Receipts)
	}
	return nil
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
	b, err := s.ExportReceipts()
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
	sum, err := journal.Inspect(*store + "/" + journalDir)
	if err != nil {
		return err
	}
	return c.printJSON(sum)
}
