package pgstore

import (
	"reflect"
	"testing"

	"github.com/configpub/configpub/bundle"
)

// servedManifest decodes a subset of the delivery manifest: every field it
// has must be a field of bundle.DeliveryManifest with the same JSON name
// and type, or a renamed field would silently decode as empty.
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
		if !ok || typ != f.Type {
			t.Errorf("servedManifest.%s (json %q, %s) is not a field of bundle.DeliveryManifest", f.Name, f.Tag.Get("json"), f.Type)
		}
	}
}
