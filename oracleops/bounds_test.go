package oracleops

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestIDBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validate func(string) error
		field    string
		max      int
	}{
		{"request", ValidateRequestID, "requestId", MaxIDLen},
		{"conversation", ValidateConversationID, "conversationId", MaxIDLen},
		{"operation", ValidateOperationID, "operationId", MaxOperationIDLen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.validate("a"); err != nil {
				t.Fatalf("1 byte: %v", err)
			}
			if err := tc.validate(strings.Repeat("a", tc.max)); err != nil {
				t.Fatalf("%d bytes (at the bound): %v", tc.max, err)
			}
			err := tc.validate(strings.Repeat("a", tc.max+1))
			want := tc.field + ": " + itoa(tc.max+1) + " bytes exceeds the bound of " + itoa(tc.max)
			if err == nil || err.Error() != want || !errors.Is(err, ErrOutOfBounds) {
				t.Fatalf("one past: got %v, want %q wrapping ErrOutOfBounds", err, want)
			}
			err = tc.validate("")
			want = tc.field + ": empty, must be 1 to " + itoa(tc.max) + " bytes"
			if err == nil || err.Error() != want || !errors.Is(err, ErrOutOfBounds) {
				t.Fatalf("empty: got %v, want %q", err, want)
			}
		})
	}
}

func TestIDAlphabets(t *testing.T) {
	ok := []struct {
		f  func(string) error
		id string
	}{
		{ValidateRequestID, "AZaz09_-"},
		{ValidateRequestID, "-leading-dash"},
		{ValidateConversationID, "_x"},
		{ValidateOperationID, "calc.evaluate"},
		{ValidateOperationID, "9a._-Z"},
	}
	for _, c := range ok {
		if err := c.f(c.id); err != nil {
			t.Errorf("%q: %v", c.id, err)
		}
	}
	bad := []struct {
		f    func(string) error
		id   string
		want string
	}{
		{ValidateRequestID, "a.b", `requestId: byte '.' at offset 1 is not one of A-Za-z0-9_-`},
		{ValidateRequestID, "a b", `requestId: byte ' ' at offset 1 is not one of A-Za-z0-9_-`},
		{ValidateConversationID, "é", `conversationId: byte 0xc3 at offset 0 is not one of A-Za-z0-9_-`},
		{ValidateOperationID, ".hidden", `operationId: first byte '.' is not a letter or digit`},
		{ValidateOperationID, "-x", `operationId: first byte '-' is not a letter or digit`},
		{ValidateOperationID, "a/b", `operationId: byte '/' at offset 1 is not one of A-Za-z0-9._-`},
		{ValidateOperationID, "a\x00", `operationId: byte 0x00 at offset 1 is not one of A-Za-z0-9._-`},
	}
	for _, c := range bad {
		err := c.f(c.id)
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: got %v, want %q", c.id, err, c.want)
		}
	}
}

func TestQueryBound(t *testing.T) {
	// 256 bytes of multi-byte text: 128 two-byte runes.
	at := strings.Repeat("é", MaxSearchBytes/2)
	if err := ValidateQuery(at); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	err := ValidateQuery(at + "x")
	if err == nil || err.Error() != "query: 257 bytes exceeds the bound of 256" || !errors.Is(err, ErrOutOfBounds) {
		t.Fatalf("one past: %v", err)
	}
	if err := ValidateQuery(""); err != nil {
		t.Fatalf("empty: %v", err)
	}
	if err := ValidateQuery("\xff"); err == nil || err.Error() != "query: not valid UTF-8" {
		t.Fatalf("invalid UTF-8: %v", err)
	}
}

func TestLimitAndOffsetBounds(t *testing.T) {
	for _, n := range []int{1, 10, 50} {
		if err := ValidateLimit(n); err != nil {
			t.Errorf("limit %d: %v", n, err)
		}
	}
	if err := ValidateLimit(51); err == nil || err.Error() != "limit: 51 exceeds the bound of 50" || !errors.Is(err, ErrOutOfBounds) {
		t.Errorf("limit 51: %v", err)
	}
	if err := ValidateLimit(0); err == nil || err.Error() != "limit: 0 is below the minimum of 1" {
		t.Errorf("limit 0: %v", err)
	}
	if err := ValidateOffset(MaxOffset); err != nil {
		t.Errorf("offset at bound: %v", err)
	}
	if err := ValidateOffset(MaxOffset + 1); err == nil || err.Error() != "offset: 1000001 exceeds the bound of 1000000" {
		t.Errorf("offset past bound: %v", err)
	}
	if err := ValidateOffset(-1); err == nil || err.Error() != "offset: -1 is below the minimum of 0" {
		t.Errorf("offset -1: %v", err)
	}
}

func TestInvokeSizeBound(t *testing.T) {
	if err := ValidateInvokeSize(MaxInvokeBody, 0); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	err := ValidateInvokeSize(MaxInvokeBody+1, 0)
	if err == nil || err.Error() != "invocation body: 65537 bytes exceeds the bound of 65536" || !errors.Is(err, ErrOutOfBounds) {
		t.Fatalf("one past: %v", err)
	}
	// The application's own smaller limit wins; a larger one does not.
	if err := ValidateInvokeSize(1000, 1000); err != nil {
		t.Fatalf("at the application bound: %v", err)
	}
	if err := ValidateInvokeSize(1001, 1000); err == nil || err.Error() != "invocation body: 1001 bytes exceeds the bound of 1000" {
		t.Fatalf("past the application bound: %v", err)
	}
	if err := ValidateInvokeSize(MaxInvokeBody+1, 1<<20); err == nil {
		t.Fatal("an application limit above MaxInvokeBody raised the bound")
	}
}

func TestPrefix(t *testing.T) {
	for _, p := range []string{"", "/v1", "/a/b.c/d~e_f-g", "/" + strings.Repeat("a", MaxPrefixLen-1)} {
		if err := ValidatePrefix(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	bad := map[string]string{
		"/" + strings.Repeat("a", MaxPrefixLen): "prefix: 129 bytes exceeds the bound of 128",
		"v1":                                    "prefix: must start with /",
		"/":                                     `prefix: segment "" at offset 1 is empty, . or ..`,
		"/v1/":                                  `prefix: segment "" at offset 4 is empty, . or ..`,
		"/a//b":                                 `prefix: segment "" at offset 3 is empty, . or ..`,
		"/a/../b":                               `prefix: segment ".." at offset 3 is empty, . or ..`,
		"/./a":                                  `prefix: segment "." at offset 1 is empty, . or ..`,
		"/a?b":                                  `prefix: byte '?' at offset 2 is not one of A-Za-z0-9._~-/`,
		"/a%2f":                                 `prefix: byte '%' at offset 2 is not one of A-Za-z0-9._~-/`,
	}
	for p, want := range bad {
		if err := ValidatePrefix(p); err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %q", p, err, want)
		}
	}
}

func TestAvailabilityFilter(t *testing.T) {
	for _, a := range []Availability{AvailabilityLiveDirect, AvailabilityTextOnly, AvailabilityUnavailable, AvailabilityAny} {
		if err := ValidateAvailabilityFilter(a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	err := ValidateAvailabilityFilter("live")
	if err == nil || err.Error() != `availability: "live" is not one of live_direct, text_only, unavailable, any` {
		t.Errorf("live: %v", err)
	}
	if AvailabilityAny.Valid() {
		t.Error("any is a filter, not a descriptor availability")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
