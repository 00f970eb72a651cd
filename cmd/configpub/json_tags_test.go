package main

import (
	"encoding"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/planreport"
	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/readback"
	"github.com/configpub/configpub/webhook"
)

// jsonReports is, per verb that takes -o json, what it prints (read off
// each verb's RunE; several values where the verb prints one of several
// types). The test below walks the cobra tree, so a verb given -o json
// later without an entry here fails it, and so does an entry whose verb no
// longer takes -o.
var jsonReports = map[string][]any{
	"configpub compile":            {compileSummary{}},
	"configpub plan":               {(*planreport.Report)(nil)},                                                            // Report.WriteJSON
	"configpub promote":            {(*promote.Result)(nil)},                                                               // promote.Run
	"configpub activate":           {(*promoter.ActivationResult)(nil)},                                                    // Store.ActivateRelease
	"configpub rollback":           {(*promoter.ActivationResult)(nil)},                                                    // Store.Rollback
	"configpub revoke":             {(*promoter.Revocation)(nil), (*promoter.EpochResult)(nil)},                            // Store.Revoke; --epoch: Store.RaiseEpoch
	"configpub reconcile":          {(*promoter.ReconcileResult)(nil)},                                                     // Store.Reconcile
	"configpub lease renew":        {renewReport{}},                                                                        // Store.RenewLeases (and the attach), once per renewal
	"configpub lease resign":       {(*promoter.EpochResult)(nil)},                                                         // Store.Resign
	"configpub status":             {(*promoter.Status)(nil)},                                                              // Store.Status
	"configpub history":            {[]promoter.Move(nil), []promoter.ReleaseEvent(nil), []promoter.RevocationRecord(nil)}, // Store.History; --releases: Store.ReleaseEvents; --revocations: Store.Revocations
	"configpub readback":           {[]readback.Result(nil)},                                                               // readback.Run
	"configpub gate":               {[]*promoter.GateVerdict(nil)},                                                         // --once: Store.CheckHealth per --env
	"configpub webhook redeliver":  {(*webhook.RedeliverResult)(nil)},                                                      // Notifier.Redeliver
	"configpub version":            {buildVersion{}},
	"configpub publish":            {(*publishReport)(nil)}, // newPublishReport
	"configpub pull":               {pullReport{}},
	"configpub verify-oci":         {verifyReport{}},
	"configpub validate":           {validateReport{}},
	"configpub init":               {initReport{}},
	"configpub keygen":             {keyFilesReport{}},
	"configpub token keygen":       {keyFilesReport{}},
	"configpub db migrate":         {migrateReport{}},
	"configpub db gc":              {gcReport{}},
	"configpub db keys":            {keysReport{}},
	"configpub registry attach":    {attachReport{}},
	"configpub registry republish": {(*republishReport)(nil)}, // promote.Republish and the attach that follows
	"configpub fetch":              {(*client.Evidence)(nil)}, // one line per load (fetchFlags.handle)
}

var lowerCamel = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// TestJSONOutputFieldsTagged: every exported field of every type a verb
// prints with -o json (recursively: pointers, slices, arrays, map values,
// embedded structs) has a json tag naming it in lowerCamelCase, or "-";
// an untagged field would print as its Go name ("EnvTag", "Published"). A
// type that marshals itself (json.Marshaler or encoding.TextMarshaler:
// time.Time, digests) is a leaf. Fields of interface type are refused: what
// they print cannot be checked here.
func TestJSONOutputFieldsTagged(t *testing.T) {
	listed := map[string]bool{}
	walkCmds(newRootCmd(), func(c *cobra.Command) {
		if c.Flags().Lookup("output") == nil {
			return
		}
		listed[c.CommandPath()] = true
		if _, ok := jsonReports[c.CommandPath()]; !ok {
			t.Errorf("%s takes -o/--output: add the type it prints to jsonReports", c.CommandPath())
		}
	})
	for verb, vs := range jsonReports {
		if !listed[verb] {
			t.Errorf("jsonReports lists %s, which has no -o/--output", verb)
		}
		seen := map[reflect.Type]bool{}
		for _, v := range vs {
			rt := reflect.TypeOf(v)
			checkJSONTags(t, verb, rt, typeName(rt), seen)
		}
	}
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func marshalsItself(rt reflect.Type) bool {
	for _, m := range []reflect.Type{jsonMarshaler, textMarshaler} {
		if rt.Implements(m) || reflect.PointerTo(rt).Implements(m) {
			return true
		}
	}
	return false
}

// typeName names rt's struct type ("promote.Result" for []*promote.Result).
func typeName(rt reflect.Type) string {
	for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Array || rt.Kind() == reflect.Map {
		rt = rt.Elem()
	}
	return rt.String()
}

func checkJSONTags(t *testing.T, verb string, rt reflect.Type, path string, seen map[reflect.Type]bool) {
	t.Helper()
	for !marshalsItself(rt) && (rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Array || rt.Kind() == reflect.Map) {
		rt = rt.Elem()
	}
	if rt.Kind() == reflect.Interface {
		t.Errorf("%s: %s is of interface type %s: what it prints cannot be checked", verb, path, rt)
		return
	}
	if rt.Kind() != reflect.Struct || seen[rt] || marshalsItself(rt) {
		return
	}
	seen[rt] = true
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag, hasTag := f.Tag.Lookup("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			checkJSONTags(t, verb, f.Type, path, seen) // embedded: its fields are promoted
			continue
		}
		if !f.IsExported() {
			continue
		}
		switch {
		case !hasTag || name == "":
			t.Errorf("%s: %s.%s has no json name (prints as %q)", verb, path, f.Name, f.Name)
		case !lowerCamel.MatchString(name):
			t.Errorf("%s: %s.%s is named %q, not lowerCamelCase", verb, path, f.Name, name)
		}
		checkJSONTags(t, verb, f.Type, path+"."+f.Name, seen)
	}
}
