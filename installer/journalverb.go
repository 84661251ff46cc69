package installer

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/stewardrt/steward/journal"
)

// journalLine is one line of controller-journal's output.
type journalLine struct {
	Seq  uint64          `json:"seq"`
	Prev string          `json:"prev"` // hex SHA-256 of the previous record's payload
	Kind string          `json:"kind"`
	At   int64           `json:"at"` // unix ms
	Body json.RawMessage `json:"body"`
}

// runControllerJournal prints the controller's journal from --from SEQ (1
// when 0) as JSON lines, for the operator's audit. It opens the journal
// read-only (no lock: the controller may be running) as the controller
// account, and prints the records durable when it started.
func runControllerJournal(ctx context.Context, c *call, o options) int {
	if err := c.env.Controller.becomeController(); err != nil {
		return c.failf("%v", err)
	}
	files, err := c.env.Controller.locateController(false)
	if err != nil {
		return c.failf("%v", err)
	}
	j, err := journal.Open(files.journalDir, journal.Options{ReadOnly: true})
	if err != nil {
		return c.failf("the controller's journal: %v", err)
	}
	defer j.Close()
	w := bufio.NewWriter(c.stdout)
	err = j.Iterate(o.from, func(r journal.Record) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		body, err := cborToJSON(r.Body)
		if err != nil {
			return fmt.Errorf("record %d (%s): body: %v", r.Seq, r.Kind, err)
		}
		b, err := json.Marshal(journalLine{Seq: r.Seq, Prev: hex.EncodeToString(r.Prev), Kind: r.Kind, At: r.At, Body: body})
		if err != nil {
			return err
		}
		w.Write(b)
		return w.WriteByte('\n')
	})
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return c.failf("the controller's journal %s: %v", files.journalDir, err)
	}
	return ExitOK
}
