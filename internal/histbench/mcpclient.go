package histbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// mcpSession is one agent's MCP session straight on the controller's MCP
// socket: newline-delimited JSON-RPC, as the keyless proxy passes it through
// byte for byte (DESIGN.md section 12), so that no proxy process or client
// SDK costs the generator CPU the daemons need. A session may carry several
// calls at once; each waits for the answer with its id.
type mcpSession struct {
	conn net.Conn
	wmu  sync.Mutex // one line per Write
	mu   sync.Mutex
	next int
	wait map[string]chan json.RawMessage // by id: the whole response line
	err  error                           // the reader's end
	done chan struct{}
}

// dialMCP connects and initializes a session.
func dialMCP(ctx context.Context, sock string) (*mcpSession, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	s := &mcpSession{conn: conn, wait: map[string]chan json.RawMessage{}, done: make(chan struct{})}
	go s.read()
	_, err = s.request(ctx, "initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "histgen", "version": "1"},
	})
	if err == nil {
		err = s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("MCP session on %s: %w", sock, err)
	}
	return s, nil
}

func (s *mcpSession) Close() error { return s.conn.Close() }

func (s *mcpSession) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err = s.conn.Write(append(b, '\n'))
	return err
}

// read hands each response line to the call waiting for its id; lines
// without one (notifications) are dropped.
func (s *mcpSession) read() {
	defer close(s.done)
	sc := bufio.NewScanner(s.conn)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var head struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &head) != nil || len(head.ID) == 0 {
			continue
		}
		s.mu.Lock()
		ch := s.wait[string(head.ID)]
		delete(s.wait, string(head.ID))
		s.mu.Unlock()
		if ch != nil {
			ch <- append(json.RawMessage(nil), sc.Bytes()...)
		}
	}
	s.mu.Lock()
	s.err = sc.Err()
	if s.err == nil {
		s.err = errors.New("the controller closed the MCP session")
	}
	s.mu.Unlock()
}

// request sends one JSON-RPC request and returns its result.
func (s *mcpSession) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan json.RawMessage, 1)
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, s.err
	}
	s.next++
	id := strconv.Itoa(s.next)
	s.wait[id] = ch
	s.mu.Unlock()
	if err := s.send(map[string]any{"jsonrpc": "2.0", "id": s.idNumber(id), "method": method, "params": params}); err != nil {
		return nil, err
	}
	select {
	case line := <-ch:
		var resp struct {
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("%s: JSON-RPC error %d: %s", method, resp.Error.Code, resp.Error.Message)
		}
		return resp.Result, nil
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, s.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *mcpSession) idNumber(id string) int { n, _ := strconv.Atoi(id); return n }

// toolResult is what the generator reads of a tools/call answer: the
// controller's structured result (controller.ToolResult) and its flag.
type toolResult struct {
	IsError    bool            `json:"isError"`
	Structured json.RawMessage `json:"structuredContent"`
}

// callTool runs one tool and returns its structured result and isError.
func (s *mcpSession) callTool(ctx context.Context, name string, args any) (toolResult, error) {
	raw, err := s.request(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return toolResult{}, err
	}
	var r toolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return toolResult{}, fmt.Errorf("tools/call %s: %w", name, err)
	}
	return r, nil
}
