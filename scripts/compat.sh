#!/usr/bin/env bash
# compat: check configpub's OCI artifacts with the tools people already
# trust, unchanged (issue 3 "Must show" 1):
#   - pinned cosign, oras, crane and the CNCF Distribution `registry` binary
#     are `go install`ed from the Go module proxy into .configpub/tools/bin;
#   - against the embedded registry (`configpub registry serve`) and the
#     stand-alone `registry` binary, every fixture target (and the release)
#     is published, then for each manifest `cosign verify --key cosign.pub
#     --insecure-ignore-tlog=true --allow-insecure-registry` succeeds,
#     `oras pull --plain-http` returns bytes identical to the compiled
#     values.yml, `crane manifest` shows the artifact type and annotations,
#     and `configpub verify-oci` accepts it for its own identity and refuses
#     it for another;
#   - key interop both ways: a configpub key signs with `cosign sign-blob`,
#     a `cosign generate-key-pair` key publishes with configpub, a cosign
#     signature appended by `cosign sign` verifies with configpub;
#   - a re-publish stops at the release artifact and, with --recheck,
#     uploads nothing; a signature copied from another artifact
#     fails both `cosign verify` and `configpub verify-oci`;
#   - `publish --oci-layout` output copied to the registry with `oras cp
#     --from-oci-layout` passes `cosign verify` and `configpub verify-oci`.
# Usage: scripts/compat.sh [--install-only]   (CONFIGPUB_BIN=path tests a prebuilt binary)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TOOLS="${CONFIGPUB_TOOLS:-$ROOT/.configpub/tools}"
BIN="$TOOLS/bin"
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

COSIGN=github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5
ORAS=oras.land/oras/cmd/oras@v1.3.6
CRANE=github.com/google/go-containerregistry/cmd/crane@v0.22.1
DISTRIBUTION=github.com/distribution/distribution/v3/cmd/registry@v3.1.2

install_tool() { # name module@version
	local name=$1 pkg=$2 stamp="$TOOLS/$1.version"
	if [[ -x "$BIN/$name" && -f "$stamp" && "$(cat "$stamp")" == "$pkg" ]]; then
		return
	fi
	echo "compat: go install $pkg"
	mkdir -p "$BIN"
	GOBIN="$BIN" go install "$pkg"
	echo "$pkg" >"$stamp"
}
install_tool cosign "$COSIGN"
install_tool oras "$ORAS"
install_tool crane "$CRANE"
install_tool registry "$DISTRIBUTION"
if [[ "${1:-}" == "--install-only" ]]; then
	exit 0
fi
export PATH="$BIN:$PATH"

work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

fail() {
	echo "compat: FAIL: $*" >&2
	exit 1
}

# Isolate every tool from the developer's credentials and sigstore caches,
# but keep Go's module and build caches.
GOPATH=$(go env GOPATH) GOMODCACHE=$(go env GOMODCACHE) GOCACHE=$(go env GOCACHE)
export GOPATH GOMODCACHE GOCACHE
export HOME="$work/home" DOCKER_CONFIG="$work/home/.docker"
mkdir -p "$DOCKER_CONFIG"
export COSIGN_PASSWORD=configpub-compat

# CONFIGPUB_BIN: test a prebuilt configpub instead of building this tree.
cp="${CONFIGPUB_BIN:-$work/configpub}"
if [[ -z "${CONFIGPUB_BIN:-}" ]]; then
	go build -o "$cp" ./cmd/configpub
fi
REPO="$ROOT/fixtures/policy-repo"
ENV=prod

# Ports below Linux's ephemeral range (32768-60999 by default), so that an
# outgoing connection of another process cannot take the port between this
# check and the registry's bind.
free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 12000))
		if ! (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	fail "no free port"
}

wait_ready() { # url pid log
	for _ in $(seq 1 300); do # 30 s: a loaded shared machine starts slowly
		if curl -fs -o /dev/null "$1"; then
			return
		fi
		if ! kill -0 "$2" 2>/dev/null; then
			tail -5 "$3" >&2
			fail "registry for $1 exited before it came up (its log above)"
		fi
		sleep 0.1
	done
	tail -5 "$3" >&2
	fail "registry at $1 did not come up (its log above)"
}

