#!/usr/bin/env bash
# verify-response.sh: fetch and verify a Config Server response with stock
# tools (curl, sha256sum, base64, openssl or cosign), as a runtime in any
# language must before using it. Writes the verified values.yml to --out
# (atomically) and prints "verified <snapshotId> <artifactDigest>".
#
# Usage: scripts/verify-response.sh --server URL --token-file F --host H
#          --service-id S --env-tag E --key cosign.pub [--out FILE] [--cosign]
#
# Checks (any failure exits 1 and writes nothing):
#   1. the answer is 200 with every required header;
#   2. X-Manifest-Key-Id is the sha256 of --key's DER public key;
#   3. X-Manifest-Signature verifies over the exact X-Config-Manifest bytes
#      with --key (openssl, or `cosign verify-blob` with --cosign);
#   4. the signed manifest names the requested host, serviceId and envTag;
#   5. the lease: validFrom <= now < expiresAt (no skew allowance);
#   6. sha256 of the body equals the signed artifactDigest, ETag,
#      X-Artifact-Digest and Repr-Digest.
# It does not keep replay state or parse the YAML envelope: the Go client
# (configpub fetch) does both; see docs/wire-contract.md.
set -euo pipefail

server= token_file= host= service= env= key= out= use_cosign=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--server) server=$2; shift 2 ;;
	--token-file) token_file=$2; shift 2 ;;
	--host) host=$2; shift 2 ;;
	--service-id) service=$2; shift 2 ;;
	--env-tag) env=$2; shift 2 ;;
	--key) key=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--cosign) use_cosign=1; shift ;;
	*) echo "verify-response: unknown argument $1" >&2; exit 2 ;;
	esac
done
for v in server token_file host service env key; do
	if [[ -z ${!v} ]]; then
		echo "verify-response: --${v//_/-} is required" >&2
		exit 2
	fi
done

fail() { echo "verify-response: REJECTED: $*" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. Fetch. The token goes in a header file, never on the command line.
printf 'Authorization: Bearer %s\n' "$(tr -d '[:space:]' <"$token_file")" >"$work/auth"
status=$(curl -sS --max-redirs 0 -H @"$work/auth" -H 'Accept: application/yaml' \
	-D "$work/headers" -o "$work/body" -w '%{http_code}' \
	"${server%/}/configs?host=$host&serviceId=$service&envTag=$env") || fail "request failed"
[[ $status == 200 ]] || fail "status $status"

header() { # name -> value (case-insensitive, CR stripped); empty when absent
	grep -i "^$1:" "$work/headers" | head -n1 | cut -d: -f2- | tr -d '\r' | sed 's/^ *//'
}
manifest_b64=$(header X-Config-Manifest)
signature=$(header X-Manifest-Signature)
key_id=$(header X-Manifest-Key-Id)
artifact=$(header X-Artifact-Digest)
etag=$(header ETag)
repr=$(header Repr-Digest)
for h in manifest_b64 signature key_id artifact etag repr; do
	[[ -n ${!h} ]] || fail "missing header for $h"
done

# 2. Key id.
want_key_id="sha256:$(openssl pkey -pubin -in "$key" -outform DER | sha256sum | cut -d' ' -f1)"
[[ $key_id == "$want_key_id" ]] || fail "X-Manifest-Key-Id $key_id is not the trusted key ($want_key_id)"

# 3. Signature over the exact manifest bytes (base64url without padding).
b64url_decode() {
	local s
	s=$(tr -- '-_' '+/' <<<"$1")
	while (( ${#s} % 4 )); do s+="="; done
	base64 -d <<<"$s"
}
b64url_decode "$manifest_b64" >"$work/manifest.json" || fail "X-Config-Manifest is not base64url"
if [[ $use_cosign == 1 ]]; then
	printf '%s' "$signature" >"$work/manifest.sig"
	cosign verify-blob --key "$key" --signature "$work/manifest.sig" --insecure-ignore-tlog=true \
		"$work/manifest.json" >/dev/null 2>&1 || fail "manifest signature does not verify (cosign)"
else
	base64 -d <<<"$signature" >"$work/manifest.sig" || fail "X-Manifest-Signature is not base64"
	openssl dgst -sha256 -verify "$key" -signature "$work/manifest.sig" "$work/manifest.json" >/dev/null 2>&1 ||
		fail "manifest signature does not verify"
fi

# The manifest is canonical JSON (RFC 8785): members are "name":value with
# no whitespace, so a string member can be read with sed.
field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" "$work/manifest.json"; }

# 4. Identity.
[[ $(field host) == "$host" ]] || fail "manifest host $(field host) != $host"
[[ $(field serviceId) == "$service" ]] || fail "manifest serviceId $(field serviceId) != $service"
[[ $(field envTag) == "$env" ]] || fail "manifest envTag $(field envTag) != $env"

# 5. Lease.
now=$(date -u +%s)
from=$(date -u -d "$(field validFrom)" +%s) || fail "manifest validFrom unreadable"
until=$(date -u -d "$(field expiresAt)" +%s) || fail "manifest expiresAt unreadable"
(( from <= now )) || fail "lease not yet valid (validFrom $(field validFrom))"
(( now < until )) || fail "lease expired at $(field expiresAt)"

# 6. Digests of the body.
body_digest="sha256:$(sha256sum "$work/body" | cut -d' ' -f1)"
[[ $body_digest == "$(field artifactDigest)" ]] || fail "body $body_digest != signed artifactDigest $(field artifactDigest)"
[[ $body_digest == "$artifact" ]] || fail "body $body_digest != X-Artifact-Digest $artifact"
[[ "\"$body_digest\"" == "$etag" ]] || fail "body $body_digest != ETag $etag"
want_repr="sha-256=:$(openssl dgst -sha256 -binary "$work/body" | base64 -w0):"
[[ $repr == "$want_repr" ]] || fail "Repr-Digest $repr != $want_repr"

if [[ -n $out ]]; then
	cp "$work/body" "$out.tmp.$$"
	mv "$out.tmp.$$" "$out"
fi
echo "verified $(field snapshotId) $body_digest"
