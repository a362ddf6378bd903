#!/usr/bin/env bash
# Installs what the tests need and the machine lacks: Debian packages (as root, or through
# sudo) and the Python clients of the interop and operations suites. A machine with only
# Rust and Python ends up able to run every test; one that has everything changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

# memcached, libmemcached-tools: the peers of the interop and conformance tests;
# libmemcached-dev, pkg-config, zlib1g-dev: pylibmc's build; tmux: the `memkit top` test;
# php-*: the PHP clients; sasl2-bin, libsasl2-modules: SASL for memcached -S;
# systemd: systemd-analyze, which checks packaging/memkitd.service (tests/packaging.rs);
# chromium: the headless browser that loads memkitd's page (tests/page_browser.rs);
# nutcracker: twemproxy, the router bench's baseline (memkit-bench's tests/router_smoke.rs)
apt_pkgs=(memcached libmemcached-tools libmemcached-dev pkg-config zlib1g-dev tmux
          php-cli php-memcached php-memcache sasl2-bin libsasl2-modules systemd chromium
          nutcracker)
missing=()
for p in "${apt_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "== installing: ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}"
fi
# A memcached started by the package would hold port 11211 (nutcracker's, 22121 and 22222);
# the tests start their own.
if command -v service >/dev/null 2>&1; then
  service memcached stop >/dev/null 2>&1 || true
  service nutcracker stop >/dev/null 2>&1 || true
fi

for req in tests/*/requirements.txt; do
  [ -f "$req" ] && python3 -m pip install -q -r "$req"
done