# --- keys, both directions ---------------------------------------------------
"$cp" keygen --out "$work/keys" >/dev/null
echo "compat payload" >"$work/blob"
cosign sign-blob --key "$work/keys/cosign.key" --tlog-upload=false -y \
	--output-signature "$work/blob.sig" "$work/blob" >/dev/null 2>"$work/cosign.err" ||
	{ cat "$work/cosign.err" >&2; fail "cosign sign-blob cannot use a configpub key"; }
cosign verify-blob --key "$work/keys/cosign.pub" --signature "$work/blob.sig" \
	--insecure-ignore-tlog=true "$work/blob" >/dev/null 2>"$work/cosign.err" ||
	{ cat "$work/cosign.err" >&2; fail "cosign verify-blob rejects a configpub-key signature"; }
echo "compat: ok: cosign signs with a configpub key"

mkdir -p "$work/cosignkeys"
(cd "$work/cosignkeys" && cosign generate-key-pair >/dev/null 2>&1) || fail "cosign generate-key-pair"
CONFIGPUB_COSIGN_KEY_DIR="$work/cosignkeys" go test -count=1 -run '^TestLoadCosignGeneratedKey$' ./internal/cosignkey >/dev/null ||
	fail "configpub cannot load a key from cosign generate-key-pair"
echo "compat: ok: configpub loads a cosign generate-key-pair key"

