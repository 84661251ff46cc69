package appliance

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/oracleops"
)

func TestReplayAndConflict(t *testing.T) {
	a := startApp(t, Config{})
	status, first := a.invoke("req-1", "calc.evaluate", `{"expression":"3 * 687 / 365.25"}`)
	if status != 200 {
		t.Fatalf("%d %s", status, first)
	}
	n := a.records()
	// The same body, byte for byte: replayed, nothing journaled.
	status, again := a.invoke("req-1", "calc.evaluate", `{"expression":"3 * 687 / 365.25"}`)
	if status != 200 || !bytes.Equal(again, first) || a.records() != n {
		t.Fatalf("replay: %d %s, records %d -> %d", status, again, n, a.records())
	}
	// The same body in another key order and spacing is the same
	// canonical body: replayed too.
	status, again = a.do("POST", "/v1/invoke", []byte(` { "requestId" : "req-1", "operationId":"calc.evaluate", "conversationId":"conv-1",
		"arguments": {"expression":"3 * 687 / 365.25"} }`))
	if status != 200 || !bytes.Equal(again, first) || a.records() != n {
		t.Fatalf("replay, reordered: %d %s", status, again)
	}
	// A different body with the same id: 409, nothing runs or is journaled.
	for _, args := range []string{`{"expression":"3 * 687 / 365"}`, `{"expression":"3 * 687 / 365.25","precision":3}`} {
		status, body := a.invoke("req-1", "calc.evaluate", args)
		e := errorOf(t, body)
		if status != http.StatusConflict || e.Code != codeConflict || e.Message != `requestId "req-1" was already used with a different body` {
			t.Fatalf("conflict: %d %s", status, body)
		}
		if a.records() != n {
			t.Fatal("a conflict was journaled")
		}
	}
	// Another conversation id is another body, too.
	r, _ := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{Arguments: json.RawMessage(`{"expression":"3 * 687 / 365.25"}`),
		ConversationID: "conv-2", OperationID: "calc.evaluate", RequestID: "req-1"})
	if status, _ := a.do(r.Method, r.Path, r.Body); status != http.StatusConflict {
		t.Fatalf("other conversation: %d", status)
	}
}

// TestSameIDConcurrently sends one request id twice while the first is
// still running: the second waits and replays; the operation runs once.
func TestSameIDConcurrently(t *testing.T) {
	a := startApp(t, Config{})
	entered := make(chan struct{})
	proceed := make(chan struct{})
	var runs sync.WaitGroup
	var count int
	var mu sync.Mutex
	testHookRunning = func(string) {
		mu.Lock()
		count++
		mu.Unlock()
		entered <- struct{}{}
		<-proceed
	}
	t.Cleanup(func() { testHookRunning = nil })
	n := a.records()
	bodies := make([][]byte, 2)
	runs.Add(1)
	go func() {
		defer runs.Done()
		_, bodies[0] = a.invoke("same", "text.sha256", `{"text":"x"}`)
	}()
	<-entered // the first holds its slot
	// A different body with the running id is a conflict at once.
	if status, body := a.invoke("same", "text.sha256", `{"text":"y"}`); status != http.StatusConflict {
		t.Fatalf("conflict with a running id: %d %s", status, body)
	}
	runs.Add(1)
	go func() {
		defer runs.Done()
		_, bodies[1] = a.invoke("same", "text.sha256", `{"text":"x"}`)
	}()
	close(proceed)
	runs.Wait()
	if count != 1 || !bytes.Equal(bodies[0], bodies[1]) || a.records() != n+1 {
		t.Fatalf("ran %d times, bodies %s / %s, records +%d", count, bodies[0], bodies[1], a.records()-n)
	}
}

