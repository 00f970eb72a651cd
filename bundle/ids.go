package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// idPublication is the domain-separation prefix of publication ids.
const idPublication = "configpub/publication/v2"

// DeriveID returns a lowercase UUIDv8 (RFC 9562) whose 122 free bits are the
// first bits of SHA-256(domain || 0x00 || part1 || 0x00 || part2 …), so a
// recompile reproduces it.
func DeriveID(domain string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(domain))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	x := hex.EncodeToString(b[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// PublicationID is the publication identity of release releaseVersion of
// envTag: every snapshot that release creates carries it, so revoking the
// publication revokes everything the release created.
func PublicationID(envTag string, releaseVersion int64) string {
	return DeriveID(idPublication, envTag, strconv.FormatInt(releaseVersion, 10))
}
