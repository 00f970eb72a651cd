package bundle

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/configpub/configpub/internal/render"
)

// Change kinds reported by Diff.
const (
	ChangeAdded = "added"
	// ChangeRetired: a target of the old release that the new release no
	// longer contains; activating the new release retires its identity.
	ChangeRetired   = "retired"
	ChangeChanged   = "changed"
	ChangeUnchanged = "unchanged"
	// ChangeRemoved is the former name of ChangeRetired.
	ChangeRemoved = ChangeRetired
)

// TargetDiff compares one target between two releases.
type TargetDiff struct {
	Host, ServiceID, Audience string
	Change                    string
	Old, New                  *TargetEntry // nil when absent
}

// Diff compares two manifests target by target (old may be nil). A target is
// unchanged when its artifact, policy, content and property-set digests are
// all equal. The result is sorted by host, serviceId.
func Diff(old, cur *Manifest) []TargetDiff {
	byID := map[[2]string]*TargetDiff{}
	var out []TargetDiff
	if old != nil {
		for i := range old.Targets {
			t := &old.Targets[i]
			byID[[2]string{t.Host, t.ServiceID}] = &TargetDiff{Host: t.Host, ServiceID: t.ServiceID, Audience: t.Audience, Change: ChangeRetired, Old: t}
		}
	}
	if cur != nil {
		for i := range cur.Targets {
			t := &cur.Targets[i]
			k := [2]string{t.Host, t.ServiceID}
			d, ok := byID[k]
			if !ok {
				byID[k] = &TargetDiff{Host: t.Host, ServiceID: t.ServiceID, Audience: t.Audience, Change: ChangeAdded, New: t}
				continue
			}
			d.New = t
			d.Audience = t.Audience
			if sameDigests(d.Old, t) {
				d.Change = ChangeUnchanged
			} else {
				d.Change = ChangeChanged
			}
		}
	}
	for _, d := range byID {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		return out[i].ServiceID < out[j].ServiceID
	})
	return out
}

func sameDigests(a, b *TargetEntry) bool {
	return a.ArtifactDigest == b.ArtifactDigest && a.PolicyDigest == b.PolicyDigest &&
		a.ContentDigest == b.ContentDigest && a.PropertySetDigest == b.PropertySetDigest
}

// FieldDifference is the first field in which two manifests differ.
type FieldDifference struct {
	// Target is "host/serviceId/envTag" for a field of a target entry, ""
	// for a release-level field.
	Target string
	// Field is the field's path inside the release or the target entry
	// ("createdAt", "inputs[3].digest", "expiresAt", "deliveryLease.expiresAfter").
	Field string
	// A and B are the two values as canonical JSON ("" when absent).
	A, B string
}

// FirstDifference returns the first field in which a and b differ (nil when
// they are equal): release-level fields first in manifest order, then the
// targets matched by identity (a target only one side has is reported as the
// whole entry), then the remaining lists in manifest order.
func FirstDifference(a, b *Manifest) (*FieldDifference, error) {
	// The release-level fields as documents; the targets are compared
	// pair by pair below, so a large release is never held as a tree.
	ha, hb := *a, *b
	ha.Targets, hb.Targets = nil, nil
	av, err := ha.value()
	if err != nil {
		return nil, err
	}
	bv, err := hb.value()
	if err != nil {
		return nil, err
	}
	av.Add("releaseDigest", render.String(a.ReleaseDigest))
	bv.Add("releaseDigest", render.String(b.ReleaseDigest))
	// Scalars, then targets, then the other lists.
	var lists []string
	for _, k := range av.Keys {
		x, y := av.Get(k), bv.Get(k)
		if x.Kind == render.KindList {
			lists = append(lists, k)
			continue
		}
		if k == "releaseDigest" {
			continue
		}
		if d := firstDiff(k, x, y); d != nil {
			return d, nil
		}
	}
	ta, tb := map[string]*TargetEntry{}, map[string]*TargetEntry{}
	var order []string
	for _, side := range []struct {
		list []TargetEntry
		into map[string]*TargetEntry
	}{{a.Targets, ta}, {b.Targets, tb}} {
		for i := range side.list {
			t := &side.list[i]
			id := t.Host + "/" + t.ServiceID + "/" + a.EnvTag
			if _, seen := ta[id]; !seen {
				if _, seen := tb[id]; !seen {
					order = append(order, id)
				}
			}
			side.into[id] = t
		}
	}
	for _, id := range order {
		ea, eb := ta[id], tb[id]
		if ea == nil || eb == nil {
			var x, y *render.Value
			if ea != nil {
				x = ea.value()
			}
			if eb != nil {
				y = eb.value()
			}
			d := firstDiff("", x, y)
			d.Target, d.Field = id, "(entry)"
			return d, nil
		}
		if reflect.DeepEqual(ea, eb) {
			continue
		}
		x, y := ea.value(), eb.value()
		// What the sources decide first, then every other field in order.
		for _, k := range []string{"audience", "subjectKind", "subjectName", "policyDigest", "contentDigest", "propertySetDigest", "leaseProfile"} {
			if d := firstDiff(k, x.Get(k), y.Get(k)); d != nil {
				d.Target = id
				return d, nil
			}
		}
		if d := firstDiff("", x, y); d != nil {
			d.Target = id
			return d, nil
		}
	}
	for _, k := range lists {
		if k == "targets" {
			continue
		}
		if d := firstDiff(k, av.Get(k), bv.Get(k)); d != nil {
			return d, nil
		}
	}
	if a.ReleaseDigest != b.ReleaseDigest {
		return &FieldDifference{Field: "releaseDigest", A: a.ReleaseDigest, B: b.ReleaseDigest}, nil
	}
	return nil, nil
}

func firstDiff(path string, x, y *render.Value) *FieldDifference {
	if x != nil && y != nil && x.Kind == y.Kind {
		switch x.Kind {
		case render.KindMap:
			for _, k := range x.Keys {
				if d := firstDiff(join(path, k), x.Get(k), y.Get(k)); d != nil {
					return d
				}
			}
			for _, k := range y.Keys {
				if x.Get(k) == nil {
					return firstDiff(join(path, k), nil, y.Get(k))
				}
			}
			return nil
		case render.KindList:
			for i := 0; i < len(x.Items) || i < len(y.Items); i++ {
				var xi, yi *render.Value
				if i < len(x.Items) {
					xi = x.Items[i]
				}
				if i < len(y.Items) {
					yi = y.Items[i]
				}
				if d := firstDiff(fmt.Sprintf("%s[%d]", path, i), xi, yi); d != nil {
					return d
				}
			}
			return nil
		}
	}
	cx, cy := canon(x), canon(y)
	if cx == cy {
		return nil
	}
	return &FieldDifference{Field: path, A: cx, B: cy}
}

func canon(v *render.Value) string {
	if v == nil {
		return ""
	}
	b, err := render.Canonical(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
