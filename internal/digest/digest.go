// Package digest is configpub's one content digest type: "sha256:" followed
// by the 64 lowercase hexadecimal digits of a SHA-256 sum, the form of
// every artifact, content, policy, release and key digest (and the OCI
// image-spec's sha256 digest form). Format digests with FromBytes or
// FromSum and check untrusted ones with Parse or Valid instead of writing
// "sha256:"+hex or a regular expression by hand.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Prefix is the algorithm prefix of every Digest.
const Prefix = "sha256:"

// ErrInvalid is returned by Parse for a string that is not a Digest.
var ErrInvalid = errors.New("not a sha256 digest (want sha256: and 64 lowercase hex digits)")

// Digest is "sha256:" + 64 lowercase hex digits.
type Digest string

// FromBytes returns the Digest of b.
func FromBytes(b []byte) Digest { return FromSum(sha256.Sum256(b)) }

// FromSum returns the Digest of a SHA-256 sum.
func FromSum(sum [sha256.Size]byte) Digest {
	var buf [len(Prefix) + 2*sha256.Size]byte
	copy(buf[:], Prefix)
	hex.Encode(buf[len(Prefix):], sum[:])
	return Digest(buf[:])
}

// Parse returns s as a Digest, or an error wrapping ErrInvalid naming s.
func Parse(s string) (Digest, error) {
	if !Valid(s) {
		return "", fmt.Errorf("%q: %w", s, ErrInvalid)
	}
	return Digest(s), nil
}

// Valid reports whether s is "sha256:" followed by exactly 64 lowercase
// hex digits.
func Valid(s string) bool {
	if len(s) != len(Prefix)+2*sha256.Size || s[:len(Prefix)] != Prefix {
		return false
	}
	for i := len(Prefix); i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// String returns the digest's text.
func (d Digest) String() string { return string(d) }

// Hex returns the 64 hex digits after "sha256:" ("" for an invalid d).
func (d Digest) Hex() string {
	if !Valid(string(d)) {
		return ""
	}
	return string(d[len(Prefix):])
}
