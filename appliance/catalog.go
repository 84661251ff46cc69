package appliance

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/stewardrt/steward/oracleops"
)

// operation is one entry of the catalog: its descriptor, its compiled
// input schema, what runs it and how many invocations may run at once.
type operation struct {
	desc     oracleops.Descriptor
	schema   *oracleops.ArgumentSchema
	run      func(args json.RawMessage) (any, *refusal) // nil unless live_direct
	capacity int
	slots    chan struct{} // a token per running invocation
	encoded  []byte        // canonical JSON of desc, served as is
	haystack string        // lower-cased id, title, description and units, for search
}

// catalog is the appliance's fixed set of operations, sorted by id.
type catalog struct {
	ops  []*operation
	byID map[string]*operation
}

func example(title, args, result string) oracleops.Example {
	return oracleops.Example{Title: title, Arguments: json.RawMessage(args), Result: json.RawMessage(result)}
}

// definitions lists every operation. capacity is the default cap on
// concurrent invocations.
func definitions() []struct {
	d        oracleops.Descriptor
	run      func(json.RawMessage) (any, *refusal)
	capacity int
} {
	type def = struct {
		d        oracleops.Descriptor
		run      func(json.RawMessage) (any, *refusal)
		capacity int
	}
	return []def{{
		d: oracleops.Descriptor{
			ID:    "calc.evaluate",
			Title: "Evaluate an arithmetic expression exactly",
			Description: "Exact rational arithmetic over decimal numbers: + - * /, unary minus, parentheses and integer powers (^ or **, " +
				"right associative, binding tighter than unary minus, so -2^2 is -4). Numbers are decimals such as 365.25, .5 or 6.02e23. " +
				"Answers the reduced fraction and a decimal rounded half away from zero to `precision` digits after the point " +
				"(default 12, trailing zeros dropped), with `exact` telling whether the decimal equals the fraction. " +
				"Division by zero, a syntax error or a numerator or denominator past 4096 bits is refused with the 1-based " +
				"position of the error in the expression.",
			Availability: oracleops.AvailabilityLiveDirect,
			InputSchema: json.RawMessage(`{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type": "object",
				"properties": {
					"expression": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "e.g. 3 * 687 / 365.25"},
					"precision": {"type": "integer", "minimum": 0, "maximum": 100, "default": 12, "description": "digits after the decimal point"}
				},
				"required": ["expression"],
				"additionalProperties": false
			}`),
			Units:   []string{"1"},
			Sources: []string{"Go standard library math/big: arbitrary-precision rational numbers (big.Rat)"},
			Examples: []oracleops.Example{
				example("Mars years in Earth years, from days", `{"expression":"3 * 687 / 365.25"}`,
					`{"decimal":"5.642710472279","exact":false,"fraction":"2748/487","precision":12}`),
				example("Fractions and a negative power", `{"expression":"(1/3 + 1/6) * 2^-2","precision":4}`,
					`{"decimal":"0.125","exact":true,"fraction":"1/8","precision":4}`),
				example("Decimal sums are exact", `{"expression":"-2^2 + 0.1 + 0.2"}`,
					`{"decimal":"-3.7","exact":true,"fraction":"-37/10","precision":12}`),
			},
		},
		run: runCalc, capacity: 8,
	}, {
		d: oracleops.Descriptor{
			ID:    "units.convert",
			Title: "Convert a quantity between units",
			Description: "Exact conversion of length, mass, time, data size and temperature. Units are case-sensitive symbols: " +
				"SI prefixes (q to Q, u or µ for micro) on m, g, s and K (km, mg, µs, mK); SI multiples (kB, MB, Gbit) and IEC " +
				"binary prefixes (KiB, MiB, Gibit) on B and bit; and the named units listed in `units`. Temperatures are absolute " +
				"(°C, °F, °R, K). Ambiguous spellings such as KB or Mb are refused, never guessed. Converting between dimensions " +
				"is refused. Answers the exact fraction and a decimal rounded to 12 digits after the point.",
			Availability: oracleops.AvailabilityLiveDirect,
			InputSchema: json.RawMessage(`{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type": "object",
				"properties": {
					"value": {"type": "string", "maxLength": 100, "pattern": "^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$", "description": "a decimal number, e.g. 98.6 or 1e-3"},
					"from": {"type": "string", "minLength": 1, "maxLength": 32, "description": "unit symbol, e.g. mi"},
					"to": {"type": "string", "minLength": 1, "maxLength": 32, "description": "unit symbol, e.g. km"}
				},
				"required": ["value", "from", "to"],
				"additionalProperties": false
			}`),
			Units: []string{"m", "in", "ft", "yd", "mi", "nmi", "au", "ly", "Å", "g", "kg", "t", "lb", "oz", "st", "gr", "ct",
				"s", "min", "h", "d", "wk", "yr", "B", "bit", "K", "°C", "°F", "°R"},
			Sources: []string{
				"BIPM, The International System of Units (SI Brochure), 9th edition 2019, updated 2022: SI prefixes",
				"International yard and pound agreement (1959): 1 yd = 0.9144 m, 1 lb = 0.45359237 kg",
				"IAU 2012 Resolution B2: 1 au = 149597870700 m; IAU: Julian year = 365.25 d, light-year = c x Julian year",
				"IEC 80000-13:2008: binary prefixes Ki, Mi, Gi, ...",
				"NIST Special Publication 811 (2008), Appendix B: conversion factors",
			},
			Examples: []oracleops.Example{
				example("Miles to kilometres", `{"value":"1","from":"mi","to":"km"}`,
					`{"decimal":"1.609344","dimension":"length","exact":true,"fraction":"25146/15625","from":"mi","to":"km"}`),
				example("Body temperature", `{"value":"98.6","from":"°F","to":"°C"}`,
					`{"decimal":"37","dimension":"temperature","exact":true,"fraction":"37","from":"°F","to":"°C"}`),
				example("Binary to decimal data size", `{"value":"1","from":"GiB","to":"MB"}`,
					`{"decimal":"1073.741824","dimension":"data","exact":true,"fraction":"16777216/15625","from":"GiB","to":"MB"}`),
			},
		},
		run: runConvert, capacity: 8,
	}, {
		d: oracleops.Descriptor{
			ID:    "time.duration",
			Title: "Duration between two times",
			Description: "The exact elapsed time from one RFC 3339 time to another, in seconds (to the nanosecond) and in a " +
				"human form of days, hours, minutes and seconds; negative when `to` is before `from`. Days are 86,400 s: " +
				"leap seconds are not counted (POSIX time), and offsets are applied, so no time zone rules are involved.",
			Availability: oracleops.AvailabilityLiveDirect,
			InputSchema: json.RawMessage(`{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type": "object",
				"properties": {
					"from": {"type": "string", "format": "date-time", "maxLength": 64, "description": "RFC 3339, e.g. 2024-01-01T00:00:00Z"},
					"to": {"type": "string", "format": "date-time", "maxLength": 64, "description": "RFC 3339, e.g. 2024-03-01T12:30:00+01:00"}
				},
				"required": ["from", "to"],
				"additionalProperties": false
			}`),
			Units:   []string{"s", "min", "h", "d"},
			Sources: []string{"RFC 3339: Date and Time on the Internet: Timestamps", "IEEE Std 1003.1 (POSIX), 4.16 Seconds Since the Epoch"},
			Examples: []oracleops.Example{
				example("A leap-year January and February", `{"from":"2024-01-01T00:00:00Z","to":"2024-03-01T00:00:00Z"}`,
					`{"human":"60 days","negative":false,"seconds":5184000}`),
				example("Across offsets, with a fraction", `{"from":"2024-06-30T23:59:58.5+02:00","to":"2024-07-01T01:02:03Z"}`,
					`{"human":"3 hours 2 minutes 4.5 seconds","negative":false,"seconds":10924.5}`),
				example("Backwards", `{"from":"2024-01-01T00:01:00Z","to":"2024-01-01T00:00:00Z"}`,
					`{"human":"-1 minute","negative":true,"seconds":-60}`),
			},
		},
		run: runDuration, capacity: 8,
	}, {
		d: oracleops.Descriptor{
			ID:           "text.sha256",
			Title:        "SHA-256 of a text",
			Description:  "The SHA-256 digest (lower-case hex) of the UTF-8 bytes of a text, and how many bytes were hashed.",
			Availability: oracleops.AvailabilityLiveDirect,
			InputSchema: json.RawMessage(`{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type": "object",
				"properties": {"text": {"type": "string", "maxLength": 65536}},
				"required": ["text"],
				"additionalProperties": false
			}`),
			Units:   []string{"B"},
			Sources: []string{"NIST FIPS 180-4: Secure Hash Standard (SHS)"},
			Examples: []oracleops.Example{
				example("The FIPS 180-4 test vector", `{"text":"abc"}`,
					`{"bytes":3,"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}`),
				example("The empty text", `{"text":""}`,
					`{"bytes":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`),
				example("Text is hashed as UTF-8", `{"text":"é"}`,
					`{"bytes":2,"sha256":"4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c"}`),
			},
		},
		run: runSHA256, capacity: 4,
	}, {
		d: oracleops.Descriptor{
			ID:    "reference.si_prefixes",
			Title: "SI and IEC prefixes (reference text)",
			Description: "Text only: the answer is this description, so there is nothing to invoke. SI prefixes: " +
				"quecto q 10^-30, ronto r 10^-27, yocto y 10^-24, zepto z 10^-21, atto a 10^-18, femto f 10^-15, pico p 10^-12, " +
				"nano n 10^-9, micro µ 10^-6, milli m 10^-3, centi c 10^-2, deci d 10^-1, deca da 10^1, hecto h 10^2, kilo k 10^3, " +
				"mega M 10^6, giga G 10^9, tera T 10^12, peta P 10^15, exa E 10^18, zetta Z 10^21, yotta Y 10^24, ronna R 10^27, " +
				"quetta Q 10^30. IEC binary prefixes: kibi Ki 2^10, mebi Mi 2^20, gibi Gi 2^30, tebi Ti 2^40, pebi Pi 2^50, " +
				"exbi Ei 2^60, zebi Zi 2^70, yobi Yi 2^80.",
			Availability: oracleops.AvailabilityTextOnly,
			InputSchema: json.RawMessage(`{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type": "object",
				"properties": {"prefix": {"type": "string", "minLength": 1, "maxLength": 2}},
				"required": ["prefix"],
				"additionalProperties": false
			}`),
			Units:   []string{"1"},
			Sources: []string{"BIPM SI Brochure, 9th edition 2019, updated 2022, Table 7", "IEC 80000-13:2008, clause 4"},
			Examples: []oracleops.Example{
				example("Kilo, as read from the description", `{"prefix":"k"}`, `{"factor":"1000","name":"kilo"}`),
				example("Kibi, as read from the description", `{"prefix":"Ki"}`, `{"factor":"1024","name":"kibi"}`),
			},
		},
	}, {
		d: oracleops.Descriptor{
			ID:    "units.currency",
			Title: "Convert between currencies",
			Description: "Unavailable: converting currencies needs current exchange rates from outside, and this appliance " +
				"has no network and no rate source. Listed so that a caller sees the limit instead of guessing; the examples " +
				"show the shape an answer would have, with placeholders in angle brackets.",
			Availability: oracleops.AvailabilityUnavailable,
			InputSchema: json.RawMessage(`{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type": "object",
				"properties": {
					"amount": {"type": "string", "maxLength": 64, "pattern": "^[0-9]+([.][0-9]+)?$"},
					"from": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 code"},
					"to": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 code"}
				},
				"required": ["amount", "from", "to"],
				"additionalProperties": false
			}`),
			Units:   []string{"ISO 4217"},
			Sources: []string{"ISO 4217: codes for the representation of currencies"},
			Examples: []oracleops.Example{
				example("Euros to US dollars (shape only)", `{"amount":"10","from":"EUR","to":"USD"}`,
					`{"amount":"<converted amount>","as_of":"<RFC 3339 time of the rate>","rate":"<rate used>"}`),
				example("Yen to pounds (shape only)", `{"amount":"2500","from":"JPY","to":"GBP"}`,
					`{"amount":"<converted amount>","as_of":"<RFC 3339 time of the rate>","rate":"<rate used>"}`),
			},
		},
	}}
}

