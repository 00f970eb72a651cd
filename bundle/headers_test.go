package bundle

import (
	"net/textproto"
	"testing"
)

// TestHeadersCanonical: the server assigns these names as header map keys
// without canonicalizing them, so each must already be canonical (ETag,
// spelled as RFC 9110 does, is canonicalized where it is written).
func TestHeadersCanonical(t *testing.T) {
	for _, h := range []string{
		HeaderReprDigest, HeaderSnapshotID, HeaderPublicationID, HeaderPolicyDigest,
		HeaderContentDigest, HeaderArtifactDigest, HeaderReleaseVersion, HeaderValidFrom,
		HeaderRefreshAfter, HeaderExpiresAt, HeaderManifest, HeaderManifestKeyID,
		HeaderManifestSignature, HeaderPeerPublicationID, HeaderPeerSnapshotID, HeaderPeerPolicyDigest,
		HeaderWatchMax,
	} {
		if got := textproto.CanonicalMIMEHeaderKey(h); got != h {
			t.Errorf("header %q: canonical form is %q", h, got)
		}
	}
	if got := textproto.CanonicalMIMEHeaderKey(HeaderETag); got != "Etag" {
		t.Errorf("got %q, want ETag to canonicalize to Etag", got)
	}
}
