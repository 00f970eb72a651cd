package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// decodeTarget has a field of every shape the compiler's specs use, and a
// few they do not, so both routes meet them.
type decodeTarget struct {
	Name      string             `json:"name"`
	Count     int64              `json:"count"`
	Small     int8               `json:"small"`
	Plain     int                `json:"plain"`
	Ratio     float64            `json:"ratio"`
	Temp      *float64           `json:"temp"`
	On        bool               `json:"on"`
	Tags      []string           `json:"tags"`
	Items     []decodeItem       `json:"items"`
	Nested    decodeItem         `json:"nested"`
	Ptr       *decodeItem        `json:"ptr"`
	Tree      *Value             `json:"tree"`
	Trees     map[string]*Value  `json:"trees"`
	ByName    map[string]decodeI `json:"byName"`
	Any       any                `json:"any"`
	Num       json.Number        `json:"num"`
	Bytes     []byte             `json:"bytes"`
	Unsigned  uint16             `json:"unsigned"`
	Fixed     [2]int64           `json:"fixed"`
	LeaseProf string             `json:"leaseProfile"`
	Untagged  string
	Skipped   string `json:"-"`
	hidden    string //lint:ignore U1000 an unexported field both routes must skip
}

type decodeItem struct {
	ID    string   `json:"id"`
	Value *int64   `json:"value"`
	List  []string `json:"list"`
}

type decodeI struct {
	N int64 `json:"n"`
}

type withEmbedded struct {
	decodeItem
	Extra string `json:"extra"`
}

type withStringOption struct {
	N int64 `json:"n,string"`
}

