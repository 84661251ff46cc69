package oracleops

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrInvalidArguments is wrapped by every *ArgumentsError.
var ErrInvalidArguments = errors.New("arguments do not match the input schema")

// Bounds on what a schema failure reports, so that a hostile schema or
// argument cannot make an error grow without bound.
const (
	MaxViolations       = 16  // violations listed in an ArgumentsError
	MaxViolationMessage = 256 // bytes of one violation's message
	maxErrorText        = 1024
	schemaCacheSize     = 1024
)

// schemaURL is the name a compiled input schema is known by. Nothing is
// ever loaded from it: every external reference is refused.
const schemaURL = "https://stewardrt.invalid/oracle-operations-v1/input-schema.json"

// Violation is one way the arguments fail the input schema.
type Violation struct {
	InstanceLocation string `json:"instanceLocation"` // JSON pointer into the arguments
	KeywordLocation  string `json:"keywordLocation"`  // JSON pointer into the schema
	Message          string `json:"message"`
}

// ArgumentsError lists the violations (at most MaxViolations) of arguments
// against an input schema. Omitted counts the ones left off.
type ArgumentsError struct {
	Violations []Violation
	Omitted    int
}

// Error returns one line: the first violations, capped at about 1 KiB.
func (e *ArgumentsError) Error() string {
	var sb strings.Builder
	sb.WriteString("arguments do not match the input schema")
	for i, v := range e.Violations {
		sep := ": "
		if i > 0 {
			sep = "; "
		}
		part := sep + "at " + quotePointer(v.InstanceLocation) + ": " + v.Message
		if sb.Len()+len(part) > maxErrorText {
			fmt.Fprintf(&sb, "; and %d more", len(e.Violations)-i+e.Omitted)
			return sb.String()
		}
		sb.WriteString(part)
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&sb, "; and %d more", e.Omitted)
	}
	return sb.String()
}

// Unwrap returns ErrInvalidArguments.
func (e *ArgumentsError) Unwrap() error { return ErrInvalidArguments }

func quotePointer(p string) string {
	if p == "" {
		return "(root)"
	}
	return "'" + p + "'"
}

// ArgumentSchema is a compiled input schema.
type ArgumentSchema struct {
	schema *jsonschema.Schema
}

// refuseLoader refuses to load any schema document: a descriptor comes
// from another account, and its schema must not make the reader open
// files or reach the network. Only the JSON Schema metaschemas, which the
// library embeds, are available.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema references are not allowed: %s", trunc(url, 128))
}

// CompileSchema compiles an input schema (JSON Schema 2020-12 unless it
// names another draft in $schema) with format assertions on. The schema
// must be a JSON object of at most MaxSchemaBytes; external $refs are
// refused.
func CompileSchema(schema []byte) (*ArgumentSchema, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, outOfBounds("input_schema", "%d bytes exceeds the bound of %d", len(schema), MaxSchemaBytes)
	}
	canon, err := CanonicalJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	return compileCanonical(canon)
}

func compileCanonical(canon []byte) (*ArgumentSchema, error) {
	if canon[0] != '{' {
		return nil, malformed("input_schema", "must be a JSON object")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(canon))
	if err != nil {
		return nil, malformed("input_schema", "%v", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, malformed("input_schema", "%s", firstLine(err.Error()))
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, malformed("input_schema", "%s", firstLine(err.Error()))
	}
	return &ArgumentSchema{schema: sch}, nil
}

// Validate checks args (one JSON value) against the schema. A failure is
// an *ArgumentsError (errors.Is ErrInvalidArguments); args that are not
// valid JSON give a *FieldError.
func (s *ArgumentSchema) Validate(args []byte) error {
	canon, err := CanonicalJSON(args)
	if err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(canon))
	if err != nil {
		return malformed("arguments", "%v", err)
	}
	err = s.schema.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return malformed("arguments", "%s", firstLine(err.Error()))
	}
	ae := &ArgumentsError{}
	collectViolations(ve, ae)
	return ae
}

// collectViolations walks the error tree and keeps its leaves, which are
// the concrete failures; the inner nodes only say "allOf failed" and such.
func collectViolations(ve *jsonschema.ValidationError, ae *ArgumentsError) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collectViolations(c, ae)
		}
		return
	}
	if len(ae.Violations) >= MaxViolations {
		ae.Omitted++
		return
	}
	msg := firstLine(ve.Error())
	// A leaf's Error() is "at 'LOC': MESSAGE"; keep the message part, the
	// location is reported on its own.
	if i := strings.Index(msg, "': "); strings.HasPrefix(msg, "at '") && i >= 0 {
		msg = msg[i+3:]
	}
	ae.Violations = append(ae.Violations, Violation{
		InstanceLocation: pointer(ve.InstanceLocation),
		KeywordLocation:  keywordLocation(ve),
		Message:          trunc(msg, MaxViolationMessage),
	})
}

// keywordLocation is the JSON pointer of the failing keyword from the root
// of the schema: the fragment of the subschema's URL, then the keyword.
func keywordLocation(ve *jsonschema.ValidationError) string {
	frag := ""
	if i := strings.IndexByte(ve.SchemaURL, '#'); i >= 0 {
		frag = ve.SchemaURL[i+1:]
		if u, err := url.PathUnescape(frag); err == nil {
			frag = u
		}
	}
	return trunc(frag+pointer(ve.ErrorKind.KeywordPath()), MaxViolationMessage)
}

// pointer encodes tokens as a JSON pointer (RFC 6901).
func pointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		sb.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return trunc(sb.String(), MaxViolationMessage)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return trunc(s, MaxViolationMessage)
}

// schemaCache keeps compiled schemas by the SHA-256 of their canonical
// encoding. When it holds schemaCacheSize entries it is emptied: a bound
// that needs no bookkeeping, and recompiling is only a cost, never a
// change of answer.
var schemaCache struct {
	sync.Mutex
	m map[[32]byte]*ArgumentSchema
}

func cachedSchema(schema []byte) (*ArgumentSchema, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, outOfBounds("input_schema", "%d bytes exceeds the bound of %d", len(schema), MaxSchemaBytes)
	}
	canon, err := CanonicalJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	key := sha256.Sum256(canon)
	schemaCache.Lock()
	s := schemaCache.m[key]
	schemaCache.Unlock()
	if s != nil {
		return s, nil
	}
	s, err = compileCanonical(canon)
	if err != nil {
		return nil, err
	}
	schemaCache.Lock()
	if schemaCache.m == nil || len(schemaCache.m) >= schemaCacheSize {
		schemaCache.m = make(map[[32]byte]*ArgumentSchema)
	}
	schemaCache.m[key] = s
	schemaCache.Unlock()
	return s, nil
}

// ValidateArguments checks args against a descriptor's input schema. The
// compiled schema is cached by the SHA-256 of its canonical encoding, so a
// descriptor's schema is compiled once.
func ValidateArguments(schema, args []byte) error {
	s, err := cachedSchema(schema)
	if err != nil {
		return err
	}
	return s.Validate(args)
}