// newCatalog validates and compiles every definition. capacity, when
// positive, replaces every operation's own cap (tests use 1).
func newCatalog(capacity int) (*catalog, error) {
	c := &catalog{byID: map[string]*operation{}}
	for _, def := range definitions() {
		d := def.d
		// The descriptor is served in canonical form, schema included.
		schema, err := oracleops.CanonicalJSON(d.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("operation %s: %w", d.ID, err)
		}
		d.InputSchema = schema
		for i := range d.Examples {
			if d.Examples[i].Arguments, err = oracleops.CanonicalJSON(d.Examples[i].Arguments); err != nil {
				return nil, fmt.Errorf("operation %s: example %d: %w", d.ID, i, err)
			}
			if d.Examples[i].Result, err = oracleops.CanonicalJSON(d.Examples[i].Result); err != nil {
				return nil, fmt.Errorf("operation %s: example %d: %w", d.ID, i, err)
			}
		}
		if err := oracleops.ValidateDescriptor(d); err != nil {
			return nil, fmt.Errorf("operation %s: %w", d.ID, err)
		}
		if (def.run != nil) != (d.Availability == oracleops.AvailabilityLiveDirect) {
			return nil, fmt.Errorf("operation %s: runs only if live_direct", d.ID)
		}
		op := &operation{desc: d, run: def.run, capacity: def.capacity}
		if capacity > 0 {
			op.capacity = capacity
		}
		op.slots = make(chan struct{}, max(op.capacity, 1))
		if op.schema, err = oracleops.CompileSchema(d.InputSchema); err != nil {
			return nil, fmt.Errorf("operation %s: %w", d.ID, err)
		}
		if op.encoded, err = encode(d); err != nil {
			return nil, fmt.Errorf("operation %s: %w", d.ID, err)
		}
		op.haystack = strings.ToLower(strings.Join(append([]string{d.ID, d.Title, d.Description}, d.Units...), "\n"))
		if _, dup := c.byID[d.ID]; dup {
			return nil, fmt.Errorf("operation %s defined twice", d.ID)
		}
		c.byID[d.ID] = op
		c.ops = append(c.ops, op)
	}
	slices.SortFunc(c.ops, func(a, b *operation) int { return strings.Compare(a.desc.ID, b.desc.ID) })
	return c, nil
}

// search answers a discovery: operations whose id, title, description or
// units contain every blank-separated term of the query (case-insensitive),
// with the availability asked for, a page of them from offset.
func (c *catalog) search(q oracleops.ListQuery) (page []*operation, nextOffset *int) {
	terms := strings.Fields(strings.ToLower(q.Query))
	seen := 0
	for _, op := range c.ops {
		if q.Availability != oracleops.AvailabilityAny && op.desc.Availability != q.Availability {
			continue
		}
		if !matchesAll(op.haystack, terms) {
			continue
		}
		if seen >= q.Offset {
			if len(page) == q.Limit {
				n := seen
				return page, &n
			}
			page = append(page, op)
		}
		seen++
	}
	return page, nil
}

func matchesAll(haystack string, terms []string) bool {
	for _, t := range terms {
		if !strings.Contains(haystack, t) {
			return false
		}
	}
	return true
}
