package client

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Verification failures are *VerificationError values that
// also match ErrRejected.
var (
	// ErrRejected matches every *VerificationError: a response or file was
	// received and failed verification; nothing was applied.
	ErrRejected = errors.New("configuration rejected")
	// ErrUnavailable means the Config Server could not be reached or did not
	// answer with a configuration (network error, 401, 403, 404, 5xx). Nothing
	// was applied; the current snapshot, if any, is kept.
	ErrUnavailable = errors.New("config server unavailable")
	// ErrExpired means the current snapshot's lease has run out: protected
	// calls must fail closed.
	ErrExpired = errors.New("configuration lease expired: failing closed")
	// ErrNoSnapshot means no verified snapshot has been loaded yet: protected
	// calls must fail closed.
	ErrNoSnapshot = errors.New("no verified configuration: failing closed")
	// ErrNoTrustedKey is returned by New when Options.TrustedKeys is empty.
	ErrNoTrustedKey = errors.New("no trusted manifest key configured")
	// ErrNotReportable is returned by ReportEvidence for outcomes the Config
	// Server does not record (only APPLIED and REJECTED are).
	ErrNotReportable = errors.New("evidence outcome is not reportable")
	// ErrTokenMissing is returned by a TokenFile source whose file does not
	// exist or is empty: the token has not been provisioned yet (a
	// Kubernetes projected token, a Vault agent's sink). WaitToken waits
	// for it.
	ErrTokenMissing = errors.New("token not provisioned")
	// ErrPublicationRejected is returned by CheckPeer for an incoming call
	// whose publication identity is unknown or forged.
	ErrPublicationRejected = errors.New("peer publication not accepted")
)

// Reason is a stable, machine-readable code naming why a load ended as it did.
type Reason string

// Reasons for REJECTED outcomes (a response or file failed verification).
const (
	ReasonDigestMismatch          Reason = "DIGEST_MISMATCH"              // body digest != ETag / X-Artifact-Digest / Repr-Digest
	ReasonHeaderMissing           Reason = "HEADER_MISSING"               // a required response header is absent
	ReasonHeaderInvalid           Reason = "HEADER_INVALID"               // a header is malformed
	ReasonHeaderMismatch          Reason = "HEADER_MISMATCH"              // a header disagrees with the signed manifest
	ReasonParse                   Reason = "PARSE_ERROR"                  // not a single well-formed YAML document
	ReasonDuplicateKey            Reason = "DUPLICATE_KEY"                // a mapping key appears twice
	ReasonUnknownField            Reason = "UNKNOWN_FIELD"                // a top-level or envelope field not in the schema
	ReasonMissingField            Reason = "MISSING_FIELD"                // a required field is absent
	ReasonInvalidField            Reason = "INVALID_FIELD"                // wrong type or format, or a value with no JSON equivalent
	ReasonSchemaUnsupported       Reason = "SCHEMA_UNSUPPORTED"           // runtimePolicy.schemaVersion is not bundle.SchemaVersion
	ReasonIdentityMismatch        Reason = "IDENTITY_MISMATCH"            // envelope host/serviceId/envTag != the requested identity
	ReasonAudienceMismatch        Reason = "AUDIENCE_MISMATCH"            // envelope audience != the configured audience
	ReasonContentDigestMismatch   Reason = "CONTENT_DIGEST_MISMATCH"      // recomputed contentDigest != runtimePolicy.contentDigest
	ReasonPropertySetMismatch     Reason = "PROPERTY_SET_DIGEST_MISMATCH" // recomputed propertySetDigest != manifest.propertySetDigest
	ReasonManifestInvalid         Reason = "MANIFEST_INVALID"             // delivery manifest not decodable / not canonical
	ReasonUntrustedKey            Reason = "UNTRUSTED_KEY"                // X-Manifest-Key-Id is not a trusted key
	ReasonSignatureInvalid        Reason = "SIGNATURE_INVALID"            // the signature does not verify
	ReasonManifestMismatch        Reason = "MANIFEST_MISMATCH"            // a signed manifest field != the envelope or body (mix-and-match)
	ReasonNotYetValid             Reason = "NOT_YET_VALID"                // now < validFrom - skew
	ReasonClockSkew               Reason = "CLOCK_SKEW"                   // NOT_YET_VALID or EXPIRED by this runtime's clock only: the answer's Date is ahead of it (or behind it) by more than the skew, and by that Date the lease holds
	ReasonExpired                 Reason = "EXPIRED"                      // now >= expiresAt + skew
	ReasonRevocationRegression    Reason = "REVOCATION_REGRESSION"        // revocation epoch lower than one seen
	ReasonSequenceRegression      Reason = "SEQUENCE_REGRESSION"          // (sequence, issuedAt) lower than one seen: a replay
	ReasonEpochBelowEnvelope      Reason = "EPOCH_BELOW_ENVELOPE"         // manifest revocationEpoch < the envelope's (the minimum it was compiled for)
	ReasonOutsideActivationWindow Reason = "OUTSIDE_ACTIVATION_WINDOW"    // manifest activatedAt outside the envelope's validFrom..expiresAt
	ReasonSeenStateUnreadable     Reason = "SEEN_STATE_UNREADABLE"        // the seen-state file is damaged or unreadable: nothing is applied until it is repaired or removed
	ReasonSeenStateUnwritable     Reason = "SEEN_STATE_UNWRITABLE"        // the seen-state could not be persisted: the candidate was not applied
	ReasonBodyTooLarge            Reason = "BODY_TOO_LARGE"               // body larger than Options.MaxBodyBytes
	ReasonTruncated               Reason = "TRUNCATED"                    // body shorter than announced / connection cut
	ReasonUnexpectedNotModified   Reason = "UNEXPECTED_NOT_MODIFIED"      // 304 with nothing to keep, or for another ETag
	ReasonCacheCorrupt            Reason = "CACHE_CORRUPT"                // last-known-good file damaged or unreadable
	ReasonUnsignedArtifact        Reason = "UNSIGNED_ARTIFACT"            // OCI artifact without a verified cosign signature
	ReasonNoDeliveryManifest      Reason = "NO_DELIVERY_MANIFEST"         // OCI artifact without a signed delivery manifest for it
	ReasonManifestPhase           Reason = "MANIFEST_PHASE_MISMATCH"      // a candidate manifest on a load of the current configuration, or a current-phase manifest on a candidate prefetch
	// ReasonOutUnwritable is the fetch sidecar's, never a load's: the
	// verified snapshot could not be written to --out (ENOSPC, a read-only
	// file system), so its runtime still reads what the file held before.
	ReasonOutUnwritable Reason = "OUT_UNWRITABLE"
)

