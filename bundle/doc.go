// Package bundle defines configpub's reviewed and signed documents and their
// codecs, without I/O:
//
//   - the release manifest (releases/<envTag>.yaml), reviewed in the pull
//     request that changes policy;
//   - the runtimePolicy envelope that opens every values.yml;
//   - the delivery manifest signed at every pointer move and streamed by the
//     Config Server.
//
// Canonical bytes follow RFC 8785 (JSON Canonicalization Scheme); digests are
// "sha256:" + lowercase hex.
package bundle
