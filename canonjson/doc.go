// Package canonjson is steward's one canonical form of JSON: the bytes that
// are hashed, signed and journaled wherever a JSON value must have exactly
// one spelling (a config's binding, an invocation body, a tool's arguments).
// It imports nothing of steward's, so that every package that needs the
// form (journal's callers, oracleops, the installer) can share it without
// depending on each other.
//
// The form (CanonicalJSON): compact, object members sorted by the bytes of
// their UTF-8 keys at every level, strings as UTF-8 with only the escapes
// JSON requires, numbers exactly as written. Invalid JSON, invalid UTF-8,
// lone surrogates, duplicate keys and nesting deeper than MaxJSONDepth are
// refused with a *JSONError (errors.Is ErrInvalidJSON), never repaired.
// Sum256 is the SHA-256 of the canonical form (see the examples).
package canonjson
