package bundle_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/forgery"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
)

// TestOutlineRefusesWhatTheWholeReleaseRefuses: ParseOutline, which a
// compile reads the release it builds on with, comes to ParseRelease's
// outcome, the same error word for word or none,
// on every forgery of a carried target or of the release, on releases
// that break their invariants inside a shard (the first bad shard in the
// root's order named) and on a root whose createdBy names a release that
// created none of the targets.
func TestOutlineRefusesWhatTheWholeReleaseRefuses(t *testing.T) {
	base := laterRelease(t)
	type release struct {
		name  string
		files []bundle.ReleaseFile
	}
	var cases []release
	edit := func(name string, f func(m *bundle.Manifest)) {
		m, err := bundle.ParseFiles(base)
		if err != nil {
			t.Fatal(err)
		}
		f(m)
		files, err := m.Files()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cases = append(cases, release{name, files})
	}
	edit("intact", func(*bundle.Manifest) {})
	for _, c := range forgery.Cases() {
		edit(c.Name, func(m *bundle.Manifest) { c.Edit(m, forgery.Unchanged(m)) })
	}
	// hostTargets returns the indexes of the targets of the k-th host.
	hostTargets := func(m *bundle.Manifest, k int) []int {
		var out []int
		for i, h := 0, -1; i < len(m.Targets); i++ {
			if i == 0 || m.Targets[i].Host != m.Targets[i-1].Host {
				h++
			}
			if h == k {
				out = append(out, i)
			}
		}
		if len(out) < 2 {
			t.Fatalf("host %d has %d targets: the test needs two", k, len(out))
		}
		return out
	}
	edit("two targets of a shard out of order", func(m *bundle.Manifest) {
		i := hostTargets(m, 3)
		m.Targets[i[0]], m.Targets[i[1]] = m.Targets[i[1]], m.Targets[i[0]]
	})
	edit("a target twice in a shard", func(m *bundle.Manifest) {
		i := hostTargets(m, 1)
		m.Targets[i[1]].ServiceID = m.Targets[i[0]].ServiceID
	})
	edit("a lease profile the release does not have", func(m *bundle.Manifest) {
		m.Targets[hostTargets(m, 2)[1]].LeaseProfile = "nowhere"
	})
	const twoShards = "windows broken in the fifth and the second shard"
	edit(twoShards, func(m *bundle.Manifest) {
		for _, k := range []int{4, 1} {
			tg := &m.Targets[hostTargets(m, k)[1]]
			tg.ExpiresAt = strings.Replace(tg.ExpiresAt, "T00", "T01", 1)
		}
	})
	edit("a target and the release digest's form both broken", func(m *bundle.Manifest) {
		m.Targets[hostTargets(m, 2)[0]].Changed = !m.Targets[hostTargets(m, 2)[0]].Changed
		m.ReleaseDigest = "sha256:short"
	})
	edit("one target of release 1, in the middle of a shard", func(m *bundle.Manifest) {
		keep := hostTargets(m, 2)[1]
		for i := range m.Targets {
			tg := &m.Targets[i]
			switch {
			case i == keep:
				tg.ReleaseVersion, tg.SourceEventSequence, tg.Changed = 1, 1, false
				tg.PublicationID = bundle.PublicationID(m.EnvTag, 1)
				tg.CreatedAt, tg.ValidFrom = "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"
				tg.RefreshAfter, tg.ExpiresAt = "2026-01-08T00:00:00Z", "2026-01-22T00:00:00Z"
			case tg.ReleaseVersion == 1:
				tg.ReleaseVersion, tg.SourceEventSequence, tg.Changed = 2, 2, true
				tg.PublicationID = bundle.PublicationID(m.EnvTag, 2)
				tg.CreatedAt, tg.ValidFrom = m.CreatedAt, m.CreatedAt
				tg.RefreshAfter, tg.ExpiresAt = "2026-02-08T00:00:00Z", "2026-02-22T00:00:00Z"
			}
		}
	})
	cases = append(cases,
		release{"createdBy naming a release that created no target", editRoot(t, base, func(root *render.Value) {
			cb := root.Get("createdBy")
			cb.Items = append([]*render.Value{render.List(render.Int(0), render.String("2025-12-01T00:00:00Z"))}, cb.Items...)
		}, "createdBy lists release 0")},
		release{"a release digest that is no digest", editRoot(t, base, func(root *render.Value) {
			root.Set("releaseDigest", render.String("sha256:short"))
		}, `releaseDigest: "sha256:short" is not sha256:<64 hex>`)},
	)

	refusedInShard := 0
	for _, c := range cases {
		whole, werr := bundle.ParseFiles(c.files)
		o, oerr := bundle.ParseOutlineFiles(c.files)
		if fmt.Sprint(werr) != fmt.Sprint(oerr) {
			t.Errorf("%s:\n  ParseFiles:        %v\n  ParseOutlineFiles: %v", c.name, werr, oerr)
			continue
		}
		if werr == nil {
			if o.TargetCount() != len(whole.Targets) || o.Manifest.ReleaseDigest != whole.ReleaseDigest {
				t.Errorf("%s: the outline has %d targets, release digest %s; the release %d, %s", c.name, o.TargetCount(), o.Manifest.ReleaseDigest, len(whole.Targets), whole.ReleaseDigest)
			}
			continue
		}
		if strings.Contains(werr.Error(), "target ") || strings.Contains(werr.Error(), "targets[") || strings.Contains(werr.Error(), "createdBy lists") {
			refusedInShard++
		}
	}
	// Those refused for a target entry or createdBy are refused after the
	// entries are made: without them the test compares only the root.
	if refusedInShard < 6 {
		t.Fatalf("%d releases refused for a target entry: the test needs its hand-made cases to be refused so", refusedInShard)
	}
	// The first bad shard in the root's order is the one named.
	var err error
	for _, c := range cases {
		if c.name == twoShards {
			_, err = bundle.ParseOutlineFiles(c.files)
		}
	}
	m, _ := bundle.ParseFiles(base)
	if want := m.Targets[hostTargets(m, 1)[1]]; err == nil || !strings.Contains(err.Error(), want.Host+"/"+want.ServiceID+": expiresAt") {
		t.Fatalf("two broken shards: %v, want the second shard's target %s/%s named", err, want.Host, want.ServiceID)
	}
}

// editRoot returns the files of a release whose root f edits, its
// releaseDigest recomputed as a forger would unless f sets one; ParseFiles
// must refuse the release with an error that says want.
func editRoot(t *testing.T, files []bundle.ReleaseFile, f func(root *render.Value), want string) []bundle.ReleaseFile {
	t.Helper()
	doc, err := yamlstrict.Parse(files[0].Path, files[0].Bytes)
	if err != nil {
		t.Fatal(err)
	}
	root := doc.Value
	if root.Get("createdBy") == nil {
		t.Fatal("the release's root has no createdBy: the test needs a release with earlier targets")
	}
	was := root.Get("releaseDigest").Str
	f(root)
	if root.Get("releaseDigest").Str == was {
		root.Delete("releaseDigest")
		d, err := render.Digest(root)
		if err != nil {
			t.Fatal(err)
		}
		root.Set("releaseDigest", render.String(d))
	}
	b, err := render.YAML(root)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]bundle.ReleaseFile{{Path: files[0].Path, Bytes: b}}, files[1:]...)
	if _, err := bundle.ParseFiles(out); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("root edited: %v, want it refused for %s", err, want)
	}
	return out
}