// viaJSONRoute is what Decode stands for: the RFC 8785 text, decoded by
// encoding/json.
func viaJSONRoute(v *Value, dst any) error {
	b, err := Canonical(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}

// sameDecode decodes v into a fresh T by both routes and fails unless they
// agree: both refuse, or both store the same thing.
func sameDecode[T any](t *testing.T, name string, v *Value) {
	t.Helper()
	var mine, ref T
	errMine, errRef := Decode(v, &mine), viaJSONRoute(v, &ref)
	if (errMine != nil) != (errRef != nil) {
		c, _ := Canonical(v)
		t.Fatalf("%s: %s: Decode error %v, encoding/json error %v", name, c, errMine, errRef)
	}
	if errMine == nil && !reflect.DeepEqual(mine, ref) {
		c, _ := Canonical(v)
		t.Fatalf("%s: %s:\n Decode        %#v\n encoding/json %#v", name, c, mine, ref)
	}
}

func TestDecodeIsTheJSONRoute(t *testing.T) {
	parse := func(s string) *Value {
		t.Helper()
		var v Value
		if err := v.UnmarshalJSON([]byte(s)); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return &v
	}
	cases := map[string]*Value{
		"every field": parse(`{"name":"a","count":9007199254740991,"small":-128,"plain":3,"ratio":0.25,"temp":1,
			"on":true,"tags":["x","y"],"items":[{"id":"i","value":2,"list":[]},{"id":"j","value":null}],
			"nested":{"id":"n","list":null},"ptr":{"id":"p"},"tree":{"b":1,"a":[1.5,"s",null,{"z":{}}]},
			"trees":{"t":{"k":2.0},"u":null},"byName":{"a":{"n":1},"b":{}},"any":{"q":[1,2.5,"x"]},
			"num":12.5,"bytes":"aGk=","unsigned":7,"fixed":[1,2],"leaseProfile":"lp","Untagged":"u","Skipped":"s","hidden":"h"}`),
		"empty":                          parse(`{}`),
		"null document":                  parse(`null`),
		"nulls":                          parse(`{"name":null,"count":null,"tags":null,"items":null,"ptr":null,"tree":null,"trees":null,"any":null,"temp":null}`),
		"unknown members":                parse(`{"nope":{"deep":[1,2,{"x":"y"}]},"name":"a"}`),
		"integral float into int":        Map().Add("count", Float(3)),
		"negative integral float":        Map().Add("count", Float(-1e18)),
		"fractional float into int":      Map().Add("count", Float(2.5)),
		"float beyond int64":             Map().Add("count", Float(1e19)),
		"float at 1e21":                  Map().Add("count", Float(1e21)),
		"int8 overflow":                  Map().Add("small", Int(200)),
		"int into float":                 Map().Add("ratio", Int(-7)),
		"unsafe int":                     Map().Add("count", Int(1<<60)),
		"unsafe int in an unknown field": Map().Add("other", List(Int(-(1 << 60)))),
		"unsafe int under any":           Map().Add("any", Int(1<<60)),
		"NaN":                            Map().Add("ratio", Float(math.NaN())),
		"infinity in an unknown field":   Map().Add("other", Map().Add("x", Float(math.Inf(1)))),
		"string into int":                Map().Add("count", String("3")),
		"number into string":             Map().Add("name", Int(3)),
		"map into list":                  Map().Add("tags", Map()),
		"list into struct":               Map().Add("nested", List()),
		"bool into string":               Map().Add("name", Bool(true)),
		"bad UTF-8 string":               Map().Add("name", String("a\xffb")),
		"bad UTF-8 key":                  Map().Add("\xff", Int(1)),
		"bad UTF-8 in an unknown field":  Map().Add("other", String("\xc3")),
		"case-insensitive match":         Map().Add("NAME", String("upper")),
		"exact after folded":             Map().Add("leaseProfile", String("exact")).Add("leaseprofile", String("folded")),
		"folded after exact":             Map().Add("Name", String("folded")).Add("name", String("exact")),
		"untagged by field name":         Map().Add("untagged", String("u")),
		"duplicate member":               Map().Add("name", String("a")).Add("name", String("b")),
		"duplicate unknown member":       Map().Add("other", Map().Add("k", Null()).Add("k", Null())),
		"duplicate among many":           manyKeys(20, true),
		"many distinct":                  manyKeys(20, false),
		"not a map":                      List(Int(1)),
		"string document":                String("x"),
	}
	for name, v := range cases {
		sameDecode[decodeTarget](t, name, v)
		sameDecode[map[string]any](t, name, v)
		sameDecode[*decodeTarget](t, name, v)
	}
	sameDecode[withEmbedded](t, "embedded", Map().Add("id", String("i")).Add("extra", String("e")))
	sameDecode[withStringOption](t, "string option", Map().Add("n", String("12")))
	sameDecode[map[int]string](t, "integer keys", Map().Add("12", String("x")))

	// The cases must be able to tell the routes apart: a decoder that
	// ignores what it cannot place would differ here.
	var got decodeTarget
	if err := Decode(Map().Add("count", Float(2.5)), &got); err == nil {
		t.Fatal("Decode stored 2.5 in an integer field")
	}
	if err := Decode(Map().Add("name", String("n")), got); err == nil || !strings.Contains(err.Error(), "non-nil pointer") {
		t.Fatalf("Decode into a non-pointer: %v", err)
	}
}

// manyKeys returns a map of n members, the last one repeating the first
// when dup.
func manyKeys(n int, dup bool) *Value {
	m := Map()
	for i := range n {
		m.Add("k"+strconv.Itoa(i), Int(int64(i)))
	}
	if dup {
		m.Add("k0", Int(1))
	}
	return Map().Add("trees", Map().Add("t", Null())).Add("byName", Map()).Add("other", m)
}

// TestDecodeNamesThePath: a refusal names the member it met.
func TestDecodeNamesThePath(t *testing.T) {
	var got decodeTarget
	err := Decode(Map().Add("items", List(Map().Add("id", String("a")), Map().Add("value", String("x")))), &got)
	if err == nil || !strings.HasPrefix(err.Error(), "items[1].value: ") {
		t.Fatalf("error %v, want one naming items[1].value", err)
	}
	// The path is also there as segments, for a caller to locate the member.
	var de *DecodeError
	if !errors.As(err, &de) || !slices.Equal(de.Path, []string{"items", "[1]", "value"}) {
		t.Fatalf("got %#v, want a *DecodeError at [items [1] value]", err)
	}
}

// TestDecodeRandomValues compares the routes on random values shaped like
// decodeTarget, with kinds swapped and members renamed at random.
func TestDecodeRandomValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := []string{"name", "count", "small", "ratio", "temp", "on", "tags", "items", "nested", "ptr", "tree",
		"trees", "byName", "any", "id", "value", "list", "n", "Name", "ID", "leaseprofile", "x"}
	var gen func(depth int) *Value
	gen = func(depth int) *Value {
		switch k := r.IntN(9); {
		case k == 0:
			return Null()
		case k == 1:
			return Bool(r.IntN(2) == 0)
		case k == 2:
			return Int(r.Int64N(1<<54) - 1<<53)
		case k == 3:
			return Int(r.Int64N(300) - 150)
		case k == 4:
			return Float([]float64{0.5, 3, -2, 1e20, 1e300, 129}[r.IntN(6)])
		case k == 5:
			return String([]string{"", "a", "é", "12"}[r.IntN(4)])
		case k == 6 && depth < 4:
			l := List()
			for range r.IntN(4) {
				l.Items = append(l.Items, gen(depth+1))
			}
			return l
		case depth < 4:
			m := Map()
			for _, i := range r.Perm(len(keys))[:r.IntN(6)] {
				m.Add(keys[i], gen(depth+1))
			}
			return m
		}
		return String("leaf")
	}
	for i := range 20000 {
		v := gen(0)
		sameDecode[decodeTarget](t, "random "+strconv.Itoa(i), v)
		sameDecode[decodeItem](t, "random "+strconv.Itoa(i), v)
	}
}

