package operator_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// lastSeq is the sequence number of the last record of s's journal, read
// from the journal on disk (read-only: s holds it open).
func lastSeq(t *testing.T, s *operator.Store) uint64 {
	t.Helper()
	j, _, err := hostlog.OpenReadOnly(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	return j.LastSeq()
}

func wantRefused(t *testing.T, err error, part string) {
	t.Helper()
	if !errors.Is(err, views.ErrRefused) || !strings.Contains(err.Error(), part) {
		t.Fatalf("want a refusal containing %q, got %v", part, err)
	}
}

func TestInitRefusesExisting(t *testing.T) {
	dir := filepath.Join(peertest.ShortDir(t), "s")
	if _, err := operator.Init(dir); err != nil {
		t.Fatal(err)
	}
	_, err := operator.Init(dir)
	wantRefused(t, err, "already exists")
	s, err := operator.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := operator.Open(dir); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

func TestRouteHistory(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	w.WithStore(t, func(s *operator.Store) {
		v1 := s.Routes()[0]
		rr := w.Route
		// a new revision must name the selected one
		n := lastSeq(t, s)
		_, err := s.RegisterRoute("r1", "app", rr)
		wantRefused(t, err, "replaces")
		rr.Replaces = v1.ID
		v2, err := s.RegisterRoute("r1", "app", rr)
		if err != nil || v2.Revision != 2 || v2.Replaces != v1.ID {
			t.Fatalf("%+v %v", v2, err)
		}
		// fork: replacing revision 1 again
		n = lastSeq(t, s)
		_, err = s.RegisterRoute("r1", "app", rr)
		wantRefused(t, err, "fork: replaces revision 1, but revision 2 is selected")
		// cycle: the same signed record registered again
		signed, _ := s.SignedRoute("r1")
		_, err = s.ImportRoute(signed)
		wantRefused(t, err, "cycle")
		// a route record with one byte changed
		bad := bytes.Clone(signed)
		bad[len(bad)/2] ^= 1
		_, err = s.ImportRoute(bad)
		wantRefused(t, err, "route record")
		// a record whose replaces names another route's revision
		rr2 := w.Route
		rr2.Forward = w.Dir + "/x.sock"
		rr2.Replaces = v2.ID
		_, err = s.RegisterRoute("r2", "app", rr2)
		wantRefused(t, err, "the first revision replaces nothing")
		if got := lastSeq(t, s); got != n {
			t.Fatalf("refused registrations journaled: %d -> %d", n, got)
		}
		// 64 revisions: revision 64 is accepted, 65 refused
		rr.Replaces = v2.ID
		for i := 3; i <= msg.MaxRouteRevisions; i++ {
			v, err := s.RegisterRoute("r1", "app", rr)
			if err != nil {
				t.Fatalf("revision %d: %v", i, err)
			}
			rr.Replaces = v.ID
		}
		n = lastSeq(t, s)
		_, err = s.RegisterRoute("r1", "app", rr)
		wantRefused(t, err, "64 revisions, the bound is 64")
		// 8 routes not removed: the 8th is accepted, the 9th refused
		for i := 2; i <= msg.MaxSelectedRoutes; i++ {
			r := w.Route
			r.Forward = fmt.Sprintf("%s/f%d.sock", w.Dir, i)
			if _, err := s.RegisterRoute(fmt.Sprintf("r%d", i), fmt.Sprintf("app%d", i), r); err != nil {
				t.Fatalf("route %d: %v", i, err)
			}
		}
		n = lastSeq(t, s)
		r := w.Route
		r.Forward = w.Dir + "/f9.sock"
		_, err = s.RegisterRoute("r9", "app9", r)
		wantRefused(t, err, "route r9: 8 routes are registered and not removed, the bound is 8: remove one first (steward-operator route remove)")
		// two routes on one forward socket
		r.Forward = w.Dir + "/f2.sock"
		rv, _ := s.Route("r3")
		r.Replaces = rv[0].ID
		_, err = s.RegisterRoute("r3", "app3", r)
		wantRefused(t, err, "is route r2's")
		// timeouts at and past their bounds
		r = w.Route
		r.Replaces = rv[0].ID
		r.Forward = w.Dir + "/f3.sock"
		r.Timeouts.ConnectMs = hostlog.MaxConnectMs + 1
		_, err = s.RegisterRoute("r3", "app3", r)
		wantRefused(t, err, "connect timeout 10001 ms is outside 1 to 10000")
		r.Timeouts.ConnectMs, r.Timeouts.ResponseMs = hostlog.MaxConnectMs, hostlog.MaxResponseMs+1
		_, err = s.RegisterRoute("r3", "app3", r)
		wantRefused(t, err, "response timeout 300001 ms")
		if got := lastSeq(t, s); got != n {
			t.Fatalf("refused registrations journaled: %d -> %d", n, got)
		}
		r.Timeouts.ResponseMs = hostlog.MaxResponseMs
		if _, err := s.RegisterRoute("r3", "app3", r); err != nil {
			t.Fatal(err)
		}
	})
	// the history replays at open
	w.WithStore(t, func(s *operator.Store) {
		revs, err := s.Route("r1")
		if err != nil || len(revs) != 64 {
			t.Fatalf("%d revisions, %v", len(revs), err)
		}
		if len(s.Routes()) != 8 {
			t.Fatal(len(s.Routes()))
		}
	})
}

func TestGrantRecords(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	w.WithStore(t, func(s *operator.Store) {
		signed, err := s.SignedGrant(w.Grant)
		if err != nil {
			t.Fatal(err)
		}
		n := lastSeq(t, s)
		for _, i := range []int{0, 10, len(signed) / 2, len(signed) - 1} {
			bad := bytes.Clone(signed)
			bad[i] ^= 0x40
			if _, err := s.ImportGrant(bad); err == nil {
				t.Fatalf("grant with byte %d changed accepted", i)
			}
		}
		_, err = s.ImportGrant(signed)
		wantRefused(t, err, "already exists")
		// a grant signed by another key
		other, _ := wire.GenerateHybridKey()
		g, _ := msg.VerifyGrant(signed, s.PublicKey())
		g.ID = "g-other"
		forged, _ := msg.SignGrant(other, g)
		_, err = s.ImportGrant(forged)
		wantRefused(t, err, "grant")
		_, err = s.IssueGrant(views.GrantSpec{Controller: "ctl", Application: "app", PerDay: 0, NotAfter: time.Now().Add(time.Hour)})
		wantRefused(t, err, "per-day count must be at least 1")
		_, err = s.IssueGrant(views.GrantSpec{Controller: "ctl", Application: "app", PerDay: 1, NotAfter: time.Now().Add(-time.Hour)})
		wantRefused(t, err, "not in the future")
		_, err = s.IssueGrant(views.GrantSpec{Controller: "nobody", Application: "app", PerDay: 1, NotAfter: time.Now().Add(time.Hour)})
		wantRefused(t, err, "no controller named nobody")
		_, err = s.IssueGrant(views.GrantSpec{Controller: "ctl", Application: "app", Operations: []string{"[bad"}, PerDay: 1, NotAfter: time.Now().Add(time.Hour)})
		wantRefused(t, err, "operation pattern")
		if got := lastSeq(t, s); got != n {
			t.Fatalf("refused grants journaled: %d -> %d", n, got)
		}
		if err := s.RevokeGrant(w.Grant); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, s.RevokeGrant(w.Grant), "already revoked")
	})
	w.WithStore(t, func(s *operator.Store) {
		if gs := s.Grants(); len(gs) != 1 || !gs[0].Revoked {
			t.Fatalf("%+v", gs)
		}
	})
}

func TestControllerAndPurse(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	w.WithStore(t, func(s *operator.Store) {
		n := lastSeq(t, s)
		_, err := s.AddController("ctl", 5, w.Peer.KeysFile(), "/run/c2.sock")
		wantRefused(t, err, "already pinned")
		_, err = s.AddController("c2", 5, []byte{0xa0}, "/run/c2.sock")
		wantRefused(t, err, "controller keys")
		_, err = s.AddController("bad name", 5, w.Peer.KeysFile(), "/run/c2.sock")
		wantRefused(t, err, "only A-Za-z0-9._-")
		_, err = s.FundPurse("ctl", 0)
		wantRefused(t, err, "at least 1")
		if got := lastSeq(t, s); got != n {
			t.Fatalf("refused changes journaled")
		}
		if _, err := s.FundPurse("ctl", 1<<62); err != nil {
			t.Fatal(err)
		}
		_, err = s.FundPurse("ctl", 1<<62)
		wantRefused(t, err, "would pass the bound")
		p, _ := s.Freeze("ctl")
		p2, _ := s.Freeze("ctl") // the kill switch is idempotent
		if !p.Frozen || !p2.Frozen {
			t.Fatal("not frozen")
		}
	})
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); !p.Frozen || p.Balance != 1<<62 {
			t.Fatalf("%+v", p)
		}
		b, err := s.BuildBundle("ctl", 0)
		if err != nil {
			t.Fatal(err)
		}
		bu, pub, routes, err := msg.OpenBundle(b)
		if err != nil || !pub.Equal(s.PublicKey()) || len(routes) != 1 || bu.Controller != "ctl" || routes[0].Forward != w.Route.Forward {
			t.Fatalf("bundle %+v %v", bu, err)
		}
		if bytes.Contains(b, w.Peer.Disp.Public().MarshalCOSEKey()) {
			t.Fatal("bundle carries controller keys")
		}
	})
}

