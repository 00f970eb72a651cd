package client

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/digest"
)

// sfKey and sfByteSeq are RFC 8941's key and Byte Sequence (3.2, 3.3.5).
const (
	sfKey     = `[a-z*][a-z0-9_.*-]*`
	sfByteSeq = `:[A-Za-z0-9+/=]*:`
)

// reprDigestDictionary is RFC 9530's Repr-Digest as configpub reads it:
// an RFC 8941 Dictionary whose members are key=Byte Sequence, separated
// by a comma with optional spaces or tabs (leading and trailing spaces
// allowed).
var (
	reprDigestDictionary = regexp.MustCompile(`^ *` + sfKey + `=` + sfByteSeq + `([ \t]*,[ \t]*` + sfKey + `=` + sfByteSeq + `)*[ \t]*$`)
	reprDigestMember     = regexp.MustCompile(`(` + sfKey + `)=:([A-Za-z0-9+/=]*):`)
)

// lastSHA256 is the value of the last sha-256 member of a dictionary
// reprDigestDictionary matches (RFC 8941: of duplicate keys the last
// wins), decoded, and whether there is one.
func lastSHA256(v string) ([]byte, bool) {
	var last string
	found := false
	for _, m := range reprDigestMember.FindAllStringSubmatch(v, -1) {
		if m[1] == "sha-256" {
			last, found = m[2], true
		}
	}
	if !found {
		return nil, false
	}
	raw, err := base64.StdEncoding.DecodeString(last)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(last) // RFC 8941: padding may be left out
	}
	return raw, err == nil
}

// FuzzDigestHeaders: the runtime treats a body as verified by ETag,
// X-Artifact-Digest and Repr-Digest only when each header present is well
// formed and names the body's digest: ETag exactly the strong
// "sha256:<hex>", X-Artifact-Digest exactly sha256:<hex>, and Repr-Digest
// an RFC 9530 dictionary (RFC 8941 syntax, Byte Sequence values) whose
// sha-256 member — the last one, if repeated — is the body's SHA-256. A
// malformed header is never taken as verification, and an absent one only
// on a 304 (require false).
func FuzzDigestHeaders(f *testing.F) {
	body := []byte("runtimePolicy: {}\n")
	sum := sha256.Sum256(body)
	dg := digest.FromBytes(body).String()
	repr := "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
	for _, s := range [][3]string{
		{`"` + dg + `"`, dg, repr},
		{`"` + dg + `"`, dg, "sha-512=:AAAA:, " + repr},
		{`"` + dg + `"`, "", ""},
		{"W/\"" + dg + `"`, dg, repr},
		{`"` + dg + `"`, dg, strings.TrimRight(repr, "=:") + ":"},
		// Found by reading parseReprDigest, not by the fuzzer: of two
		// sha-256 members the first was taken (RFC 8941: the last wins),
		// and members other than sha-256 were skipped unread, spaces
		// around "=" too.
		{`"` + dg + `"`, dg, repr + ", sha-256=:AAAA:"},
		{`"` + dg + `"`, dg, "Not A Member!, " + repr},
		{`"` + dg + `"`, dg, strings.Replace(repr, "=:", " = :", 1)},
	} {
		f.Add(s[0], s[1], s[2], true, body)
	}
	f.Fuzz(func(t *testing.T, etag, artifact, repr string, require bool, body []byte) {
		h := http.Header{}
		for name, v := range map[string]string{HeaderETag: etag, HeaderArtifactDigest: artifact, HeaderReprDigest: repr} {
			if v != "" {
				h.Set(name, v)
			}
		}
		sum := sha256.Sum256(body)
		dg := digest.FromSum(sum).String()
		if checkDigestHeaders(h, dg, require) != nil {
			return
		}
		if require && (etag == "" || artifact == "" || repr == "") {
			t.Fatalf("verified with a header absent: ETag %q, X-Artifact-Digest %q, Repr-Digest %q", etag, artifact, repr)
		}
		if etag != "" && etag != `"`+dg+`"` {
			t.Fatalf("ETag %q verified a body of digest %s", etag, dg)
		}
		if artifact != "" && artifact != dg {
			t.Fatalf("X-Artifact-Digest %q verified a body of digest %s", artifact, dg)
		}
		if repr != "" {
			if !reprDigestDictionary.MatchString(repr) {
				t.Fatalf("Repr-Digest %q is not an RFC 9530 dictionary of byte sequences, yet verified the body", repr)
			}
			if raw, ok := lastSHA256(repr); !ok || string(raw) != string(sum[:]) {
				t.Fatalf("Repr-Digest %q: its sha-256 member is not the body's SHA-256 %x, yet verified the body", repr, sum)
			}
		}
	})
}
