// Package jcs canonicalizes JSON values per RFC 8785 (JSON Canonicalization
// Scheme) and computes the "sha256:<hex>" digests configpub's contracts use.
//
// Canonical is a thin layer over github.com/gowebpki/jcs: values are first
// encoded with encoding/json (so Go structs and maps can be passed directly)
// and the bytes are then transformed into their canonical form. AppendValue
// is the fast path for values decoded from YAML or JSON into an `any`: it
// writes the canonical form directly and is held byte-identical to
// gowebpki/jcs by an equivalence test and a fuzz target.
package jcs

import (
	"bytes"
	"encoding/json"
	"fmt"

	gojcs "github.com/gowebpki/jcs"

	"github.com/configpub/configpub/internal/digest"
)

// DigestPrefix is the algorithm prefix of every digest string configpub emits.
const DigestPrefix = digest.Prefix

// Canonical returns the RFC 8785 canonical JSON bytes of v. v may be any
// value encoding/json accepts, or a json.RawMessage / []byte holding JSON text.
func Canonical(v any) ([]byte, error) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, fmt.Errorf("jcs: encode: %w", err)
		}
		raw = buf.Bytes()
	}
	out, err := gojcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("jcs: canonicalize: %w", err)
	}
	return out, nil
}

// Digest returns "sha256:" + hex(SHA-256(Canonical(v))).
func Digest(v any) (string, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", err
	}
	return BytesDigest(b), nil
}

// BytesDigest returns "sha256:" + hex(SHA-256(b)) of exact bytes.
func BytesDigest(b []byte) string { return digest.FromBytes(b).String() }