// utcDay is the day number a reservation counts on: the UTC day (unix ms
// / 86,400,000), as hostlog's doc gives reserve's day and the store
// computes it.
func utcDay(t time.Time) int64 { return t.UnixMilli() / 86_400_000 }

// TestReplayRefusesWhatTheTableDoesNot: a record of a kind hostlog's
// table does not name, or a body with a key its type lacks, stops Open
// and OpenReadOnly, naming the record. hostlog's
// TestReplayAndVerifyRefuseWhatTheTableDoesNot checks the decoding, the
// audit's TestVerifyRefusesWhatTheTableDoesNot `receipts verify`.
func TestReplayRefusesWhatTheTableDoesNot(t *testing.T) {
	cases := []struct {
		name, kind string
		body       any
		open       string
	}{
		{"unknown kind", "grant-renew", hostlog.GrantRevoke{ID: "g"},
			`(grant-renew): unknown record kind "grant-renew"`},
		{"unknown key", hostlog.KindPurseFreeze, map[string]any{"controller": "ctl", "why": "x"},
			`(purse-freeze): wire: malformed: cbor decode: cbor: found unknown field at map element index 0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := hosttest.NewWorld(t, hosttest.Opts{})
			seq := hosttest.Append(t, w.Store, w.Pub, tc.kind, tc.body)
			wantOpen := fmt.Sprintf("host journal record %d %s", seq, tc.open)
			if _, err := operator.Open(w.Store); err == nil || err.Error() != wantOpen {
				t.Errorf("open: %v\nwant: %s", err, wantOpen)
			}
			if _, err := operator.OpenReadOnly(w.Store); err == nil || err.Error() != wantOpen {
				t.Errorf("open read-only: %v\nwant: %s", err, wantOpen)
			}
		})
	}
}
