#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is available for the browser test
# of the operator console (e2e). Installs Debian's chromium package when it
# is missing and we are root; nothing here starts a browser.
set -euo pipefail

find_bin() {
  for b in chromium chromium-browser google-chrome-stable google-chrome; do
    command -v "$b" >/dev/null 2>&1 && return 0
  done
  return 1
}

if find_bin; then
  exit 0
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: installing Chromium from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
  find_bin && exit 0
fi

cat >&2 <<'MSG'
ensure-chromium: no Chromium binary (chromium, chromium-browser or google-chrome) was found.
Install it, for example on Debian or Ubuntu:
    sudo apt-get install chromium
or point the browser test at one:
    export CONFIGPUB_CHROMIUM=/path/to/chromium
MSG
exit 1
