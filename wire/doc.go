// Package wire is steward's transport: signed CBOR frames over Unix sockets,
// the COSE signatures and keys behind them, authenticated channels with
// request multiplexing, and the socket-level checks (peer credentials, safe
// paths, connection caps) made on every connection. It imports nothing of
// steward's; the messages carried on it live in wire/msg.
//
// # Frames
//
// A frame is a 4-byte big-endian length N followed by N bytes: one tagged
// COSE_Sign1 message. N is checked against the bound before anything is
// written and, on reading, before the body is allocated or read: request
// frames MaxRequestFrame (262,144) bytes, reply frames MaxReplyFrame
// (1,048,576). The bound counts the COSE message, not the prefix.
//
// # CBOR
//
// Marshal writes core deterministic CBOR (RFC 8949 section 4.2.1). Unmarshal
// is strict: exactly one item, no trailing bytes, no indefinite lengths,
// valid UTF-8, no duplicate map keys, no unknown struct fields, no wrong
// types, nesting at most MaxNesting (16) levels counted from the outermost
// item (each array or map is a level, and each tag that directly encloses
// another tag), and at most MaxEntries (4,096) entries in
// any one array or map. Marshal refuses what Unmarshal would refuse for
// nesting or entries, so a sender learns of a bound before its peer does.
// Missing fields are not an error by themselves; each decoder checks the
// fields it needs.
//
// # COSE profile
//
// Per-call signatures are COSE_Sign1 (RFC 9052, tag 18):
//
//	18([protected: bstr .cbor {1: -8, 4: kid}, unprotected: {}, payload: bstr, signature: bstr(64)])
//
// signed with Ed25519 over the Sig_structure
//
//	["Signature1", protected, h'', payload]   (external_aad is empty)
//
// The protected header carries exactly alg (EdDSA, -8) and kid, nothing
// else; the unprotected header is the empty map; the payload is attached.
// The parser accepts only shortest-form heads. A kid is the first 16 bytes of SHA-256 of the signer's public COSE_Key,
// which is {1: 1 (OKP), -1: 6 (Ed25519), -2: x} in deterministic CBOR (with
// -4: d, the 32-byte seed, added in a private key file). A receiver looks
// the kid up among the keys pinned for that socket and role (a Keyring); an
// unknown kid is refused before any signature is checked.
//
// Long-lived authority is signed with SignHybrid as a COSE_Sign (tag 98):
//
//	98([h'', {}, payload, [[bstr .cbor {1: -8, 4: ed-kid}, {}, ed-sig],
//	                      [bstr .cbor {1: -49, 4: ml-kid}, {}, ml-dsa-sig]]])
//
// Each signature is over the Sig_structure
//
//	["Signature", h'' (body protected), its protected header, h'' (external_aad), payload]
//
// ML-DSA-65 (draft-ietf-cose-dilithium, alg -49) is pure, hedged, with an
// empty context. VerifyHybrid needs both signatures, in
// that order, with the two kids of the expected key. A hybrid public key is
// the COSE_KeySet [Ed25519 COSE_Key, {1: 7 (AKP), 3: -49, -1: pub}] (with
// -2: priv, the 32-byte ML-DSA seed, in a private key file); its KID is the
// Ed25519 half's, and the ML-DSA kid is derived the same way from the AKP key.
//
// Interoperability of both profiles is tested against veraison/go-cose.
//
// # Envelope
//
// The signed payload of every frame is the deterministic CBOR map
//
//	{"v": 1, "t": TYPE, "ch": CHANNEL, "seq": N, "id": CORRELATION, "at": UNIX_MS, "body": BODY}
//
// "at" is the sender's clock, for logs only: freshness comes from the channel.
//
// # Handshake
//
// After connecting, the dialler sends hello{nonce: 32 random bytes, role,
// purpose}; the listener checks the signature against the keys pinned for the
// dialler, the role (ChannelConfig.PeerRole, if set) and the purpose
// (ChannelConfig.Purpose, if set) and answers hello-ok{nonce: 32 random
// bytes, role}, or refused{reason} and closes. The dialler checks hello-ok's
// signature and the listener's role the same way. Handshake frames carry seq
// 0 and an empty ch. Each side then pins the one key that signed the other's
// handshake frame: every later frame must be signed by it.
//
// # Channel id
//
// CHANNEL is SHA-256 over six fields, each written as a 4-byte big-endian
// length followed by its bytes, in this order:
//
//	"steward wire channel v1", dialler nonce, listener nonce, dialler role, listener role, socket path
//
// Both sides must use the same path string. Every frame after the handshake
// carries the channel id and a per-direction sequence number starting at 1
// and increasing by exactly one. A frame for another channel (ErrCrossChannel),
// an old sequence number (ErrReplay) or a skipped one (ErrReorder) is refused
// and the connection closed. A captured hello-ok replayed to a new dialler
// yields a channel id that the attacker cannot sign frames for.
//
// # Multiplexing
//
// A Client sends many requests on one channel, each with a fresh id, and one
// reader goroutine hands each reply to the call with the same id. Serve runs
// each request in its own goroutine, at most MaxInFlight at once (past that
// it stops reading: requests wait, none is dropped), and replies with the
// request's id.
//
// # Sockets
//
// Listen binds in a fresh 0700 directory, sets the socket's mode, listens,
// and only then links the socket to its path, so the mode holds from the
// first connection. Accept reads SO_PEERCRED, asks ListenConfig.Allow, and
// applies MaxConns and MaxPerUID; a connection it turns away is answered
// (RefuseFrame: a signed refused frame) and logged before it is closed.
// Dial checks the path (CheckSocketPath: a socket owned by the expected
// account, every ancestor owned by root, us or the peer and not group or
// world writable unless root-owned and sticky) and then the listener's
// SO_PEERCRED UID.
//
// # Key files
//
// Private key files are COSE_Key (or COSE_KeySet) files, mode 0600, created
// O_EXCL|O_NOFOLLOW and fsync'd in a directory closed to group and other.
// Reading refuses a symlink, a non-regular file, a file or directory owned by
// another account, and any group or other access; every error names the file.
package wire
