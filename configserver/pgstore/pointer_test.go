package pgstore

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/configpub/configpub/bundle"
)

// servedManifest decodes a subset of the delivery manifest: every field it
// has must be a field of bundle.DeliveryManifest with the same JSON name
// and type (a jsonString for a string), or a renamed field would silently
// decode as empty.
func TestServedManifestIsASubsetOfTheDeliveryManifest(t *testing.T) {
	full := map[string]reflect.Type{}
	ft := reflect.TypeFor[bundle.DeliveryManifest]()
	for i := range ft.NumField() {
		full[ft.Field(i).Tag.Get("json")] = ft.Field(i).Type
	}
	st := reflect.TypeFor[servedManifest]()
	for i := range st.NumField() {
		f := st.Field(i)
		typ, ok := full[f.Tag.Get("json")]
		if f.Type == reflect.TypeFor[jsonString]() && typ == reflect.TypeFor[string]() {
			continue
		}
		if !ok || typ != f.Type {
			t.Errorf("servedManifest.%s (json %q, %s) is not a field of bundle.DeliveryManifest", f.Name, f.Tag.Get("json"), f.Type)
		}
	}
}

// TestJSONStringDecodesAsAString checks that a jsonString member has the
// value encoding/json gives the same member decoded into a string, plain
// or escaped, and that a member that is not a string fails to decode.
func TestJSONStringDecodesAsAString(t *testing.T) {
	var in interner
	for _, tok := range []string{`"sha256:00ff"`, `""`, `null`, `"a\"b"`, `"\u00e9t\u00e9"`, `"été"`,
		`"tab\tnewline\n"`, `"\ud83d\ude00"`, "\"\xff\xfe\"", `"a\\b"`, `"x/y"`} {
		doc := []byte(`{"host":` + tok + `}`)
		var want struct {
			Host string `json:"host"`
		}
		if err := json.Unmarshal(doc, &want); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		var got struct {
			Host jsonString `json:"host"`
		}
		if err := json.Unmarshal(doc, &got); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if s := got.Host.String(); s != want.Host {
			t.Errorf("%s: String() = %q, want %q", tok, s, want.Host)
		}
		if !got.Host.is(want.Host) || got.Host.is(want.Host+"x") {
			t.Errorf("%s: is(%q) wrong", tok, want.Host)
		}
		if s := got.Host.shared(&in); s != want.Host {
			t.Errorf("%s: shared() = %q, want %q", tok, s, want.Host)
		}
		if s := got.Host.shared(nil); s != want.Host {
			t.Errorf("%s: shared(nil) = %q, want %q", tok, s, want.Host)
		}
	}
	for _, tok := range []string{`1`, `true`, `{}`, `["a"]`} {
		var m servedManifest
		if err := json.Unmarshal([]byte(`{"host":`+tok+`}`), &m); err == nil {
			t.Errorf("host %s decoded as a string", tok)
		}
	}
}
