package controller

import "testing"

// A journal openJournal creates records the segment size it was given; a
// later open with the default keeps it.
func TestOpenJournalSegmentSize(t *testing.T) {
	dir := t.TempDir()
	m := baseConfig(dir, testBundle(t, dir, "dev", "appliance"))
	raw := mustJSON(t, m)
	cfg, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{4 << 20, 0} {
		j, err := openJournal(cfg, raw, size)
		if err != nil {
			t.Fatal(err)
		}
		got := j.SegmentSize()
		j.Close()
		if got != 4<<20 {
			t.Fatalf("opened with %d: segment size %d, want the recorded 4 MiB", size, got)
		}
	}
}
