package client

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/digest"
)

// Response headers of GET /configs (defined in bundle, shared with the
// Config Server).
const (
	HeaderETag              = bundle.HeaderETag
	HeaderReprDigest        = bundle.HeaderReprDigest
	HeaderSnapshotID        = bundle.HeaderSnapshotID
	HeaderPublicationID     = bundle.HeaderPublicationID
	HeaderPolicyDigest      = bundle.HeaderPolicyDigest
	HeaderContentDigest     = bundle.HeaderContentDigest
	HeaderArtifactDigest    = bundle.HeaderArtifactDigest
	HeaderReleaseVersion    = bundle.HeaderReleaseVersion
	HeaderValidFrom         = bundle.HeaderValidFrom
	HeaderRefreshAfter      = bundle.HeaderRefreshAfter
	HeaderExpiresAt         = bundle.HeaderExpiresAt
	HeaderManifest          = bundle.HeaderManifest
	HeaderManifestKeyID     = bundle.HeaderManifestKeyID
	HeaderManifestSignature = bundle.HeaderManifestSignature
	HeaderWatchMax          = bundle.HeaderWatchMax
)

// Cross-service identity headers.
const (
	HeaderPeerPublicationID = bundle.HeaderPeerPublicationID
	HeaderPeerSnapshotID    = bundle.HeaderPeerSnapshotID
	HeaderPeerPolicyDigest  = bundle.HeaderPeerPolicyDigest

	HeaderPeerManifest          = bundle.HeaderPeerManifest
	HeaderPeerManifestSignature = bundle.HeaderPeerManifestSignature
	HeaderPeerManifestKeyID     = bundle.HeaderPeerManifestKeyID
)

// isDigest accepts "sha256:" followed by 64 lowercase hex digits.
func isDigest(s string) bool { return digest.Valid(s) }

// parseETag returns the digest inside a strong ETag "sha256:<hex>".
func parseETag(v string) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || !isDigest(v[1:len(v)-1]) {
		return "", reject(ReasonHeaderInvalid, HeaderETag, "%q is not a strong ETag \"sha256:<hex>\"", v)
	}
	return v[1 : len(v)-1], nil
}

// parseReprDigest returns the sha-256 member of an RFC 9530 Repr-Digest
// as "sha256:<hex>". The field is read as an RFC 8941 Dictionary whose
// members are key=Byte Sequence (members of other algorithms are read and
// ignored); of repeated sha-256 members the last counts, as RFC 8941 says.
// A field that is not such a dictionary (a member of another form, spaces
// around "=", parameters, a trailing comma) has no sha-256 value: it is
// never taken to verify a body.
func parseReprDigest(v string) (string, error) {
	var sum []byte
	found := false
	rest := strings.TrimLeft(v, " ")
	for {
		key, val, tail, ok := dictionaryMember(rest)
		if !ok {
			found = false
			break
		}
		if key == "sha-256" {
			sum, found = val, true
		}
		rest = strings.TrimLeft(tail, " \t")
		if rest == "" {
			break
		}
		if rest[0] != ',' {
			found = false
			break
		}
		rest = strings.TrimLeft(rest[1:], " \t")
		if rest == "" { // a trailing comma
			found = false
			break
		}
	}
	if !found || len(sum) != sha256.Size {
		return "", reject(ReasonHeaderInvalid, HeaderReprDigest, "%q is not an RFC 9530 dictionary with a sha-256=:<base64>: member", v)
	}
	return digest.FromSum([sha256.Size]byte(sum)).String(), nil
}

// dictionaryMember reads one key=:base64: member from the start of s
// (RFC 8941 key and Byte Sequence; padding may be left out) and returns
// the key, the decoded bytes and what follows it.
func dictionaryMember(s string) (key string, val []byte, tail string, ok bool) {
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] == '*' ||
		i > 0 && (s[i] >= '0' && s[i] <= '9' || s[i] == '_' || s[i] == '-' || s[i] == '.')) {
		i++
	}
	if i == 0 || i+1 >= len(s) || s[i] != '=' || s[i+1] != ':' {
		return "", nil, "", false
	}
	key, s = s[:i], s[i+2:]
	end := strings.IndexByte(s, ':')
	if end < 0 {
		return "", nil, "", false
	}
	enc := s[:end]
	for j := 0; j < len(enc); j++ {
		if c := enc[j]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return "", nil, "", false
		}
	}
	raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(enc, "="))
	if err != nil || strings.Contains(strings.TrimRight(enc, "="), "=") {
		return "", nil, "", false
	}
	return key, raw, s[end+1:], true
}

