package bundle

import "sort"

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
