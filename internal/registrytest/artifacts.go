package registrytest

import (
	"crypto/sha256"
	"fmt"
	"iter"
	"time"

	digest "github.com/opencontainers/go-digest"

	"github.com/configpub/configpub/registry"
)

// GeneratedCreatedAt is the fixed creation time of generated artifacts.
var GeneratedCreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Artifacts returns n deterministic, distinct target artifacts for envTag
// and releaseVersion (hosts h000.example, service ids svc-<i>), with small
// values.yml bodies. The same arguments always give the same bytes.
func Artifacts(n int, envTag string, releaseVersion int64) []registry.Artifact {
	out := make([]registry.Artifact, 0, n)
	for a := range ArtifactSeq(n, envTag, releaseVersion) {
		out = append(out, a)
	}
	return out
}

// ArtifactSeq yields the artifacts of Artifacts one at a time, generating
// each when it is asked for (nothing is kept), for streaming publications
// of any size. The error is always nil.
func ArtifactSeq(n int, envTag string, releaseVersion int64) iter.Seq2[registry.Artifact, error] {
	return func(yield func(registry.Artifact, error) bool) {
		for i := range n {
			if !yield(artifact(i, envTag, releaseVersion), nil) {
				return
			}
		}
	}
}

func artifact(i int, envTag string, releaseVersion int64) registry.Artifact {
	host := fmt.Sprintf("h%03d.example", i/10)
	svc := fmt.Sprintf("svc-%d", i)
	values := fmt.Appendf(nil, "agentPolicy:\n  schemaVersion: 1\n  host: %s\n  serviceId: %s\n  envTag: %s\n  releaseVersion: %d\n  rules:\n    - allow: read\n", host, svc, envTag, releaseVersion)
	return registry.Artifact{
		Host: host, ServiceID: svc, EnvTag: envTag, Audience: "agent",
		SnapshotID:     uuidish("snapshot", envTag, host, svc, releaseVersion),
		PublicationID:  uuidish("publication", envTag, host, svc, releaseVersion),
		PolicyDigest:   digest.FromString("policy " + host + svc).String(),
		ContentDigest:  digest.FromString("content " + host + svc).String(),
		ArtifactDigest: digest.FromBytes(values).String(),
		ReleaseVersion: releaseVersion,
		CreatedAt:      GeneratedCreatedAt,
		Values:         values,
	}
}

// uuidish derives a stable UUID-formatted string (version 8) from its parts.
func uuidish(parts ...any) string {
	s := sha256.Sum256(fmt.Append(nil, parts...))
	s[6] = s[6]&0x0f | 0x80
	s[8] = s[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}
