package promote

import (
	"crypto/sha256"
	"strings"

	"github.com/google/uuid"
)

// CommandID derives the command UUID of promoting commit to envTag:
// a UUIDv8 (RFC 9562 section 5.8) whose 122 free bits are the first bytes of
// SHA-256("configpub/command/v1\x00" + commit + "\x00" + envTag + "\x00" + "promote").
// The same commit promoted to the same environment is the same command, so
// a re-run (after a crash or a lost reply) replays instead of acting twice.
// commit is normalised to lower case.
func CommandID(commit, envTag string) string {
	return commitCommandID(commit, envTag, "promote")
}

// StageCommandID derives the command UUID of staging commit in envTag like
// CommandID, with "stage" in place of "promote".
func StageCommandID(commit, envTag string) string { return commitCommandID(commit, envTag, "stage") }

// RecordCommandID derives the command UUID of recording commit's release
// in envTag without activating it (a release promote catches up) like
// CommandID, with "record" in place of "promote".
func RecordCommandID(commit, envTag string) string { return commitCommandID(commit, envTag, "record") }

func commitCommandID(commit, envTag, verb string) string {
	sum := sha256.Sum256([]byte("configpub/command/v1\x00" + strings.ToLower(commit) + "\x00" + envTag + "\x00" + verb))
	var u uuid.UUID
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	return u.String()
}
