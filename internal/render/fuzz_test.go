package render

import (
	"bytes"
	"testing"

	gojcs "github.com/gowebpki/jcs"
)

// FuzzCanonical compares this package's canonicalizer with
// github.com/gowebpki/jcs on every JSON text both accept.
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"b":1,"a":[true,null,"\u20ac"],"\ud83d\ude02":1.5e3}`))
	f.Add([]byte(`[1e21, 0.000001, -0, 1E-7]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v Value
		if err := v.UnmarshalJSON(data); err != nil {
			return
		}
		mine, err := Canonical(&v)
		if err != nil {
			return
		}
		ref, err := gojcs.Transform(data)
		if err != nil {
			return
		}
		if !bytes.Equal(mine, ref) {
			t.Fatalf("canonical forms differ:\n mine %s\n  ref %s", mine, ref)
		}
	})
}
