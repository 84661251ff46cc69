package canonjson_test

import (
	"errors"
	"fmt"

	"github.com/stewardrt/steward/canonjson"
)

// A config file written by hand and its canonical form: members sorted,
// white space gone, the \u escape written as UTF-8, the number as written.
func ExampleCanonicalJSON() {
	canon, err := canonjson.CanonicalJSON([]byte("{\n  \"name\": \"caf\\u00e9\",\n  \"limits\": {\"b\": 2, \"a\": 1.50}\n}\n"))
	fmt.Println(string(canon), err)

	_, err = canonjson.CanonicalJSON([]byte(`{"a":1,"a":2}`))
	fmt.Println(errors.Is(err, canonjson.ErrInvalidJSON), err)
	// Output:
	// {"limits":{"a":1.50,"b":2},"name":"café"} <nil>
	// true canonjson: JSON at byte 7: duplicate key "a": canonjson: invalid JSON
}

// Two spellings of one config have one sum: the binding a journal records.
func ExampleSum256() {
	a, _ := canonjson.Sum256([]byte(`{"b":1,"a":[true,null]}`))
	b, _ := canonjson.Sum256([]byte("{ \"a\": [ true, null ],\n  \"b\": 1 }"))
	fmt.Println(a == b)
	// Output: true
}