// checkDigestHeaders compares the recomputed body digest with ETag,
// X-Artifact-Digest and Repr-Digest. When all three agree with each other but
// not with the body, the body is what was damaged (Field "body"); otherwise
// the first disagreeing header is named. With require false (a 304) absent
// headers are skipped.
func checkDigestHeaders(h http.Header, bodyDigest string, require bool) error {
	var got []announced
	for _, name := range []string{HeaderETag, HeaderArtifactDigest, HeaderReprDigest} {
		v := h.Get(name)
		if v == "" {
			if require {
				return reject(ReasonHeaderMissing, name, "required header is absent")
			}
			continue
		}
		var d string
		var err error
		switch name {
		case HeaderETag:
			d, err = parseETag(v)
		case HeaderReprDigest:
			d, err = parseReprDigest(v)
		default:
			d = v
			if !isDigest(v) {
				err = reject(ReasonHeaderInvalid, name, "%q is not sha256:<hex>", v)
			}
		}
		if err != nil {
			return err
		}
		got = append(got, announced{name, d})
	}
	var bad []announced
	for _, a := range got {
		if a.digest != bodyDigest {
			bad = append(bad, a)
		}
	}
	switch {
	case len(bad) == 0:
		return nil
	case len(bad) == len(got) && len(got) > 1 && sameDigest(bad):
		return reject(ReasonDigestMismatch, "body", "body %s != announced %s", bodyDigest, bad[0].digest)
	default:
		return reject(ReasonDigestMismatch, bad[0].name, "%s %s != body %s", bad[0].name, bad[0].digest, bodyDigest)
	}
}

// announced is a digest a response header announces.
type announced struct{ name, digest string }

func sameDigest(xs []announced) bool {
	for _, x := range xs[1:] {
		if x.digest != xs[0].digest {
			return false
		}
	}
	return true
}

// manifestHeaders extracts the signed manifest, its signature and key id.
func manifestHeaders(h http.Header) (mbytes []byte, sig, keyID string, err error) {
	enc := h.Get(HeaderManifest)
	sig = h.Get(HeaderManifestSignature)
	keyID = h.Get(HeaderManifestKeyID)
	for _, p := range []struct{ name, v string }{{HeaderManifest, enc}, {HeaderManifestSignature, sig}, {HeaderManifestKeyID, keyID}} {
		if p.v == "" {
			return nil, "", "", reject(ReasonHeaderMissing, p.name, "required header is absent")
		}
	}
	mbytes, derr := decodeManifest(enc)
	if derr != nil {
		return nil, "", "", &VerificationError{Reason: ReasonHeaderInvalid, Field: HeaderManifest, Detail: "not canonical base64url without padding", Err: derr}
	}
	if !isDigest(keyID) {
		return nil, "", "", reject(ReasonHeaderInvalid, HeaderManifestKeyID, "%q is not sha256:<hex>", keyID)
	}
	return mbytes, sig, keyID, nil
}

// decodeManifest decodes a signed manifest header: base64url without
// padding in its one canonical form (Strict: no stray bits in the last
// character), and no character outside the alphabet (CR and LF included,
// which the decoder would otherwise skip).
func decodeManifest(enc string) ([]byte, error) {
	if i := strings.IndexFunc(enc, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}); i >= 0 {
		return nil, fmt.Errorf("byte %d is outside the base64url alphabet", i)
	}
	return base64.RawURLEncoding.Strict().DecodeString(enc)
}

// checkHeadersAgainstManifest requires the descriptive headers to equal the
// signed manifest: an unsigned header can never disagree with what is signed.
// With require false (a 304) absent headers are skipped.
func checkHeadersAgainstManifest(h http.Header, m *bundle.DeliveryManifest, require bool) error {
	str := []struct{ name, want string }{
		{HeaderSnapshotID, m.SnapshotID},
		{HeaderPublicationID, m.PublicationID},
		{HeaderPolicyDigest, m.PolicyDigest},
		{HeaderContentDigest, m.ContentDigest},
		{HeaderReleaseVersion, strconv.FormatInt(m.ReleaseVersion, 10)},
	}
	for _, s := range str {
		v := h.Get(s.name)
		if v == "" {
			if require {
				return reject(ReasonHeaderMissing, s.name, "required header is absent")
			}
			continue
		}
		if v != s.want {
			return reject(ReasonHeaderMismatch, s.name, "header %q != signed manifest %q", v, s.want)
		}
	}
	times := []struct{ name, want string }{
		{HeaderValidFrom, m.ValidFrom},
		{HeaderRefreshAfter, m.RefreshAfter},
		{HeaderExpiresAt, m.ExpiresAt},
	}
	for _, s := range times {
		v := h.Get(s.name)
		if v == "" {
			if require {
				return reject(ReasonHeaderMissing, s.name, "required header is absent")
			}
			continue
		}
		got, err1 := parseHeaderTime(v)
		want, err2 := time.Parse(time.RFC3339Nano, s.want)
		if err1 != nil || err2 != nil || !got.Equal(want) {
			return reject(ReasonHeaderMismatch, s.name, "header %q != signed manifest %q", v, s.want)
		}
	}
	return nil
}

// parseHeaderTime accepts RFC 3339 (what the manifest holds) or an HTTP-date.
func parseHeaderTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return http.ParseTime(v)
}
