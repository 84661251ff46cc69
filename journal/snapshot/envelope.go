package snapshot

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/stewardrt/steward/internal/cborhead"
	"github.com/stewardrt/steward/journal"
)

const (
	// MaxBytes bounds a snapshot file. A daemon's live state is bounded
	// by what is under way and what ended since the last snapshot
	// (DESIGN.md section 13): megabytes, where 64 MiB leaves an order of
	// magnitude to spare and a Load at the bound still takes a fraction of
	// a second and four times the size in memory for a moment. A file past
	// it is refused by Write before anything is written, and by Load
	// before it is read; an owner whose state outgrows it goes on
	// replaying from its last snapshot, and says so.
	MaxBytes = 64 << 20

	// MaxFormatBytes bounds a format name: 1 to 64 of A-Za-z0-9._:/-,
	// the journal's kind rules.
	MaxFormatBytes = 64

	// envelopeVersion is the version of the envelope (not of the
	// owner's state, which is Snapshot.Version).
	envelopeVersion = 1

	// domain prefixes the content in the digest, so that a digest of a
	// snapshot is never the digest of anything else the owner's key
	// signs.
	domain = "steward-snapshot-v1\n"

	hashSize = sha256.Size
)

// Snapshot is an owner's live state bound to the journal mark it
// reflects: by construction, what a full replay of the records up to and
// including Mark.Seq gives.
type Snapshot struct {
	// Format names the owner's snapshot format ("steward-host-snapshot-v1"),
	// Version its version, which the owner reads to upgrade old states.
	Format  string
	Version uint64
	Mark    journal.Mark
	// State is the owner's own encoding of its live state.
	State []byte
}

// envelope is the file: deterministic CBOR of the content bytes, their
// digest and the owner's optional signature over the digest.
type envelope struct {
	Content []byte `cbor:"content"`
	SHA256  []byte `cbor:"sha256"`
	Sig     []byte `cbor:"sig,omitempty"`
}

// content is what the digest covers: the envelope's version, the owner's
// format and version, the mark and the state.
type content struct {
	V       uint64       `cbor:"v"`
	Format  string       `cbor:"format"`
	Version uint64       `cbor:"version"`
	Mark    journal.Mark `cbor:"mark"`
	State   []byte       `cbor:"state"`
}

var (
	encMode cbor.EncMode
	// bufMode encodes into a buffer the caller sized, so that a state is
	// copied once, not once per doubling of a buffer.
	bufMode cbor.UserBufferEncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	if bufMode, err = cbor.CoreDetEncOptions().UserBufferEncMode(); err != nil {
		panic(err)
	}
	strict := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		MaxNestedLevels:   4,
		MaxArrayElements:  16,
		MaxMapPairs:       16,
	}
	if decMode, err = strict.DecMode(); err != nil {
		panic(err)
	}
	// envelopeHead's premise: the file is its head and the content.
	env := envelope{Content: []byte{1, 2, 3}, SHA256: make([]byte, hashSize), Sig: []byte{4}}
	whole, err := encMode.Marshal(env)
	head, herr := envelopeHead(env.SHA256, env.Sig, len(env.Content))
	if err != nil || herr != nil || !bytes.Equal(whole, append(head, env.Content...)) {
		panic("snapshot: the envelope's content is not the last field of its encoding")
	}
}

// Digest is what a snapshot's SHA-256 field holds and its signature signs:
// SHA-256 over a domain prefix and the content bytes.
func digest(c []byte) []byte {
	h := sha256.New()
	h.Write([]byte(domain))
	h.Write(c)
	return h.Sum(nil)
}

// check holds a snapshot to what Write may write and Load may accept.
// Its errors are reasons, without the package prefix.
func check(s Snapshot) error {
	if err := checkFormat(s.Format); err != nil {
		return err
	}
	if s.Mark.Seq == 0 {
		return errors.New("the mark's seq is 0: a snapshot covers at least record 1")
	}
	if len(s.Mark.Head) != hashSize {
		return fmt.Errorf("the mark's head is %d bytes, want %d", len(s.Mark.Head), hashSize)
	}
	return nil
}

// checkFormat holds a format name to 1 to MaxFormatBytes of A-Za-z0-9._:/-.
func checkFormat(f string) error {
	if len(f) == 0 || len(f) > MaxFormatBytes {
		return fmt.Errorf("format name of %d bytes, not 1 to %d", len(f), MaxFormatBytes)
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '/' || c == '-') {
			return fmt.Errorf("format name %q has %q, outside A-Za-z0-9._:/-", f, c)
		}
	}
	return nil
}

// file is a snapshot file's bytes: head || content, kept apart so that
// the content (the state's size) is never copied to build the file.
type file struct {
	head, content []byte
}