// TestBusy fills an operation's cap and checks the next invocation is
// refused with 429, journals nothing, and can be sent again later.
func TestBusy(t *testing.T) {
	a := startApp(t, Config{Capacity: 1})
	entered := make(chan struct{})
	proceed := make(chan struct{})
	testHookRunning = func(string) {
		entered <- struct{}{}
		<-proceed
	}
	t.Cleanup(func() { testHookRunning = nil })
	done := make(chan int)
	go func() {
		status, _ := a.invoke("holder", "calc.evaluate", `{"expression":"1"}`)
		done <- status
	}()
	<-entered
	n := a.records()
	status, body := a.invoke("second", "calc.evaluate", `{"expression":"2"}`)
	e := errorOf(t, body)
	if status != http.StatusTooManyRequests || e.Code != codeBusy || string(e.Details.(json.RawMessage)) != `{"capacity":1}` {
		t.Fatalf("over the cap: %d %s", status, body)
	}
	if a.records() != n {
		t.Fatal("a busy refusal was journaled")
	}
	// Other operations have caps of their own.
	testHookRunning = func(string) {}
	if status, body := a.invoke("other-op", "text.sha256", `{"text":""}`); status != 200 {
		t.Fatalf("another operation: %d %s", status, body)
	}
	close(proceed)
	if s := <-done; s != 200 {
		t.Fatalf("holder: %d", s)
	}
	if status, body := a.invoke("second", "calc.evaluate", `{"expression":"2"}`); status != 200 || !strings.Contains(string(body), `"fraction":"2"`) {
		t.Fatalf("after busy, the same id runs: %d %s", status, body)
	}
}

// TestJournalFailureIsAFault closes the journal under the server: an
// invocation is then refused as a fault, and nothing is remembered.
func TestJournalFailureIsAFault(t *testing.T) {
	a := startApp(t, Config{})
	a.srv.journal.Close()
	status, body := a.invoke("after-close", "calc.evaluate", `{"expression":"1"}`)
	if e := errorOf(t, body); status != 500 || e.Code != codeFault || e.Message != "the answer could not be journaled" {
		t.Fatalf("%d %s", status, body)
	}
	if a.srv.ledger.count() != 0 {
		t.Fatal("an answer that was not journaled was indexed")
	}
}

// TestReplayAfterRestart runs the appliance as a child process, invokes,
// stops it, starts a new process on the same state directory and checks
// that the recorded answers replay byte for byte and conflicts are still
// refused.
func TestReplayAfterRestart(t *testing.T) {
	dir := shortDir(t)
	sock, state := filepath.Join(dir, "a.sock"), filepath.Join(dir, "state")
	c := startChild(t, sock, state)
	a := &app{t: t, sock: sock, state: state, client: unixClient(sock)}
	calls := []struct{ id, op, args string }{
		{"r-calc", "calc.evaluate", `{"expression":"3 * 687 / 365.25"}`},
		{"r-zero", "calc.evaluate", `{"expression":"1/0"}`},
		{"r-units", "units.convert", `{"value":"1","from":"mi","to":"km"}`},
		{"r-unavail", "units.currency", `{"amount":"1","from":"EUR","to":"USD"}`},
		{"r-unknown", "no.such", `{}`},
	}
	type got struct {
		status int
		body   []byte
	}
	before := map[string]got{}
	for _, call := range calls {
		s, b := a.invoke(call.id, call.op, call.args)
		before[call.id] = got{s, b}
		// Replay before the restart.
		s2, b2 := a.invoke(call.id, call.op, call.args)
		if s2 != s || !bytes.Equal(b, b2) {
			t.Fatalf("%s: replay before restart differs", call.id)
		}
	}
	a.client.CloseIdleConnections()
	c.stop(t)

	c = startChild(t, sock, state)
	a.client = unixClient(sock)
	for _, call := range calls {
		s, b := a.invoke(call.id, call.op, call.args)
		if s != before[call.id].status || !bytes.Equal(b, before[call.id].body) {
			t.Fatalf("%s: after restart %d %s, before %d %s", call.id, s, b, before[call.id].status, before[call.id].body)
		}
	}
	if s, b := a.invoke("r-calc", "calc.evaluate", `{"expression":"1"}`); s != http.StatusConflict {
		t.Fatalf("conflict after restart: %d %s", s, b)
	}
	a.client.CloseIdleConnections()
	c.stop(t)
	sum, err := journal.Inspect(filepath.Join(state, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	// The bind record and one answer per call; replays and the conflict
	// added nothing.
	if sum.Records != uint64(1+len(calls)) {
		t.Fatalf("journal has %d records, want %d", sum.Records, 1+len(calls))
	}
}

// TestCrashAroundTheJournal kills the appliance with SIGKILL just before
// and just after it journals an answer. Before: nothing was recorded, and
// the same call after a restart runs. After: the client got no answer,
// but the answer is recorded, and the same call after a restart replays
// it without running again.
func TestCrashAroundTheJournal(t *testing.T) {
	for _, c := range []struct {
		point   string
		records uint64 // in the journal after the crash
	}{
		{"appliance-before-journal", 1},
		{"appliance-after-journal", 2},
	} {
		t.Run(c.point, func(t *testing.T) {
			dir := shortDir(t)
			sock, state := filepath.Join(dir, "a.sock"), filepath.Join(dir, "state")
			ch := startChild(t, sock, state, "STEWARD_FAILPOINT="+c.point)
			client := unixClient(sock)
			r, _ := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{Arguments: json.RawMessage(`{"expression":"2^10"}`),
				ConversationID: "conv-1", OperationID: "calc.evaluate", RequestID: "crash-1"})
			req, _ := r.HTTP(t.Context(), "http://appliance")
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("got an answer (%d) from a process killed at %s", resp.StatusCode, c.point)
			}
			err := ch.cmd.Wait()
			if err == nil || !strings.Contains(err.Error(), "signal: killed") {
				t.Fatalf("child ended with %v, want SIGKILL", err)
			}
			sum, err := journal.Inspect(filepath.Join(state, "journal"))
			if err != nil || sum.Records != c.records {
				t.Fatalf("after the crash: %d records, %v; want %d", sum.Records, err, c.records)
			}
			// A restart on the same socket path (the dead process's socket
			// is stale) and the same call.
			ch = startChild(t, sock, state)
			a := &app{t: t, client: unixClient(sock)}
			status, body := a.invoke("crash-1", "calc.evaluate", `{"expression":"2^10"}`)
			if status != 200 || string(body) != `{"operationId":"calc.evaluate","result":{"decimal":"1024","exact":true,"fraction":"1024","precision":12}}` {
				t.Fatalf("after restart: %d %s", status, body)
			}
			a.client.CloseIdleConnections()
			ch.stop(t)
			sum, err = journal.Inspect(filepath.Join(state, "journal"))
			if err != nil || sum.Records != 2 {
				t.Fatalf("after the retry: %d records, %v; want 2 (one answer, never two)", sum.Records, err)
			}
		})
	}
}

