package bundle

// OCI annotation keys of a values artifact's manifest. They name
// the identity the artifact is for; a verifier compares them with the
// identity it expects and with the envelope inside the layer.
const (
	AnnotationHost           = "dev.configpub.host"
	AnnotationServiceID      = "dev.configpub.service-id"
	AnnotationEnvTag         = "dev.configpub.env-tag"
	AnnotationAudience       = "dev.configpub.audience"
	AnnotationSnapshotID     = "dev.configpub.snapshot-id"
	AnnotationPublicationID  = "dev.configpub.publication-id"
	AnnotationPolicyDigest   = "dev.configpub.policy-digest"
	AnnotationContentDigest  = "dev.configpub.content-digest"
	AnnotationReleaseVersion = "dev.configpub.release-version"
)