// FuzzDecode compares the routes on every JSON text the fuzzer finds.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"name":"a","count":3.0,"items":[{"id":"x","value":1}],"tree":{"b":[1,{"a":null}]},"NAME":"b"}`))
	f.Add([]byte(`{"trees":{"a":{"x":1e3}},"byName":{"k":{"n":-0}},"temp":null,"ratio":1e308}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v Value
		if err := v.UnmarshalJSON(data); err != nil {
			return
		}
		sameDecode[decodeTarget](t, "fuzz", &v)
	})
}

// TestAnyBufferReuse: a buffer converting one value after another, of
// growing, shrinking and different shapes, returns each time what ToAny
// returns, and reuses its containers.
func TestAnyBufferReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var gen func(depth int) *Value
	gen = func(depth int) *Value {
		switch r.IntN(6) {
		case 0:
			return Int(r.Int64N(1000))
		case 1:
			return String("s" + strconv.Itoa(r.IntN(9)))
		case 2:
			if depth < 4 {
				l := List()
				for range r.IntN(6) {
					l.Items = append(l.Items, gen(depth+1))
				}
				return l
			}
		case 3, 4:
			if depth < 4 {
				m := Map()
				for i := range r.IntN(12) {
					m.Add("k"+strconv.Itoa(i), gen(depth+1))
				}
				return m
			}
		}
		return Null()
	}
	var b AnyBuffer
	for i := range 2000 {
		v := gen(0)
		if got, want := b.ToAny(v), v.ToAny(); !reflect.DeepEqual(got, want) {
			t.Fatalf("value %d: buffer %#v, ToAny %#v", i, got, want)
		}
	}
	if len(b.maps) == 0 || len(b.lists) == 0 {
		t.Fatalf("buffer kept %d maps and %d lists: nothing reused", len(b.maps), len(b.lists))
	}
}

// upperKey is a map key that decodes itself from text.
type upperKey string

func (k *upperKey) UnmarshalText(b []byte) error {
	*k = upperKey(strings.ToUpper(string(b)))
	return nil
}

func TestDecodeTextUnmarshalerKeys(t *testing.T) {
	v := Map().Add("a", Int(1)).Add("b", Int(2))
	sameDecode[map[upperKey]int64](t, "text keys", v)
	var got map[upperKey]int64
	if err := Decode(v, &got); err != nil || got["A"] != 1 || got["B"] != 2 {
		t.Fatalf("got %v, %v; want keys decoded by UnmarshalText", got, err)
	}
}

// TestAnyBufferPool converts from many goroutines through one pool: every
// conversion must equal ToAny's although buffers pass between goroutines.
func TestAnyBufferPool(t *testing.T) {
	var pool AnyBufferPool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				v := Map().Add("g", Int(int64(g))).Add("i", Int(int64(i))).Add("l", List(String("x"), Map().Add("n", Int(int64(i%7)))))
				b := pool.Get()
				got := b.ToAny(v)
				if want := v.ToAny(); !reflect.DeepEqual(got, want) {
					errs <- fmt.Errorf("goroutine %d value %d: pooled %#v, ToAny %#v", g, i, got, want)
				}
				pool.Put(b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
