package compiler

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Domain-separation prefixes of derived ids.
const (
	idSnapshot       = "configpub/snapshot/v1"
	idPublication    = "configpub/publication/v1"
	idPolicySnapshot = "configpub/policy-snapshot/v1"
)

// deriveID returns a lowercase UUIDv8 (RFC 9562) whose 122 free bits are the
// first bits of SHA-256(domain || 0x00 || part1 || 0x00 || part2 …).
func deriveID(domain string, parts ...string) string {
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
	var sb strings.Builder
	x := hex.EncodeToString(b[:])
	sb.WriteString(x[0:8])
	sb.WriteByte('-')
	sb.WriteString(x[8:12])
	sb.WriteByte('-')
	sb.WriteString(x[12:16])
	sb.WriteByte('-')
	sb.WriteString(x[16:20])
	sb.WriteByte('-')
	sb.WriteString(x[20:32])
	return sb.String()
}
