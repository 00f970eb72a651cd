// Package intern replaces the strings of decoded values with canonical
// copies (package unique), so that the names a large policy repository
// repeats in every document — hosts, tools, skills, regions, versions — are
// held once rather than once per document.
package intern

import (
	"reflect"
	"unique"
)

// MaxLen is the longest string interned. Names are short; what is longer
// (prompts, descriptions) is nearly always written once, and hashing it into
// the table would cost time and a table entry for nothing.
const MaxLen = 128

// Strings interns, in place, every string of 1 to MaxLen bytes reachable
// from ptr (a pointer) through pointers, interfaces holding pointers,
// exported struct fields, slices and arrays. Map keys and values are left
// as they are (they cannot be set in place). Interned strings are released
// by the garbage collector once nothing refers to them.
func Strings(ptr any) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	walk(v.Elem())
}

func walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() && v.Len() > 0 && v.Len() <= MaxLen {
			v.SetString(unique.Make(v.String()).Value())
		}
	case reflect.Pointer:
		if !v.IsNil() {
			walk(v.Elem())
		}
	case reflect.Interface:
		if !v.IsNil() && v.Elem().Kind() == reflect.Pointer {
			walk(v.Elem())
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				walk(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if k := v.Type().Elem().Kind(); k >= reflect.Bool && k <= reflect.Complex128 {
			return // no strings in a slice of numbers
		}
		for i := range v.Len() {
			walk(v.Index(i))
		}
	}
}
