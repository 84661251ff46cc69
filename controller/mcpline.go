package controller

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/mcpproxy"
)

// mcpLines is an MCP session's request stream as its go-sdk server reads
// it: only whole lines of at most MaxMCPLine bytes including the newline
// that are JSON nested at most mcpproxy.MaxNesting deep. The go-sdk ends a
// session on the first line it cannot decode and bounds a line only
// loosely (its decoder counts what it read ahead), so the bound is kept
// here, exactly, for every peer, including one that skips the proxy. A
// line refused here is answered here, once, on the session's connection,
// and the session goes on:
//   - past MaxMCPLine, it is drained to its newline without being kept, and
//     answered with an error naming the bound that carries the line's own id
//     (mcpproxy.IDScan reads it as the line goes by);
//   - not JSON, -32700 with id null;
//   - nested too deep, an error naming the bound, with the line's id;
//   - JSON that go-sdk cannot read as a JSON-RPC 2.0 message, -32600 with
//     the line's id if it has one;
//   - a request before initialize, -32600 with its id;
//   - an initialize whose params go-sdk refuses (with error code 0) or that
//     names no protocol version, -32602 with its id, the session left
//     uninitialized for a correct one (initializeVersion);
//   - a batch (a JSON array) go-sdk would not serve whole, one error per
//     request with its id (batchVerdict, mcpbatch.go).
//
// Only the session's one reading goroutine calls Read. An answer is one
// Write on the connection, as each of go-sdk's messages is, and the
// connection serializes Writes, so an answer is never spliced into one.
type mcpLines struct {
	conn    io.ReadCloser
	br      *bufio.Reader // over the connection; its size is the bound
	answer  io.Writer     // the connection
	pending []byte        // what is left of the line being passed on
	// initialized: an initialize request was passed on. Until then a
	// request for any other method but ping is answered here
	// (beforeInitialize), since go-sdk answers it with error code 0.
	initialized bool
	// version is the protocol version go-sdk answers that initialize
	// with (negotiatedProtocol): it decides whether a batch is served.
	version string
}

func newMCPLines(conn io.ReadCloser, answer io.Writer) *mcpLines {
	return &mcpLines{conn: conn, br: bufio.NewReaderSize(conn, MaxMCPLine), answer: answer}
}

// Close closes the connection, as go-sdk does when the session ends.
func (l *mcpLines) Close() error { return l.conn.Close() }

// Read passes on the next admitted line, or what is left of it.
func (l *mcpLines) Read(p []byte) (int, error) {
	for len(l.pending) == 0 {
		line, err := l.br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if err := l.refuseLong(line); err != nil {
				return 0, err
			}
			continue
		case err != nil && (err != io.EOF || len(line) == 0):
			// A failed read (the first-request deadline, which was
			// answered, or a closed connection) drops a partial line.
			return 0, err
		}
		// A whole line, or the last bytes before the stream's end.
		if mcpproxy.IsBatch(line) {
			answers, asArray, pass := batchVerdict(line, l.version, l.initialized, false)
			if !pass {
				if _, werr := l.answer.Write(batchAnswer(answers, asArray)); werr != nil {
					return 0, werr
				}
				if err != nil {
					return 0, err
				}
				continue
			}
			l.pending = line
			break
		}
		if code, text, id, ok := mcpproxy.CheckLine(line); !ok {
			if _, werr := l.answer.Write(mcpproxy.ErrorLine(id, code, "steward: "+text)); werr != nil {
				return 0, werr
			}
			if err != nil {
				return 0, err
			}
			continue
		}
		if refusal := notAMessage(line); refusal != nil {
			if _, werr := l.answer.Write(refusal); werr != nil {
				return 0, werr
			}
			if err != nil {
				return 0, err
			}
			continue
		}
		if !l.initialized {
			if refusal := l.beforeInitialize(line); refusal != nil {
				if _, werr := l.answer.Write(refusal); werr != nil {
					return 0, werr
				}
				if err != nil {
					return 0, err
				}
				continue
			}
		}
		// The line stays in br's buffer until the next ReadSlice, which
		// is only called once all of it was passed on.
		l.pending = line
	}
	n := copy(p, l.pending)
	l.pending = l.pending[n:]
	return n, nil
}

// refuseLong drains a line past the bound whose first MaxMCPLine bytes are
// first, and answers it with its own id.
func (l *mcpLines) refuseLong(first []byte) error {
	var scan mcpproxy.IDScan
	scan.Write(first)
	n := int64(len(first))
	var err error
	for {
		var chunk []byte
		chunk, err = l.br.ReadSlice('\n')
		scan.Write(chunk)
		n += int64(len(chunk))
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
	}
	if err != nil && err != io.EOF {
		return err
	}
	if _, werr := l.answer.Write(mcpproxy.ErrorLine(scan.ID(), mcpproxy.CodeInvalidRequest, "steward: "+mcpproxy.LineTooLong(n))); werr != nil {
		return werr
	}
	return err
}

