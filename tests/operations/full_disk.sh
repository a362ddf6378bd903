#!/usr/bin/env bash
# memkitd --persist on a full disk: a 96 MiB tmpfs in a private mount namespace, written until
# memkitd refuses new data (full_disk.py says what is checked). Needs root for the mount;
# anyone else gets a visible SKIPPED line, or a failure under CI=true / MEMKIT_REQUIRE_INTEROP=1,
# where a skip would hide a test that never ran. Run:  bash tests/operations/full_disk.sh MEMKITD
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
memkitd="$(realpath "$1")"
py="${PYTHON:-python3}"

if [ "${2:-}" != "--inside" ]; then
  if [ "$(id -u)" != 0 ]; then
    if [ "${CI:-}" = true ] || [ "${MEMKIT_REQUIRE_INTEROP:-}" = 1 ]; then
      echo "== full disk: FAILED (needs root to mount a small tmpfs; required under CI)" >&2
      exit 1
    fi
    echo "== full disk: SKIPPED (needs root to mount a small tmpfs)"
    exit 0
  fi
  # A private mount namespace: the tmpfs is invisible to the rest of the machine and goes
  # away with this process even if the trap below never runs.
  exec unshare --mount --propagation private bash "${BASH_SOURCE[0]}" "$memkitd" --inside
fi

mnt="$(mktemp -d)"
mount -t tmpfs -o size=96m tmpfs "$mnt"
trap 'umount "$mnt" 2>/dev/null || umount -l "$mnt"; rmdir "$mnt"' EXIT
echo "== full disk: memkitd --persist on a 96 MiB tmpfs"
timeout 300 "$py" "$here/full_disk.py" "$memkitd" "$mnt"
echo "  ok"
