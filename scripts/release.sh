#!/bin/sh
# Release binaries: scripts/release.sh OUTDIR
# Builds configpub for each of TARGETS (default linux/darwin x amd64/arm64),
# statically (CGO_ENABLED=0), with -trimpath and the version and commit that
# `configpub --version` prints, as OUTDIR/configpub_OS_ARCH, and writes
# OUTDIR/SHA256SUMS (the format `sha256sum -c` reads) over every
# configpub_OS_ARCH binary in OUTDIR.
# Environment: VERSION, COMMIT (default from Git), TARGETS, GO, and
# TRIMPATH (default -trimpath) and CGO_ENABLED (default 0): the test sets
# them as its own build has them, so it reuses the build cache instead of
# recompiling every dependency.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
GO=${GO:-go}
TRIMPATH=${TRIMPATH--trimpath}
CGO_ENABLED=${CGO_ENABLED:-0}
TARGETS=${TARGETS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"}
VERSION=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo devel)}
COMMIT=${COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || true)}
names=""
for t in $TARGETS; do
	os=${t%/*}
	arch=${t#*/}
	name="configpub_${os}_${arch}"
	echo "build $name ($VERSION, commit ${COMMIT:-unknown})"
	(cd "$root" && CGO_ENABLED=$CGO_ENABLED GOOS=$os GOARCH=$arch "$GO" build $TRIMPATH -buildvcs=false \
		-ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT" -o "$out/$name" ./cmd/configpub)
	names="$names $name"
done
cd "$out"
# SHA256SUMS covers every binary in OUTDIR, not only this run's: the
# release workflow builds all targets, then `make image` builds the linux
# ones again into the same directory, and uploads dist/configpub_* with
# this file (action.yml refuses a binary the sums do not list).
names=$(ls configpub_*_* | LC_ALL=C sort)
if command -v sha256sum >/dev/null 2>&1; then
	sha256sum $names > SHA256SUMS
else
	shasum -a 256 $names > SHA256SUMS
fi
cat SHA256SUMS
