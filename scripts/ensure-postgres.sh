#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, pg_ctl, postgres) are
# available. Tests and the demo start their own private, throwaway cluster
# with them; nothing here starts a server.
set -euo pipefail

find_bin() {
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    return 0
  fi
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && return 0
  done
  return 1
}

if find_bin; then
  exit 0
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-postgres: installing PostgreSQL from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  find_bin && exit 0
fi

cat >&2 <<'MSG'
ensure-postgres: PostgreSQL server binaries (initdb, pg_ctl) were not found.
Install them, for example on Debian or Ubuntu:
    sudo apt-get install postgresql
or point the tests at an existing server:
    export CONFIGPUB_TEST_DATABASE_URL=postgres://user:pass@127.0.0.1:5432/postgres
MSG
exit 1
