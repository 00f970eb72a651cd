package bundle

// HTTP header names of the delivery contract (GET /configs), shared by the
// Config Server that writes them and the runtime client that checks them.
// Except ETag, each is already in canonical MIME form, so a server may use
// it as an http.Header map key directly.
const (
	HeaderETag              = "ETag"
	HeaderReprDigest        = "Repr-Digest"
	HeaderSnapshotID        = "X-Config-Snapshot-Id"
	HeaderPublicationID     = "X-Policy-Publication-Id"
	HeaderPolicyDigest      = "X-Policy-Digest"
	HeaderContentDigest     = "X-Content-Digest"
	HeaderArtifactDigest    = "X-Artifact-Digest"
	HeaderReleaseVersion    = "X-Config-Release-Version"
	HeaderValidFrom         = "X-Config-Valid-From"
	HeaderRefreshAfter      = "X-Config-Refresh-After"
	HeaderExpiresAt         = "X-Config-Expires-At"
	HeaderManifest          = "X-Config-Manifest"
	HeaderManifestKeyID     = "X-Manifest-Key-Id"
	HeaderManifestSignature = "X-Manifest-Signature"
	// HeaderWatchMax is sent with every answer to GET /configs that asked to
	// wait (wait=): the longest wait, in whole seconds, the server grants.
	// Its absence tells a client that the server answers without waiting.
	HeaderWatchMax = "X-Config-Watch-Max"
	// HeaderHeldSequence is sent by a runtime with GET /configs: the
	// sequence of the delivery manifest it holds. A server whose current
	// pointer for the identity has a lower one (a replica behind the one
	// the runtime was answered by) answers 503 with Retry-After rather than
	// the older pointer, which the runtime would refuse.
	HeaderHeldSequence = "X-Config-Held-Sequence"
)

// Cross-service identity headers: a caller sends its current publication,
// the receiver checks it against its accepted list.
const (
	HeaderPeerPublicationID = "X-Policy-Publication-Id"
	HeaderPeerSnapshotID    = "X-Policy-Snapshot-Id"
	HeaderPeerPolicyDigest  = "X-Policy-Digest"
)

// Cross-service publication assertion: the caller's own signed delivery
// manifest (base64url of its exact bytes, no padding), its signature and
// key id, sent next to the three headers above so that a receiver that does
// not list the caller's publication can verify it under its trusted keys.
const (
	HeaderPeerManifest          = "X-Policy-Manifest"
	HeaderPeerManifestSignature = "X-Policy-Manifest-Signature"
	HeaderPeerManifestKeyID     = "X-Policy-Manifest-Key-Id"
)
