package configserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/configpub/configpub/promoter"
)

func newJSONLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func readAll(resp *http.Response) ([]byte, error) { return io.ReadAll(resp.Body) }

// goldenAdvisor is the target.json of the golden prod advisor target.
type goldenAdvisor struct {
	Host, ServiceID, EnvTag, Audience, SubjectKind, SubjectName    string
	SnapshotID, PublicationID, PolicySnapshotID, LeaseProfile      string
	ArtifactDigest, ContentDigest, PolicyDigest, PropertySetDigest string
	ReleaseVersion, PolicyVersion, CompatibilityGeneration         int64
	SourceEventSequence                                            int64
}

// readGoldenAdvisor returns the golden prod advisor target's values.yml and
// target.json; a missing fixture fails the test.
func readGoldenAdvisor(t *testing.T) ([]byte, goldenAdvisor) {
	t.Helper()
	return readGolden(t, "com.networknt.agent-advisor-1.0.0")
}

// readGolden returns the values.yml and target.json of the golden prod
// target serviceID of dev.lightapi.net; a missing fixture fails the test.
func readGolden(t testing.TB, serviceID string) ([]byte, goldenAdvisor) {
	t.Helper()
	dir := filepath.Join("../fixtures/golden/prod/dev.lightapi.net", serviceID)
	values, err := os.ReadFile(filepath.Join(dir, "values.yml"))
	if err != nil {
		t.Fatalf("golden fixture missing: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "target.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f goldenAdvisor
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return values, f
}

// promoterTarget is f as the promoter records it with body values: the
// golden envelope's activation window (production: three weeks from
// goldenCreatedAt) and a lease refreshed after 5 and expiring after 15
// minutes.
func (f goldenAdvisor) promoterTarget(values []byte) promoter.Target {
	return promoter.Target{
		Host: f.Host, ServiceID: f.ServiceID, EnvTag: f.EnvTag, Audience: f.Audience,
		SubjectKind: f.SubjectKind, SubjectName: f.SubjectName,
		SnapshotID: f.SnapshotID, PublicationID: f.PublicationID, PolicySnapshotID: f.PolicySnapshotID,
		ReleaseVersion: f.ReleaseVersion, PolicyVersion: f.PolicyVersion,
		PolicyDigest: f.PolicyDigest, ContentDigest: f.ContentDigest, PropertySetDigest: f.PropertySetDigest,
		ArtifactDigest: f.ArtifactDigest, CompatibilityGeneration: f.CompatibilityGeneration,
		SourceEventSequence: f.SourceEventSequence, CreatedAt: goldenCreatedAt, LeaseProfile: f.LeaseProfile,
		ValidFrom: goldenCreatedAt, ExpiresAt: goldenCreatedAt.Add(504 * time.Hour),
		Lease:  promoter.LeaseWindow{RefreshAfter: 5 * time.Minute, ExpiresAfter: 15 * time.Minute},
		Values: values,
	}
}

// openPromoter opens a promoter store on e's database as a
// configpub_promoter member, signing with a new P-256 key and reading the
// time from clock, which the server then runs on too (runOn).
func (e *env) openPromoter(t *testing.T, clock func() time.Time) (*promoter.Store, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if clock != nil {
		e.runOn(clock) // the server serves the leases on the signer's clock
	}
	ps, err := promoter.Open(context.Background(), e.db.PoolURL(t, e.db.URLFor(t, "configpub_promoter")), promoter.Options{Signer: key, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return ps, key
}
