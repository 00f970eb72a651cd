package bundle_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
)

// laterRelease turns the generated 300-target release into a release 2
// that carries most targets over from release 1, the targets it created
// naming the publication they replace (in their rows' trailing maps), and
// returns its files.
func laterRelease(t *testing.T) []bundle.ReleaseFile {
	t.Helper()
	m, err := bundle.ParseFiles(benchRelease(t))
	if err != nil {
		t.Fatal(err)
	}
	m.BaseReleaseVersion, m.ReleaseVersion, m.SourceEventSequence = 1, 2, 2
	m.CreatedAt = "2026-02-01T00:00:00Z"
	for i := range m.Targets {
		tg := &m.Targets[i]
		tg.Changed = false
		if i%7 == 0 { // created by release 2
			tg.ReleaseVersion, tg.SourceEventSequence, tg.Changed = 2, 2, true
			tg.PublicationID = bundle.PublicationID(m.EnvTag, 2)
			tg.CreatedAt, tg.ValidFrom = m.CreatedAt, m.CreatedAt
			tg.RefreshAfter, tg.ExpiresAt = "2026-02-08T00:00:00Z", "2026-02-22T00:00:00Z"
		}
		// what it replaced: written in the row's trailing map
		tg.Previous = &bundle.Publication{PublicationID: bundle.PublicationID(m.EnvTag, 1), PolicyDigest: tg.PolicyDigest}
	}
	files, err := m.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestOutlineEntriesAreTheParsedEntries: an outline holds the release
// without its targets, and each shard's entries decoded again are exactly
// those the whole release parses into, trailing maps and targets of an
// earlier release included.
func TestOutlineEntriesAreTheParsedEntries(t *testing.T) {
	for name, files := range map[string][]bundle.ReleaseFile{"release 1": benchRelease(t), "release 2": laterRelease(t)} {
		t.Run(name, func(t *testing.T) {
			whole, err := bundle.ParseFiles(files)
			if err != nil {
				t.Fatal(err)
			}
			byIndex := func(k int, _ bundle.ShardRef) (bundle.ReleaseFile, error) { return files[k+1], nil }
			o, err := bundle.ParseOutline(files[0], byIndex)
			if err != nil {
				t.Fatal(err)
			}
			if o.Manifest.Targets != nil {
				t.Fatalf("the outline holds %d target entries", len(o.Manifest.Targets))
			}
			rest := *whole
			rest.Targets = nil
			if !reflect.DeepEqual(o.Manifest, &rest) {
				t.Fatal("the outline's release-wide fields differ from the whole release's")
			}
			if o.TargetCount() != len(whole.Targets) || len(o.Shards) != len(files)-1 {
				t.Fatalf("%d targets in %d shards, want %d in %d", o.TargetCount(), len(o.Shards), len(whole.Targets), len(files)-1)
			}
			var joined []bundle.TargetEntry
			for k := range o.Shards {
				es, err := o.Entries(k, files[k+1])
				if err != nil {
					t.Fatal(err)
				}
				joined = append(joined, es...)
			}
			if !reflect.DeepEqual(joined, whole.Targets) {
				t.Fatal("the shards' entries differ from the whole release's targets")
			}
			extras, earlier := 0, 0
			for _, tg := range joined {
				if tg.Previous != nil || len(tg.Inventory) > 0 {
					extras++
				}
				if tg.ReleaseVersion < whole.ReleaseVersion {
					earlier++
				}
			}
			if extras == 0 || (whole.ReleaseVersion > 1 && earlier == 0) {
				t.Fatalf("%d entries with a trailing map, %d of an earlier release: the test needs both", extras, earlier)
			}

			// A shard is checked as when the release was read.
			edited := files[2]
			edited.Bytes = append([]byte("# edited\n"), edited.Bytes...)
			if _, err := o.Entries(1, edited); !errors.Is(err, bundle.ErrDigestMismatch) || !strings.Contains(err.Error(), files[2].Path) {
				t.Fatalf("shard with other bytes: %v, want a digest mismatch naming %s", err, files[2].Path)
			}
			if _, err := o.Entries(0, files[2]); err == nil || !strings.Contains(err.Error(), files[2].Path) {
				t.Fatalf("another shard's file: %v, want an error naming it", err)
			}
			if _, err := o.Entries(len(o.Shards), files[1]); !errors.Is(err, bundle.ErrInvalidManifest) {
				t.Fatalf("shard %d of %d: %v, want ErrInvalidManifest", len(o.Shards), len(o.Shards), err)
			}
		})
	}
}
