// Package jcs holds the primitives of RFC 8785 (JSON Canonicalization
// Scheme) that configpub's one canonical encoder, internal/render, is built
// from: string escaping (AppendString) and member order by UTF-16 code units
// (CompareKeys); numbers are formatted by github.com/gowebpki/jcs. It also
// computes the "sha256:<hex>" digest of exact bytes.
//
// To canonicalize a value, use render.Canonical (value trees) or
// render.Marshal (Go values encoding/json accepts).
package jcs

import "github.com/configpub/configpub/internal/digest"

// BytesDigest returns "sha256:" + hex(SHA-256(b)) of exact bytes.
func BytesDigest(b []byte) string { return digest.FromBytes(b).String() }
