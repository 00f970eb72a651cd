package bundle_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
)

const fixture = "../fixtures/policy-repo/releases/dev.yaml"

func TestParseMarshalRoundTrip(t *testing.T) {
	m, b := parseRelease(t, fixture)
	got, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(b) {
		t.Fatalf("Marshal(Parse(b)) differs from b")
	}
	d, err := m.Digest()
	if err != nil || d != m.ReleaseDigest {
		t.Fatalf("Digest() = %s, %v; want %s", d, err, m.ReleaseDigest)
	}
	if m.EnvTag != "dev" || m.ReleaseVersion != 1 || len(m.Targets) != 5 {
		t.Errorf("got env %s release %d targets %d, want dev 1 5", m.EnvTag, m.ReleaseVersion, len(m.Targets))
	}
}

func TestParseRefuses(t *testing.T) {
	b, err := readRelease(fixture)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	tests := []struct {
		name, in, want string
		is             error
	}{
		{"digest mismatch", s[:strings.Index(s, "releaseDigest: ")] + "releaseDigest: \"sha256:" + strings.Repeat("0", 64) + "\"\n" + s[strings.Index(s, "--- # releases/dev/"):], "releaseDigest", bundle.ErrDigestMismatch},
		{"shard edited", strings.Replace(s, "\"Agent/account\",\"local-demo\",1,", "\"Agent/account\",\"local-demo\",2,", 1), "releases/dev/dev.lightapi.net.yaml digests to", bundle.ErrDigestMismatch},
		{"shard missing", s[:strings.Index(s, "--- # releases/dev/")], "lists 1 shards, 0 were given", bundle.ErrInvalidManifest},
		{"invariant", strings.Replace(s, "releaseVersion: 1\n", "releaseVersion: 2\n", 1), "baseReleaseVersion", bundle.ErrInvalidManifest},
		{"unknown field", strings.Replace(s, "envTag: \"dev\"\n", "envTag: \"dev\"\nextra: 1\n", 1), "unknown field", nil},
		{"wrong kind", strings.Replace(s, "kind: \"Release\"", "kind: \"Other\"", 1), "apiVersion/kind", nil},
		{"duplicate key", strings.Replace(s, "envTag: \"dev\"\n", "envTag: \"dev\"\nenvTag: \"dev\"\n", 1), "duplicate key", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bundle.ParseManifest("dev.yaml", []byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	b, _ := readRelease(fixture)
	old, err := bundle.ParseManifest("dev.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := bundle.ParseManifest("dev.yaml", b)
	cur.Targets[0].ArtifactDigest = "sha256:" + strings.Repeat("0", 64)
	cur.Targets = append(cur.Targets[:1], cur.Targets[2:]...)
	cur.Targets = append(cur.Targets, bundle.TargetEntry{Host: "zz.example.com", ServiceID: "new"})
	got := map[string]string{}
	for _, d := range bundle.Diff(old, cur) {
		got[d.ServiceID] = d.Change
	}
	want := map[string]string{
		old.Targets[0].ServiceID: bundle.ChangeChanged,
		old.Targets[1].ServiceID: bundle.ChangeRemoved,
		old.Targets[2].ServiceID: bundle.ChangeUnchanged,
		"new":                    bundle.ChangeAdded,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %s, want %s", k, got[k], w)
		}
	}
}

// TestParseEnforcesInvariants: a manifest whose digest is right but whose
// content breaks an invariant is refused by the parser itself.
func TestParseEnforcesInvariants(t *testing.T) {
	b, err := readRelease(fixture)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want string
		edit       func(m *bundle.Manifest)
	}{
		{"release -5", "releaseVersion", func(m *bundle.Manifest) { m.ReleaseVersion, m.BaseReleaseVersion = -5, -6 }},
		{"release 0", "releaseVersion", func(m *bundle.Manifest) { m.ReleaseVersion, m.BaseReleaseVersion = 0, -1 }},
		{"release 2^53", "releaseVersion", func(m *bundle.Manifest) { m.ReleaseVersion = 1 << 53; m.BaseReleaseVersion = 1<<53 - 1 }},
		{"base 7 on release 1", "baseReleaseVersion", func(m *bundle.Manifest) { m.BaseReleaseVersion = 7 }},
		{"createdAt with offset", "createdAt", func(m *bundle.Manifest) { m.CreatedAt = "2026-08-13T16:00:00+02:00" }},
		{"createdAt fractional", "createdAt", func(m *bundle.Manifest) { m.CreatedAt = "2026-08-13T14:00:00.5Z" }},
		{"sourceEventSequence", "sourceEventSequence", func(m *bundle.Manifest) { m.SourceEventSequence = 9 }},
		{"expiresAt a century away", "expiresAt", func(m *bundle.Manifest) { m.Targets[0].ExpiresAt = "2126-08-13T14:00:00Z" }},
		{"refreshAfter", "refreshAfter", func(m *bundle.Manifest) { m.Targets[0].RefreshAfter = m.Targets[0].ValidFrom }},
		{"validFrom", "validFrom", func(m *bundle.Manifest) { m.Targets[0].ValidFrom = "2026-08-12T14:00:00Z" }},
		{"new target createdAt not the release's", "createdAt", func(m *bundle.Manifest) {
			e := &m.Targets[0]
			e.CreatedAt, e.ValidFrom, e.RefreshAfter, e.ExpiresAt = "2026-08-14T14:00:00Z", "2026-08-14T14:00:00Z", "2026-09-13T14:00:00Z", "2036-08-11T14:00:00Z"
		}},
		{"publicationId of another release", "publicationId", func(m *bundle.Manifest) { m.Targets[0].PublicationID = bundle.PublicationID("dev", 2) }},
		{"target release from the future", "releaseVersion", func(m *bundle.Manifest) { m.Targets[0].ReleaseVersion = 2 }},
		{"changed flag", "changed", func(m *bundle.Manifest) { m.Targets[0].Changed = false }},
		{"delivery lease", "deliveryLease", func(m *bundle.Manifest) { m.Targets[0].DeliveryLease.ExpiresAfter = "8760h" }},
		{"lease profile", "leaseProfiles[0]", func(m *bundle.Manifest) { m.LeaseProfiles[0].ValidFor = "876000h" }},
		{"malformed digest", "artifactDigest", func(m *bundle.Manifest) { m.Targets[0].ArtifactDigest = "sha256:ABC" }},
		{"upper-case serviceId", "serviceId", func(m *bundle.Manifest) { m.Targets[0].ServiceID = "Svc" }},
		{"unsorted targets", "sorted", func(m *bundle.Manifest) { m.Targets[0], m.Targets[1] = m.Targets[1], m.Targets[0] }},
		{"ledger from the future", "publishedIn", func(m *bundle.Manifest) { m.WorkflowLedger[0].PublishedIn = 3 }},
		{"epoch above the release", "revocationEpoch", func(m *bundle.Manifest) { m.Targets[0].RevocationEpoch = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := bundle.ParseManifest("dev.yaml", b)
			if err != nil {
				t.Fatal(err)
			}
			tt.edit(m)
			// Marshal recomputes releaseDigest: only the invariant is wrong.
			out, err := m.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			_, err = bundle.ParseManifest("dev.yaml", out)
			if !errors.Is(err, bundle.ErrInvalidManifest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrInvalidManifest naming %q", err, tt.want)
			}
		})
	}
}

// TestEnvelopeEpochIsAMinimum: a target's envelope revocationEpoch is the
// minimum it was compiled for; the manifest accepts one below the
// release's (the signed delivery manifest's epoch is the authoritative one).
func TestEnvelopeEpochIsAMinimum(t *testing.T) {
	b, err := readRelease(fixture)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundle.ParseManifest("dev.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	m.RevocationEpoch = 5
	m.Targets[0].RevocationEpoch = 2
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := bundle.ParseManifest("dev.yaml", out)
	if err != nil {
		t.Fatalf("epochs 0 and 2 in a release of epoch 5 refused: %v", err)
	}
	if env := back.Targets[0].Envelope("dev"); env.RevocationEpoch != 2 {
		t.Fatalf("envelope epoch %d, want 2", env.RevocationEpoch)
	}
}

// TestFirstDifference: release-level fields first, then targets matched by
// identity (a deciding field before the others, a target only one side has
// as the whole entry), then the other lists; equal manifests have none.
func TestFirstDifference(t *testing.T) {
	b, err := readRelease(fixture)
	if err != nil {
		t.Fatal(err)
	}
	parse := func() *bundle.Manifest {
		m, err := bundle.ParseManifest("dev.yaml", b)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	zero := "sha256:" + strings.Repeat("0", 64)
	tests := []struct {
		name              string
		edit              func(m *bundle.Manifest)
		target, field, to string
	}{
		{"equal", func(m *bundle.Manifest) {}, "", "", ""},
		{"release field before targets", func(m *bundle.Manifest) {
			m.CreatedAt = "2030-01-01T00:00:00Z"
			m.Targets[0].ArtifactDigest = zero
		}, "", "createdAt", `"2030-01-01T00:00:00Z"`},
		{"deciding field first", func(m *bundle.Manifest) {
			m.Targets[1].ExpiresAt = "2030-01-01T00:00:00Z"
			m.Targets[1].ContentDigest = zero
		}, "1", "contentDigest", `"` + zero + `"`},
		{"other field", func(m *bundle.Manifest) { m.Targets[2].DeliveryLease.ExpiresAfter = "9h" }, "2", "deliveryLease.expiresAfter", `"9h"`},
		{"target missing", func(m *bundle.Manifest) { m.Targets = m.Targets[1:] }, "0", "(entry)", ""},
		{"subjects after targets", func(m *bundle.Manifest) { m.Subjects[0].PolicyVersion = 99 }, "", "subjects[0].policyVersion", "99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, c := parse(), parse()
			tt.edit(c)
			d, err := bundle.FirstDifference(a, c)
			if err != nil {
				t.Fatal(err)
			}
			if tt.field == "" {
				if d != nil {
					t.Fatalf("got %+v, want no difference", d)
				}
				return
			}
			if d == nil {
				t.Fatalf("got no difference, want %s", tt.field)
			}
			wantTarget := ""
			if tt.target != "" {
				var i int
				fmt.Sscan(tt.target, &i)
				x := a.Targets[i]
				wantTarget = x.Host + "/" + x.ServiceID + "/" + a.EnvTag
			}
			if d.Target != wantTarget || d.Field != tt.field || d.B != tt.to {
				t.Errorf("got target %q field %q B %q, want %q %q %q", d.Target, d.Field, d.B, wantTarget, tt.field, tt.to)
			}
		})
	}
}

// TestParseRoot: the root alone gives what ParseFiles finds for the release
// parameters, the shards and the release digest; a root with bad release
// parameters is refused naming the field.
func TestParseRoot(t *testing.T) {
	b, err := readRelease(fixture)
	if err != nil {
		t.Fatal(err)
	}
	files, err := bundle.SplitArchive(b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundle.ParseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	root, err := bundle.ParseRoot(files[0].Path, files[0].Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if root.ReleaseHeader != m.ReleaseHeader || root.ReleaseDigest != m.ReleaseDigest || len(root.Shards) != len(files)-1 {
		t.Fatalf("root %+v, %s, %d shards; ParseFiles: %+v, %s, %d shard files", root.ReleaseHeader, root.ReleaseDigest, len(root.Shards), m.ReleaseHeader, m.ReleaseDigest, len(files)-1)
	}
	var n int64
	for i, s := range root.Shards {
		if files[i+1].Path != bundle.ShardPath(m.EnvTag, s.Host) {
			t.Errorf("shard %d: %s, file %s", i, s.Host, files[i+1].Path)
		}
		n += s.Targets
	}
	if n != int64(len(m.Targets)) {
		t.Errorf("the shards count %d targets, the release has %d", n, len(m.Targets))
	}
	if !slices.Equal(root.Inputs, m.Inputs) {
		t.Errorf("root inputs %v, ParseFiles: %v", root.Inputs, m.Inputs)
	}
	// Each shard's header states the inputs digest ParseFiles reads.
	for i, h := range m.HostInputs {
		if got := bundle.ShardInputsDigest(files[i+1].Bytes); got != h.Digest || h.Host != root.Shards[i].Host {
			t.Errorf("shard %s: ShardInputsDigest %q, ParseFiles %s: %q", root.Shards[i].Host, got, h.Host, h.Digest)
		}
	}
	if got := bundle.ShardInputsDigest(files[0].Bytes); got != "" {
		t.Errorf("ShardInputsDigest of the root: %q, want none", got)
	}
	if got := bundle.ShardInputsDigest(bytes.Replace(files[1].Bytes, []byte("\ninputsDigest: \"sha256:"), []byte("\ninputsDigest: \"sha256:x"), 1)); got != "" {
		t.Errorf("ShardInputsDigest of a shard with a malformed digest: %q, want none", got)
	}
	for _, c := range []struct{ from, to, field string }{
		{"\nbaseReleaseVersion: 0\n", "\nbaseReleaseVersion: 3\n", "baseReleaseVersion"},
		{"\ncreatedAt: \"", "\ncreatedAt: \"x", "createdAt"},
		{"\nsourceEventSequence: 1\n", "\nsourceEventSequence: 2\n", "sourceEventSequence"},
	} {
		bad := strings.Replace(string(files[0].Bytes), c.from, c.to, 1)
		if bad == string(files[0].Bytes) {
			t.Fatalf("%s: %q is not in the root", c.field, c.from)
		}
		if _, err := bundle.ParseRoot(files[0].Path, []byte(bad)); !errors.Is(err, bundle.ErrInvalidManifest) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want ErrInvalidManifest naming it", c.field, err)
		}
	}
}

// MarshalSize renders the same archive as Archive(Files()), whatever room
// it is given, and with the room of an earlier archive allocates it once.
func TestMarshalSize(t *testing.T) {
	m, _ := parseRelease(t, fixture)
	// A second and a third host, so that the root moves two shards up.
	for _, h := range []string{"y.example.net", "z.example.net"} {
		for _, x := range m.Targets[:len(m.Targets):len(m.Targets)] {
			if x.Host < "y" {
				x.Host = h
				m.Targets = append(m.Targets, x)
			}
		}
	}
	files, err := m.Files()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("%d files; the test needs a root and three shards", len(files))
	}
	want, digest := bundle.Archive(files), m.ReleaseDigest
	for _, size := range []int{0, 1, len(want) / 2, len(want), 4 * len(want)} {
		c := *m
		c.ReleaseDigest = ""
		got, err := c.MarshalSize(size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("MarshalSize(%d) differs from Archive(Files())", size)
		}
		if c.ReleaseDigest != digest {
			t.Errorf("MarshalSize(%d) set releaseDigest %s, want %s", size, c.ReleaseDigest, digest)
		}
		// Room for the archive is allocated once (a regrown buffer would
		// have a quarter more than it needed at least).
		if size >= len(want) && (cap(got) < size || cap(got) > size+size/16+8192) {
			t.Errorf("MarshalSize(%d): capacity %d, want about the room asked for", size, cap(got))
		}
	}
	if d, err := m.Digest(); err != nil || d != digest {
		t.Errorf("Digest() = %s, %v; want %s", d, err, digest)
	}
}
