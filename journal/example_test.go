package journal_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fxamacker/cbor/v2"

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

// An owner that snapshots its state keeps the mark of the last record the
// snapshot reflects; its next start opens from that mark and replays, in
// OnRecord, only the records after it, as Open verifies them. A record's
// place, kept in an index of the owner's, reads it back at once.
func ExampleOptions_from() {
	base, err := os.MkdirTemp("", "journal-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "journal")
	opts := journal.Options{Owner: "example-owner", Format: "example-journal-v1", Config: []byte(`{}`), SegmentSize: 1 << 20}

	j, err := journal.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	total := 0 // the owner's state
	for _, n := range []int{5, 7} {
		if _, err := j.Append("deposit", n); err != nil {
			log.Fatal(err)
		}
		total += n
	}
	snapshot, mark := total, j.Mark() // written together, durably, by the owner
	first, err := j.AppendAt("deposit", 11)
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Close(); err != nil {
		log.Fatal(err)
	}

	total = snapshot
	opts.From = &mark
	opts.OnRecord = func(r journal.Record) error {
		var n int
		if err := cbor.Unmarshal(r.Body, &n); err != nil {
			return err
		}
		total += n
		fmt.Printf("replayed %d %s at offset %d\n", r.Seq, r.Kind, r.Place.Offset)
		return nil
	}
	j, err = journal.Open(dir, opts)
	if errors.Is(err, journal.ErrMarkMismatch) {
		log.Fatal("discard the snapshot and open without From: ", err)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	r, err := j.ReadAt(first)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("total %d; record %d read back: %s\n", total, r.Seq, r.Kind)
	// Output:
	// replayed 4 deposit at offset 364
	// total 23; record 4 read back: deposit
}