# --- one registry --------------------------------------------------------------
check_registry() { # name host keydir
	local name=$1 host=$2 keys=$3
	local prefix="$host/configpub" out="$work/out-$name" log="$work/publish-$name.log"
	"$cp" publish --repo "$REPO" --env "$ENV" --registry "$prefix" --key "$keys/cosign.key" \
		--plain-http --out "$out" >"$log" || { cat "$log" >&2; fail "$name: publish"; }
	local n=0 values=0
	# Each artifact line: "pushed  REPOSITORY@sha256:<hex> (r<N>, <bytes> bytes uploaded)".
	while read -r _ ref _; do
		local repo=${ref%@*} path
		path=${repo#"$prefix/"}
		cosign verify --key "$keys/cosign.pub" --insecure-ignore-tlog=true --allow-insecure-registry \
			"$ref" >"$work/cosign.out" 2>"$work/cosign.err" ||
			{ cat "$work/cosign.err" >&2; fail "$name: cosign verify $ref"; }
		if [[ "$path" == "$ENV/release" ]]; then
			crane manifest --insecure "$ref" |
				jq -e --arg env "$ENV" '.artifactType == "application/vnd.configpub.release.v1+json"
					and .annotations["dev.configpub.env-tag"] == $env' >/dev/null ||
				fail "$name: crane manifest $ref lacks the release artifactType/annotations"
			"$cp" verify-oci "$ref" --trust-key "$keys/cosign.pub" --plain-http >/dev/null || fail "$name: verify-oci $ref"
		else
			local env=${path%%/*} rest=${path#*/}
			local thost=${rest%%/*} svc=${rest#*/}
			rm -rf "$work/pull" && mkdir -p "$work/pull"
			oras pull --plain-http -o "$work/pull" "$ref" >/dev/null || fail "$name: oras pull $ref"
			cmp -s "$work/pull/values.yml" "$out/$env/$thost/$svc/values.yml" ||
				fail "$name: oras pull $ref is not byte-identical to $out/$env/$thost/$svc/values.yml"
			crane manifest --insecure "$ref" |
				jq -e --arg h "$thost" --arg s "$svc" --arg e "$env" '
					.artifactType == "application/vnd.configpub.values.v1+yaml"
					and .config.mediaType == "application/vnd.oci.empty.v1+json"
					and (.layers | length) == 1
					and .layers[0].mediaType == "application/yaml"
					and .layers[0].annotations["org.opencontainers.image.title"] == "values.yml"
					and .annotations["dev.configpub.host"] == $h
					and .annotations["dev.configpub.service-id"] == $s
					and .annotations["dev.configpub.env-tag"] == $e
					and ([.annotations | keys[] | select(startswith("dev.configpub."))] | length) == 9
					and (.annotations["org.opencontainers.image.created"] | length) > 0' >/dev/null ||
				fail "$name: crane manifest $ref lacks the artifactType/annotations"
			"$cp" verify-oci "$ref" --trust-key "$keys/cosign.pub" --plain-http \
				--host "$thost" --service-id "$svc" --env "$env" >/dev/null || fail "$name: verify-oci $ref"
			if "$cp" verify-oci "$ref" --trust-key "$keys/cosign.pub" --plain-http \
				--host "$thost" --service-id "not-$svc" --env "$env" >/dev/null 2>&1; then
				fail "$name: verify-oci accepted $ref for another service id"
			fi
			values=$((values + 1))
		fi
		n=$((n + 1))
	done < <(grep -E '^(pushed|present) ' "$log")
	[[ $values -gt 0 ]] || fail "$name: no target artifacts published"
	echo "compat: ok: $name: $n artifacts ($values targets + release): cosign verify, oras pull byte-identical, crane manifest, verify-oci"

	"$cp" publish --repo "$REPO" --env "$ENV" --registry "$prefix" --key "$keys/cosign.key" \
		--plain-http >"$log" || fail "$name: re-publish"
	grep -q "is already published to $prefix: .* nothing compiled" "$log" ||
		{ tail -1 "$log" >&2; fail "$name: re-publish did not stop at the release artifact before compiling"; }
	"$cp" publish --repo "$REPO" --env "$ENV" --registry "$prefix" --key "$keys/cosign.key" \
		--plain-http --recheck >"$log" || fail "$name: re-publish --recheck"
	grep -q ": 0 pushed, $n already present, 0 bytes uploaded" "$log" ||
		{ tail -1 "$log" >&2; fail "$name: re-publish --recheck uploaded something"; }
	echo "compat: ok: $name: re-publish stops at the release artifact (nothing compiled); --recheck finds every artifact present"
}

# --- embedded registry, configpub key -------------------------------------------
port=$(free_port)
"$cp" registry serve --dir "$work/embedded" --listen "127.0.0.1:$port" >"$work/embedded.log" 2>&1 &
pids+=($!)
wait_ready "http://127.0.0.1:$port/v2/" "$!" "$work/embedded.log"
check_registry embedded "127.0.0.1:$port" "$work/keys"

# A signature appended by `cosign sign` (another key) verifies with configpub
# when both keys are trusted (rotation), and configpub's still verifies.
ref=$(grep -E '^(pushed|present) ' "$work/publish-embedded.log" | grep -v '/release@' | head -1 | awk '{print $2}')
cosign sign --key "$work/cosignkeys/cosign.key" --tlog-upload=false --allow-insecure-registry -y "$ref" \
	>/dev/null 2>"$work/cosign.err" || { cat "$work/cosign.err" >&2; fail "cosign sign $ref"; }
"$cp" verify-oci "$ref" --trust-key "$work/cosignkeys/cosign.pub" --plain-http >/dev/null || fail "verify-oci of a cosign signature"
cat "$work/keys/cosign.pub" "$work/cosignkeys/cosign.pub" >"$work/both.pub"
"$cp" verify-oci "$ref" --trust-key "$work/both.pub" --plain-http >/dev/null || fail "verify-oci with rotated keys"
echo "compat: ok: a signature added by cosign sign verifies with configpub verify-oci"

# A signature copied from another artifact fails, in cosign and in configpub.
mapfile -t refs < <(grep -E '^(pushed|present) ' "$work/publish-embedded.log" | grep -v '/release@' | head -2 |
	awk '{print $2}')
src=${refs[0]} dst=${refs[1]}
crane copy --insecure "${src%@*}:$(echo "${src#*@}" | tr : -).sig" "${dst%@*}:$(echo "${dst#*@}" | tr : -).sig" >/dev/null 2>&1 ||
	fail "crane copy of a signature"
if cosign verify --key "$work/keys/cosign.pub" --insecure-ignore-tlog=true --allow-insecure-registry "$dst" >/dev/null 2>&1; then
	fail "cosign verify accepted a signature copied from another artifact"
fi
if "$cp" verify-oci "$dst" --trust-key "$work/keys/cosign.pub" --plain-http >/dev/null 2>"$work/verify.err"; then
	fail "verify-oci accepted a signature copied from another artifact"
fi
grep -q "another artifact" "$work/verify.err" || { cat "$work/verify.err" >&2; fail "verify-oci: unclear error for a copied signature"; }
echo "compat: ok: a signature copied from another artifact fails cosign verify and verify-oci"

# --- OCI layout (air-gapped transfer) ------------------------------------------------
# publish --oci-layout writes one OCI image layout per repository; `oras cp
# --from-oci-layout` moves each artifact and its signature tag to the registry,
# where cosign verifies it and configpub verify-oci accepts it.
layout="$work/layout" prefix="127.0.0.1:$port/airgap" log="$work/publish-layout.log"
"$cp" publish --repo "$REPO" --env "$ENV" --registry "$prefix" --key "$work/keys/cosign.key" \
	--oci-layout "$layout" >"$log" || { cat "$log" >&2; fail "layout: publish --oci-layout"; }
n=0
# One line per artifact: "written DIR: tags TAG and SIGTAG (N bytes), for REPO@DIGEST".
while read -r _ dir _ tag _ sig _ _ _ ref; do
	repo=${ref%@*} digest=${ref#*@} dir=${dir%:}
	path=${repo#"$prefix/"}
	[[ "$dir" == "$layout/$path" ]] || fail "layout: publish named $dir for $repo, want $layout/$path"
	[[ "$sig" == "$(echo "$digest" | tr : -).sig" ]] || fail "layout: publish named signature tag $sig for $digest"
	[[ -f "$dir/index.json" ]] || fail "layout: no OCI layout at $dir"
	for t in "$tag" "$sig"; do
		oras cp --from-oci-layout "$dir:$t" --to-plain-http "$repo:$t" >/dev/null 2>"$work/oras.err" ||
			{ cat "$work/oras.err" >&2; fail "layout: oras cp --from-oci-layout $dir:$t"; }
	done
	cosign verify --key "$work/keys/cosign.pub" --insecure-ignore-tlog=true --allow-insecure-registry \
		"$repo@$digest" >/dev/null 2>"$work/cosign.err" ||
		{ cat "$work/cosign.err" >&2; fail "layout: cosign verify $repo@$digest after oras cp"; }
	"$cp" verify-oci "$repo@$digest" --trust-key "$work/keys/cosign.pub" --plain-http >/dev/null ||
		fail "layout: verify-oci $repo@$digest after oras cp"
	n=$((n + 1))
done < <(grep -E '^(written|present) ' "$log")
[[ $n -gt 1 ]] || fail "layout: nothing published"
echo "compat: ok: publish --oci-layout: $n artifacts copied with oras cp --from-oci-layout verify with cosign and verify-oci"

# --- stand-alone Distribution registry binary, cosign-generated key ----------------
port=$(free_port)
cat >"$work/distribution.yml" <<YAML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $work/distribution
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
YAML
registry serve "$work/distribution.yml" >"$work/distribution.log" 2>&1 &
pids+=($!)
wait_ready "http://127.0.0.1:$port/v2/" "$!" "$work/distribution.log"
check_registry distribution "127.0.0.1:$port" "$work/cosignkeys"

echo "compat: all checks passed ($(cosign version 2>/dev/null | awk '/GitVersion/{print "cosign " $2}'), $(oras version | awk '/^Version/{print "oras " $2}'), crane $(crane version), $(registry --version | awk '{print "registry " $3}'))"