// ReasonCandidateLease is the UNAVAILABLE reason of a prefetch whose
// candidate manifest lease is expired or not yet valid: the promoter renews
// it, and it is not a verdict on the candidate.
const ReasonCandidateLease Reason = "CANDIDATE_LEASE_STALE"

// Reasons for UNAVAILABLE outcomes (nothing usable was received).
const (
	ReasonUnreachable      Reason = "UNREACHABLE"       // network error or timeout
	ReasonTokenUnavailable Reason = "TOKEN_UNAVAILABLE" // the TokenSource failed
	ReasonUnauthorized     Reason = "UNAUTHORIZED"      // 401
	ReasonForbidden        Reason = "FORBIDDEN"         // 403
	ReasonNotFound         Reason = "NOT_FOUND"         // 404: no current snapshot
	ReasonRetired          Reason = "RETIRED"           // 410: a release retired the identity (its target was removed)
	ReasonServerError      Reason = "SERVER_ERROR"      // 5xx
	ReasonUnexpectedStatus Reason = "UNEXPECTED_STATUS" // any other status
	ReasonRedirectRefused  Reason = "REDIRECT_REFUSED"  // a 3xx answer: the client follows no redirect
	ReasonNoCache          Reason = "NO_CACHE"          // no last-known-good file to restore
)

// Reasons for APPLIED and UNCHANGED outcomes.
const (
	ReasonNewSnapshot  Reason = "NEW_SNAPSHOT"  // a different snapshot (or manifest sequence) was applied
	ReasonLeaseRenewed Reason = "LEASE_RENEWED" // same snapshot, later signed lease
	ReasonRestored     Reason = "RESTORED"      // last-known-good re-verified and restored from CacheDir
	ReasonNotModified  Reason = "NOT_MODIFIED"  // 304, or the same bytes and manifest again
)

// VerificationError reports why a candidate configuration was rejected. Field
// names the header, envelope field (runtimePolicy.x), manifest field
// (manifest.x) or file position (values.yml:line:field) that failed; Detail
// names the values involved (digest pairs, ids) and never holds a body or a
// secret.
type VerificationError struct {
	Reason Reason
	Field  string
	Detail string
	Err    error // underlying cause, if any

	validFrom time.Time // NOT_YET_VALID of a lease: its validFrom, for the clock-skew diagnosis
	expiresAt time.Time // EXPIRED of a lease: its expiresAt, for the clock-skew diagnosis
}

func (e *VerificationError) Error() string {
	var b strings.Builder
	b.WriteString("verify")
	if e.Field != "" {
		b.WriteString(" " + e.Field)
	}
	b.WriteString(": " + string(e.Reason))
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *VerificationError) Unwrap() error { return e.Err }

// Is makes every VerificationError match ErrRejected.
func (e *VerificationError) Is(target error) bool { return target == ErrRejected }

func reject(r Reason, field, format string, args ...any) *VerificationError {
	return &VerificationError{Reason: r, Field: field, Detail: fmt.Sprintf(format, args...)}
}

// UnavailableError reports why no configuration could be fetched. It matches
// ErrUnavailable.
type UnavailableError struct {
	Reason Reason
	Status int // HTTP status, 0 for network errors
	Err    error
}

func (e *UnavailableError) Error() string {
	msg := "fetch configuration: " + string(e.Reason)
	if e.Status != 0 {
		msg += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes every UnavailableError match ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