// TestLedgerRefusesOddJournal: a journal with a record the appliance does
// not know, or two answers for one request id, stops the start instead of
// being second-guessed.
func TestLedgerRefusesOddJournal(t *testing.T) {
	for _, c := range []struct {
		name   string
		write  func(j *journal.Journal) error
		substr string
	}{
		{"unknown kind", func(j *journal.Journal) error {
			_, err := j.Append("note", map[string]string{"x": "y"})
			return err
		}, `record 2 has unknown kind "note"`},
		{"two answers", func(j *journal.Journal) error {
			rec := answerRecord{RequestID: "dup", BodySHA256: make([]byte, 32), Status: 200, Response: []byte("{}")}
			if _, err := j.Append(kindAnswer, rec); err != nil {
				return err
			}
			_, err := j.Append(kindAnswer, rec)
			return err
		}, `record 3: a second answer for requestId "dup"`},
		{"short hash", func(j *journal.Journal) error {
			_, err := j.Append(kindAnswer, answerRecord{RequestID: "h", BodySHA256: []byte{1}, Status: 200, Response: []byte("{}")})
			return err
		}, "record 2: bodySha256 of 1 bytes"},
		{"unknown field", func(j *journal.Journal) error {
			_, err := j.Append(kindAnswer, map[string]any{"requestId": "u", "bodySha256": make([]byte, 32), "status": 200, "response": []byte("{}"), "extra": 1})
			return err
		}, "record 2: cbor: found unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := shortDir(t)
			state := filepath.Join(dir, "state")
			if err := prepareStateDir(state); err != nil {
				t.Fatal(err)
			}
			j, err := journal.Open(filepath.Join(state, "journal"), journal.Options{Owner: journalOwner, Format: journalFormat,
				Config: journalConfig, SegmentSize: testSegmentSize})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.write(j); err != nil {
				t.Fatal(err)
			}
			j.Close()
			_, err = Start(Config{Socket: filepath.Join(dir, "a.sock"), State: state, Logger: quietLogger(t), JournalSegmentSize: testSegmentSize})
			if err == nil || !strings.Contains(err.Error(), c.substr) {
				t.Fatalf("got %v, want %q", err, c.substr)
			}
		})
	}
}
