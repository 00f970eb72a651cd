package strictjson

import (
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	type doc struct {
		A int `json:"a"`
	}
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"one object", `{"a":1}`, true},
		{"whitespace after", "{\"a\":1} \n\t", true},
		{"stray brace after", `{"a":1}}`, false},
		{"stray bracket after", `{"a":1}]`, false},
		{"a second value", `{"a":1} {}`, false},
		{"a comma after", `{"a":1},`, false},
		{"unknown member", `{"a":1,"b":2}`, false},
		{"not JSON", `{"a":`, false},
	} {
		var d doc
		err := Decode([]byte(tc.in), &d)
		if (err == nil) != tc.ok {
			t.Errorf("%s: got %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	var d doc
	if err := Decode([]byte(`{"a":1}}`), &d); !errors.Is(err, ErrTrailingData) {
		t.Errorf("stray brace: got %v, want ErrTrailingData", err)
	}
}
