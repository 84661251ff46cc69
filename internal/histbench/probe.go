package histbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"

	"github.com/stewardrt/steward/dev"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/wire/msg"
)

// prober asks a daemon for the oldest call again and checks its answer
// against the one recorded when the call was made.
type prober interface {
	ask(ctx context.Context) error
	Close() error
}

// mcpProbe makes the oldest call again on the controller's MCP socket:
// the same requestId and arguments, answered from the journal with the
// same attempt, receipt and body, replayed and not charged.
func mcpProbe(ctx context.Context, l dev.Layout, o *OldestCall) (prober, error) {
	s, err := dialMCP(ctx, l.MCPSocket)
	if err != nil {
		return nil, err
	}
	var want struct {
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(o.Result, &want); err != nil {
		s.Close()
		return nil, err
	}
	return &mcpProber{s: s, o: o, body: want.Body}, nil
}

type mcpProber struct {
	s    *mcpSession
	o    *OldestCall
	body json.RawMessage
}

func (p *mcpProber) Close() error { return p.s.Close() }

func (p *mcpProber) ask(ctx context.Context) error {
	r, err := p.s.callTool(ctx, p.o.Tool, p.o.Args)
	if err != nil {
		return err
	}
	var got struct {
		outcome
		Body   json.RawMessage `json:"body"`
		Charge *uint64         `json:"charge"`
	}
	if err := json.Unmarshal(r.Structured, &got); err != nil {
		return err
	}
	switch {
	case r.IsError || got.Outcome != msg.StateDefinite || got.Status != 200 || !got.Replayed:
		return fmt.Errorf("answered %.300s, not the recorded answer replayed", r.Structured)
	case got.AttemptID != p.o.Attempt || got.ReceiptID != p.o.Receipt:
		return fmt.Errorf("answered attempt %s receipt %s, not %s and %s", got.AttemptID, got.ReceiptID, p.o.Attempt, p.o.Receipt)
	case !sameJSON(got.Body, p.body):
		return fmt.Errorf("answered the body %s, not %s", got.Body, p.body)
	case got.Charge != nil && *got.Charge != 0:
		return fmt.Errorf("charged %d for a replay", *got.Charge)
	}
	return nil
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// hostProbe asks the host, on its admin socket, what it recorded of the
// oldest call's attempt: definite, with its receipt.
func hostProbe(ctx context.Context, l dev.Layout, o *OldestCall) (prober, error) {
	cl, err := admin.Dial(ctx, l.OperatorStore)
	if err != nil {
		return nil, err
	}
	return &hostProber{cl: cl, o: o}, nil
}

type hostProber struct {
	cl admin.Client
	o  *OldestCall
}

func (p *hostProber) Close() error { return p.cl.Close() }

func (p *hostProber) ask(context.Context) error {
	rep, err := p.cl.Do(admin.Request{Op: admin.OpAttemptInspect, Name: p.o.Attempt})
	if err != nil {
		return err
	}
	if a := rep.Attempt; a == nil || a.State != msg.StateDefinite || a.ReceiptID != p.o.Receipt || a.Status != 200 {
		return fmt.Errorf("inspect %s answered %+v, not definite 200 with receipt %s", p.o.Attempt, rep.Attempt, p.o.Receipt)
	}
	return nil
}

// applianceProbe sends the appliance the oldest invocation's exact body:
// its recorded answer comes back byte for byte.
func applianceProbe(_ context.Context, l dev.Layout, o *OldestCall) (prober, error) {
	cl := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", l.ApplianceSocket)
	}}}
	return &applianceProber{cl: cl, o: o}, nil
}

type applianceProber struct {
	cl *http.Client
	o  *OldestCall
}

func (p *applianceProber) Close() error { p.cl.CloseIdleConnections(); return nil }

func (p *applianceProber) ask(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://appliance/v1/invoke", bytes.NewReader(p.o.AppBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != p.o.AppStatus || !bytes.Equal(body, p.o.AppAnswer) {
		return fmt.Errorf("answered %d %.300s, not the recorded %d %.300s", resp.StatusCode, body, p.o.AppStatus, p.o.AppAnswer)
	}
	return nil
}