// sessionlessProtocol is the MCP version from which a request may carry
// its protocol version in _meta instead of a session's initialize.
const sessionlessProtocol = "2026-07-28"

// beforeInitialize reads a line that came before any initialize request:
// it returns the answer to a request (a message with a method and a string
// or number id) for a method other than initialize, ping and server/discover
// that does not carry the sessionless protocol's version, and nil for
// any other line, which is passed on. JSON-RPC and MCP name no code for
// this; it is an invalid request in the session (-32600, as the Python
// SDK answers it too). Only a session's first lines are decoded so.
func (l *mcpLines) beforeInitialize(line []byte) []byte {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &head) != nil || head.Method == nil {
		return nil
	}
	answerable := answerableID(head.ID)
	switch *head.Method {
	case "initialize":
		version, ok := initializeVersion(head.Params)
		switch {
		case ok:
			l.initialized, l.version = true, negotiatedProtocol(version)
		case answerable:
			return initializeRefusal(head.ID)
		}
		// Refused params under an id too long to echo: go-sdk answers
		// them (code 0, with the id), and the session stays uninitialized.
		return nil
	case "ping", "server/discover":
		return nil
	}
	var params struct {
		Meta struct {
			ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	json.Unmarshal(head.Params, &params) // params that are not an object carry no version
	if params.Meta.ProtocolVersion >= sessionlessProtocol {
		// The sessionless protocol (SEP-2575) has no initialize: each
		// request carries its version, and go-sdk serves it so.
		return nil
	}
	if !answerable {
		return nil // a notification (or no id to answer): never answered
	}
	return mcpproxy.ErrorLine(head.ID, mcpproxy.CodeInvalidRequest,
		fmt.Sprintf("steward: %q before initialize; a session begins with an initialize request", *head.Method))
}

// notAMessage answers a line of JSON that is not a batch (an array) and
// that go-sdk's decoder cannot read as one JSON-RPC 2.0 message: a wrong or
// missing "jsonrpc", a method that is not a string, an id that is not a
// string or number, a response without an id. go-sdk ends the session on
// such a line. A batch's members are checked by batchVerdict. It returns
// nil for a line that decodes.
func notAMessage(line []byte) []byte {
	if i := skipSpace(line, 0); i == len(line) || line[i] == '[' {
		return nil
	}
	return messageRefusal(line)
}

// messageRefusal answers line, which is JSON, when go-sdk's decoder cannot
// read it as one JSON-RPC 2.0 message (an array included: a batch's member
// cannot be a batch), and returns nil when it can.
func messageRefusal(line []byte) []byte {
	if _, err := jsonrpc.DecodeMessage(line); err == nil {
		return nil
	}
	var scan mcpproxy.IDScan
	scan.Write(line)
	return mcpproxy.ErrorLine(scan.ID(), mcpproxy.CodeInvalidRequest,
		`steward: not a JSON-RPC 2.0 message: it needs "jsonrpc":"2.0", a string "method" (or a result or error), and an "id" that is a string or number when it has one`)
}

// initializeParamsText is the error answering an initialize whose params
// go-sdk would refuse (with error code 0, and words about Go types) or
// that names no protocol version, which decides the session's protocol.
const initializeParamsText = `initialize needs params that are an object with "protocolVersion" (a string such as "2025-06-18"), "capabilities" (an object) and "clientInfo" (an object with "name" and "version"); the session is not initialized, and an initialize may follow`

// answerableID reports whether id (a request's, as it was sent) is one an
// answer echoes: a string or number of at most mcpproxy.MaxIDBytes.
func answerableID(id json.RawMessage) bool {
	return len(id) > 0 && len(id) <= mcpproxy.MaxIDBytes && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9'))
}

// initializeRefusal answers the initialize request whose id is id when its
// params are refused (initializeVersion): -32602, invalid params, where
// go-sdk answers error code 0 (and, over streamable HTTP, opens a session
// that cannot be initialized).
func initializeRefusal(id json.RawMessage) []byte {
	return mcpproxy.ErrorLine(id, jsonrpc.CodeInvalidParams, "steward: "+initializeParamsText)
}

// initializeVersion reads an initialize request's params as go-sdk's
// server does (mcp.InitializeParams) and returns the protocol version it
// asks for; ok is false for params that are missing, null or not such an
// object, or that name no protocol version. The MCP specification requires
// all three members; go-sdk, and so steward, needs the version alone.
func initializeVersion(params json.RawMessage) (version string, ok bool) {
	if i := skipSpace(params, 0); i == len(params) || params[i] != '{' {
		return "", false
	}
	var p mcp.InitializeParams
	if json.Unmarshal(params, &p) != nil || p.ProtocolVersion == "" {
		return "", false
	}
	return p.ProtocolVersion, true
}
