package journal_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/stewardrt/steward/journal"
)

// A journal is opened (created on first use) bound to its owner, format and
// config; Append returns once the record is on disk; a later Open verifies
// every record again and Iterate reads them back in order.
func Example() {
	base, err := os.MkdirTemp("", "journal-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "journal")
	opts := journal.Options{
		Owner:       "example-owner",
		Format:      "example-journal-v1",
		Config:      []byte(`{"name": "example"}`),
		SegmentSize: 1 << 20,
	}

	j, err := journal.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	type deposit struct {
		Account string `cbor:"account"`
		Amount  uint64 `cbor:"amount"`
	}
	for _, d := range []deposit{{"alice", 5}, {"bob", 7}} {
		seq, err := j.Append("deposit", d)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("appended deposit %d\n", seq)
	}
	if err := j.Close(); err != nil {
		log.Fatal(err)
	}

	j, err = journal.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	fmt.Printf("owner %s, format %s, %d records\n", j.Owner(), j.Format(), j.LastSeq())
	err = j.Iterate(1, func(r journal.Record) error {
		fmt.Printf("%d %s\n", r.Seq, r.Kind)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// appended deposit 2
	// appended deposit 3
	// owner example-owner, format example-journal-v1, 3 records
	// 1 bind
	// 2 deposit
	// 3 deposit
}