func (f file) size() int { return len(f.head) + len(f.content) }

// encode returns the file of s, signed by sign when it is not nil.
func encode(s Snapshot, sign func(digest []byte) ([]byte, error)) (file, error) {
	var buf bytes.Buffer
	buf.Grow(len(s.State) + 1024)
	c := content{V: envelopeVersion, Format: s.Format, Version: s.Version, Mark: s.Mark, State: s.State}
	if err := bufMode.MarshalToBuffer(c, &buf); err != nil {
		return file{}, fmt.Errorf("snapshot: encode: %w", err)
	}
	f := file{content: buf.Bytes()}
	d := digest(f.content)
	var sig []byte
	if sign != nil {
		var err error
		if sig, err = sign(bytes.Clone(d)); err != nil {
			return file{}, fmt.Errorf("snapshot: sign: %w", err)
		}
		if len(sig) == 0 {
			return file{}, errors.New("snapshot: sign returned no signature")
		}
	}
	var err error
	if f.head, err = envelopeHead(d, sig, len(f.content)); err != nil {
		return file{}, err
	}
	if f.size() > MaxBytes {
		return file{}, tooLarge(int64(f.size()))
	}
	return f, nil
}

// envelopeHead is the deterministic encoding of an envelope up to its
// content's bytes. Deterministic order puts shorter keys first, so
// "content" is the last key and the file is envelopeHead || content: the
// encoding of the envelope with an empty content, less its last byte
// (0x40, the empty byte string), and the head of a byte string of n.
// init checks this against the encoder.
func envelopeHead(sha, sig []byte, n int) ([]byte, error) {
	e, err := encMode.Marshal(envelope{Content: []byte{}, SHA256: sha, Sig: sig})
	if err != nil {
		return nil, fmt.Errorf("snapshot: encode: %w", err)
	}
	if len(e) == 0 || e[len(e)-1] != 0x40 {
		return nil, fmt.Errorf("snapshot: the envelope's content is not its last field (%x)", e)
	}
	return cborhead.Append(e[:len(e)-1], cborhead.MajorBytes, uint64(n)), nil
}

// decode reads the file bytes b of a snapshot of format. It refuses
// anything that is not exactly the deterministic encoding of an envelope
// and its content (strictly decoded: no unknown field, no duplicate key,
// no indefinite length, no tag, bounded nesting and sizes), whose digest
// does not match, of another envelope version or format, or whose
// signature fails: verify, when not nil, is called with the snapshot, the
// digest and the signature (nil if there is none) and decides; a signed
// snapshot with no verify is refused.
func decode(b []byte, format string, verify func(s Snapshot, digest, sig []byte) error) (Snapshot, error) {
	if len(b) > MaxBytes {
		return Snapshot{}, tooLarge(int64(len(b)))
	}
	var env envelope
	if err := decMode.Unmarshal(b, &env); err != nil {
		return Snapshot{}, fmt.Errorf("does not decode: %w", err)
	}
	head, err := envelopeHead(env.SHA256, env.Sig, len(env.Content))
	if err != nil || len(b) != len(head)+len(env.Content) || !bytes.Equal(b[:len(head)], head) || !bytes.Equal(b[len(head):], env.Content) {
		return Snapshot{}, errors.New("not in deterministic encoding")
	}
	d := digest(env.Content)
	if !bytes.Equal(d, env.SHA256) {
		return Snapshot{}, errors.New("its SHA-256 does not match its content")
	}
	var c content
	if err := decMode.Unmarshal(env.Content, &c); err != nil {
		return Snapshot{}, fmt.Errorf("content does not decode: %w", err)
	}
	var re bytes.Buffer
	re.Grow(len(env.Content))
	if err := bufMode.MarshalToBuffer(c, &re); err != nil || !bytes.Equal(re.Bytes(), env.Content) {
		return Snapshot{}, errors.New("content not in deterministic encoding")
	}
	if c.V != envelopeVersion {
		return Snapshot{}, fmt.Errorf("envelope version %d, want %d", c.V, envelopeVersion)
	}
	if c.Format != format {
		return Snapshot{}, fmt.Errorf("format %q, want %q", c.Format, format)
	}
	s := Snapshot{Format: c.Format, Version: c.Version, Mark: c.Mark, State: c.State}
	if err := check(s); err != nil {
		return Snapshot{}, err
	}
	switch {
	case verify != nil:
		if err := verify(s, d, env.Sig); err != nil {
			return Snapshot{}, fmt.Errorf("signature: %w", err)
		}
	case env.Sig != nil:
		return Snapshot{}, errors.New("it is signed, and this owner takes no signed snapshot")
	}
	return s, nil
}
