package controller

import (
	"reflect"
	"testing"

	"github.com/stewardrt/steward/wire/msg"
)

// notJournaled are the fields of the host's answer that its result record
// does not carry, and why.
var notJournaled = map[string]string{
	"Ask": "the ticket of an answer awaiting approval: journaled as an awaiting record, never a result",
}

// TestResultOfCarriesTheAnswer: every field of msg.DispatchResult, each set,
// reaches the result record unchanged under its own name (the price of an
// invoke for a discovery only), or is one notJournaled names. A field added
// to the wire's answer fails here until resultOf says what becomes of it.
func TestResultOfCarriesTheAnswer(t *testing.T) {
	var r msg.DispatchResult
	fill(reflect.ValueOf(&r).Elem())
	res := reflect.ValueOf(resultOf(r, msg.KindList))
	answer := reflect.ValueOf(r)
	for i := range answer.NumField() {
		name := answer.Type().Field(i).Name
		if _, ok := notJournaled[name]; ok {
			continue
		}
		got := res.FieldByName(name)
		if !got.IsValid() || !reflect.DeepEqual(got.Interface(), answer.Field(i).Interface()) {
			t.Errorf("msg.DispatchResult.%s does not reach the result record (resultOf): carry it or say in notJournaled why not", name)
		}
	}
	if res := resultOf(r, msg.KindInvoke); res.CallPrice != nil {
		t.Errorf("an invoke's result records the host's call price %d", *res.CallPrice)
	}
}

// fill sets every field of v to a value other than its zero.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	default:
		panic("fill: a field of kind " + v.Kind().String())
	}
}
