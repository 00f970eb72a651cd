// Package registry publishes configpub artifacts to OCI registries and
// pulls and verifies them.
//
// It implements the OCI Image Format Specification 1.1 artifact guidance
// (artifactType, the empty config descriptor), the OCI Distribution
// Specification 1.1 push and pull flows through oras-go v2, and cosign's
// simple-signing signature layout (a manifest tagged sha256-<hex>.sig whose
// application/vnd.dev.cosign.simplesigning.v1+json layer carries the
// payload and whose dev.cosignproject.cosign/signature annotation carries
// the base64 ECDSA P-256 signature), so that `cosign verify --key cosign.pub
// --insecure-ignore-tlog=true` accepts what Publish writes and `oras pull`
// returns the exact values.yml bytes. No transparency log is used.
//
// Pushes are idempotent (a tag that already names the expected manifest,
// blobs and signatures that exist are not uploaded again), run with bounded
// concurrency, and retry only transient failures (5xx, 429, 408, connection
// errors) with exponential back-off. Each tag is resolved once; everything
// after that works by digest.
//
// Requests per artifact: an unchanged re-publish costs one HEAD of the tag.
// A first publish costs the tag HEAD; a HEAD of the empty config and, when
// the repository lacks it, a cross-repository mount; a HEAD of the layer
// and its upload; a HEAD of the signature tag, the signature payload's
// upload (no HEAD first when no signature exists yet: the payload names
// this manifest, so nothing else can have stored it); the signature
// manifest PUT; and the manifest PUT under its tag, last, as the commit
// point. A blob upload is the Distribution Specification's single POST
// (one request) where the registry creates the blob from it, and POST+PUT
// where it does not (CNCF Distribution v3.1 answers 202): 11 requests per
// artifact against Distribution, 9 against a single-POST registry.
//
// Those figures are for remote registries, the default. The Client is
// written against oras-go's content interfaces (oras.Target): with
// Options.Storage it publishes to, pulls from and verifies in any target,
// such as an OCI image layout directory per repository (OCILayout, for
// air-gapped transfer with `oras cp --from-oci-layout`) or an oras-go
// memory store (Memory). Capabilities a target lacks (reference fetch and
// push in one request, cross-repository mount, single-POST upload) fall
// back to the plain content.Storage calls.
package registry
