// Package oracleops is oracle-operations-v1: the types, bounds, request
// building and validation shared by everything that speaks to an
// application — the host (operator), the controller and the reference
// application. It imports nothing of steward's but canonjson, the one
// owner of the canonical JSON form its bodies and hashes are in.
//
// # Protocol
//
// HTTP/1.1 over the application's Unix socket, under the route's API
// PREFIX ("" or "/seg/seg", see ValidatePrefix):
//
//	GET  PREFIX/operations?query=Q&availability=A&limit=L&offset=O
//	     → {"limits":{"request_bytes":N},"next_offset":N|null,"operations":[DESCRIPTOR...]}
//	GET  PREFIX/operations/ID
//	     → DESCRIPTOR
//	POST PREFIX/invoke
//	     {"arguments":{...},"conversationId":C,"operationId":O,"requestId":R}
//	     → the operation's JSON answer
//
// A DESCRIPTOR is {"availability","description","examples","id",
// "input_schema","sources","title","units"} (see Descriptor); only
// live_direct operations can be invoked. The availability filter A is one
// of live_direct (the default), text_only, unavailable or any.
//
// # Bounds
//
// Search text at most MaxSearchBytes (256) UTF-8 bytes; limit MinLimit (1)
// to MaxLimit (50), default DefaultLimit (10); offset 0 to MaxOffset;
// request and conversation ids 1 to MaxIDLen (80) bytes of A-Za-z0-9_-;
// operation ids 1 to MaxOperationIDLen (160) bytes of A-Za-z0-9._-, the
// first a letter or digit; the encoded invocation body at most
// MaxInvokeBody (65,536) bytes and not more than the application's
// limits.request_bytes; JSON nesting at most MaxJSONDepth (32). Descriptor
// fields have bounds of their own (MaxTitleBytes and the rest). Every
// failed check is a *FieldError naming the field and the bound, e.g.
//
//	requestId: 81 bytes exceeds the bound of 80
//
// and wraps ErrOutOfBounds or ErrMalformed.
//
// # Canonical bytes
//
// The Build functions give the one encoding of a call, so that the same
// call always has the same bytes and the same SHA-256 on both sides of the
// custody boundary:
//
//   - a discovery always carries all four parameters in the order query,
//     availability, limit, offset, defaults filled in, the search text
//     percent-encoded (every byte but A-Za-z0-9-._~ as %XX, upper case);
//   - an invocation body is CanonicalJSON: compact, object keys sorted at
//     every level by their UTF-8 bytes, numbers exactly as written, strings
//     escaped only where JSON requires it ('"', '\\', U+0000 to U+001F, the
//     latter as \b \f \n \r \t or \u00xx), no HTML escaping;
//   - Request.SHA256 is SHA-256(METHOD " " PATH "\n" BODY).
//
// For example, BuildInvoke("/v1", InvokeBody{Arguments: {"expression":"1+1"},
// ConversationID: "c1", OperationID: "calc.evaluate", RequestID: "r1"})
// is POST /v1/invoke with the body
//
//	{"arguments":{"expression":"1+1"},"conversationId":"c1","operationId":"calc.evaluate","requestId":"r1"}
//
// # Arguments
//
// ValidateArguments checks arguments against a descriptor's input_schema
// with github.com/santhosh-tekuri/jsonschema/v6 (JSON Schema 2020-12 by
// default, format assertions on). Schemas are compiled once and cached by
// the SHA-256 of their canonical bytes; external references ($ref to a
// file or URL) are refused, since a schema comes from another account.
package oracleops
