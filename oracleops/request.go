package oracleops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/stewardrt/steward/canonjson"
)

// Request is one oracle-operations-v1 HTTP request, exactly as sent: the
// method, the path with its query (already percent-encoded) and the body.
// The Build functions are the only producers; the same call always gives
// the same bytes.
type Request struct {
	Method string // GET or POST
	Path   string // PREFIX/operations?..., PREFIX/operations/ID or PREFIX/invoke
	Body   []byte // nil for GET; the canonical InvokeBody for POST
}

// SHA256 is the hash both the controller and the host record for a
// request. It is SHA-256 over
//
//	METHOD SP PATH LF BODY
//
// (SP one space 0x20, LF one line feed 0x0a, BODY the exact body bytes,
// empty for GET). Neither METHOD nor PATH can contain SP or LF, so the
// encoding is unambiguous.
func (r Request) SHA256() [32]byte {
	h := sha256.New()
	io.WriteString(h, r.Method)
	h.Write([]byte{' '})
	io.WriteString(h, r.Path)
	h.Write([]byte{'\n'})
	h.Write(r.Body)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// HTTP makes the *http.Request that sends r to the application at base
// (scheme and host only, e.g. "http://appliance" for a client that dials a
// Unix socket). The request line carries r.Path byte for byte.
func (r Request) HTTP(ctx context.Context, base string) (*http.Request, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, malformed("base", "%s is not a scheme://host URL", strconv.Quote(trunc(base, 128)))
	}
	full, err := url.Parse(u.Scheme + "://" + u.Host + r.Path)
	if err != nil {
		return nil, malformed("path", "%v", err)
	}
	if full.RequestURI() != r.Path {
		return nil, malformed("path", "%s would not be sent as written", strconv.Quote(trunc(r.Path, 128)))
	}
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, full.String(), body)
	if err != nil {
		return nil, err
	}
	if r.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// BuildList builds GET PREFIX/operations for a discovery. Defaults are
// filled in and every parameter is always present, in this order:
//
//	PREFIX/operations?query=Q&availability=A&limit=L&offset=O
//
// Q is percent-encoded: every byte but A-Za-z0-9-._~ becomes %XX (upper
// case hex), so a space is %20, never +.
func BuildList(prefix string, q ListQuery) (Request, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return Request{}, err
	}
	q, err := q.normalized()
	if err != nil {
		return Request{}, err
	}
	path := make([]byte, 0, len(prefix)+64+3*len(q.Query))
	path = append(path, prefix...)
	path = append(path, "/operations?query="...)
	path = appendPercent(path, q.Query)
	path = append(path, "&availability="...)
	path = append(path, q.Availability...)
	path = append(path, "&limit="...)
	path = strconv.AppendInt(path, int64(q.Limit), 10)
	path = append(path, "&offset="...)
	path = strconv.AppendInt(path, int64(q.Offset), 10)
	return Request{Method: http.MethodGet, Path: string(path)}, nil
}

// BuildDescribe builds GET PREFIX/operations/ID.
func BuildDescribe(prefix, id string) (Request, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return Request{}, err
	}
	if err := ValidateOperationID(id); err != nil {
		return Request{}, err
	}
	return Request{Method: http.MethodGet, Path: prefix + "/operations/" + id}, nil
}

// BuildInvoke builds POST PREFIX/invoke with the canonical encoding of b
// (see InvokeBody.Encode), refusing a body over MaxInvokeBody.
func BuildInvoke(prefix string, b InvokeBody) (Request, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return Request{}, err
	}
	body, err := b.Encode()
	if err != nil {
		return Request{}, err
	}
	return Request{Method: http.MethodPost, Path: prefix + "/invoke", Body: body}, nil
}

// Validate checks every field of an invocation: the three ids and that
// the arguments are one JSON object.
func (b InvokeBody) Validate() error {
	if err := ValidateRequestID(b.RequestID); err != nil {
		return err
	}
	if err := ValidateConversationID(b.ConversationID); err != nil {
		return err
	}
	if err := ValidateOperationID(b.OperationID); err != nil {
		return err
	}
	if len(bytes.TrimLeft(b.Arguments, " \t\r\n")) == 0 || bytes.TrimLeft(b.Arguments, " \t\r\n")[0] != '{' {
		return malformed("arguments", "must be a JSON object")
	}
	return nil
}

// Encode validates b and returns its canonical encoding: compact JSON
// with the keys sorted at every level (CanonicalJSON), at most
// MaxInvokeBody bytes. For example
//
//	{"arguments":{"expression":"1+1"},"conversationId":"c1","operationId":"calc.evaluate","requestId":"r1"}
func (b InvokeBody) Encode() ([]byte, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	// The arguments are canonicalized on their own first so that a
	// malformed value is reported as the arguments' fault, with their
	// offsets.
	args, err := CanonicalJSON(b.Arguments)
	if err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	out := make([]byte, 0, len(args)+len(b.ConversationID)+len(b.OperationID)+len(b.RequestID)+64)
	out = append(out, `{"arguments":`...)
	out = append(out, args...)
	out = append(out, `,"conversationId":`...)
	out = canonjson.AppendCanonicalString(out, b.ConversationID)
	out = append(out, `,"operationId":`...)
	out = canonjson.AppendCanonicalString(out, b.OperationID)
	out = append(out, `,"requestId":`...)
	out = canonjson.AppendCanonicalString(out, b.RequestID)
	out = append(out, '}')
	if err := ValidateInvokeSize(len(out), 0); err != nil {
		return nil, err
	}
	return out, nil
}

// appendPercent appends s with every byte but the RFC 3986 unreserved
// characters percent-encoded.
func appendPercent(out []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlnum(c) || c == '-' || c == '.' || c == '_' || c == '~' {
			out = append(out, c)
			continue
		}
		out = append(out, '%', hex[c>>4], hex[c&0xf])
	}
	return out
}

// jsonUnmarshalStrict decodes canonical JSON into v, refusing unknown
// fields and trailing data.
func jsonUnmarshalStrict(field string, canon []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return malformed(field, "%v", err)
	}
	return nil
}
