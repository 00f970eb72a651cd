package configserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

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
	dir := "../fixtures/golden/prod/dev.lightapi.net/com.networknt.agent-advisor-1.0.0"
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
