#!/usr/bin/env bash
# Interop tests: real clients, memccapable and a differential test against real memcached.
# Run from the repo root:  bash tests/interop/run.sh [extra pytest args]
# MEMKITD=path/to/memkitd overrides the binary (default: target/debug/memkitd).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

need_apt=()
command -v memcached >/dev/null 2>&1 || need_apt+=(memcached)
{ command -v memccapable >/dev/null 2>&1 || command -v memcapable >/dev/null 2>&1; } || need_apt+=(libmemcached-tools)
dpkg -s libmemcached-dev >/dev/null 2>&1 || need_apt+=(libmemcached-dev)
# PHP clients (test_php.py, test_sasl.py) and SASL for memcached -S (test_sasl.py): saslpasswd2
# writes the sasldb Debian's memcached checks, libsasl2-modules has the PLAIN plugin
command -v php >/dev/null 2>&1 || need_apt+=(php-cli)
for p in php-memcached php-memcache sasl2-bin libsasl2-modules; do
    dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p")
done
if [ "${#need_apt[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "installing: ${need_apt[*]}" >&2
    if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}" >/dev/null; then
        $sudo apt-get update -q >/dev/null
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}" >/dev/null
    fi
fi

py="${PYTHON:-python3}"
if ! "$py" - "$here/requirements.txt" <<'PYEOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, want = line.split("==")
        assert version(name) == want, name
PYEOF
then
    "$py" -m pip install -q -r "$here/requirements.txt"
fi

export MEMKITD="${MEMKITD:-target/debug/memkitd}"
"$py" -m pytest tests/interop -q "$@"
# Again with memkitd over a flash file that takes every non-empty value as it is stored
# (mkinterop.flash_flags): every read of a value comes from the flash tier. memcached's runs
# are the same as above, so they are left out (`-k`), but the differential tests keep
# comparing this memkitd with it.
flash_dir="$(mktemp -d)"
raft_dir="$(mktemp -d)"
trap 'rm -rf "$flash_dir" "$raft_dir"' EXIT
echo "== interop with the flash tier (ext_item_size=0, ext_item_age=0)"
MEMKITD_FLASH_DIR="$flash_dir" "$py" -m pytest tests/interop -q -k "not memcached]" "$@"
# Again with every memkitd a follower of a 3-node replicated group on 127.0.0.1 (mkraft.py:
# the two other nodes start first and elect a leader; the pass fails if the group does not
# form). What cannot hold in a group, and the memkitd bugs found so far, are xfails named in
# mkraft.py with their reasons, which -rxX prints.
echo "== interop with memkitd as a follower of a 3-node replicated group"
MEMKITD_RAFT_DIR="$raft_dir" "$py" -m pytest tests/interop -q -rxX -k "not memcached]" "$@"
# Again with every memkitd a router (`--route`) in front of three backends, first three real
# memcached, then three memkitd (mkroute.py: one ketama pool, a hash route; the router gets the
# suites' flags, the backends the base ones). What cannot hold through a router, and the router
# bugs found so far, are xfails named in mkroute.py with their reasons.
echo "== interop with memkitd as a router in front of 3 memcached"
MEMKITD_ROUTE=memcached "$py" -m pytest tests/interop -q -rxX -k "not memcached]" "$@"
echo "== interop with memkitd as a router in front of 3 memkitd"
MEMKITD_ROUTE=memkitd "$py" -m pytest tests/interop -q -rxX -k "not memcached]" "$@"
