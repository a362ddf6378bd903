"""SASL set-up shared by the SASL tests: one set of users, given to both servers the same way.

- memkitd (and a memcached built with --enable-sasl-pwdb) read MEMCACHED_SASL_PWDB, a file
  of `user:password` lines.
- Debian's memcached 1.6.18 is built with SASL but *without* --enable-sasl-pwdb (its binary
  has no MEMCACHED_SASL_PWDB): it checks passwords through Cyrus SASL, which reads
  `memcached.conf` in the directory SASL_CONF_PATH names (`mech_list: plain`, `sasldb_path`)
  and a sasldb written by `saslpasswd2` (Debian package sasl2-bin). Without a config file
  memcached -S exits with "Failed to locate a config path".

Both variables go to both servers; each uses the one it knows."""

import glob
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

USERS = {"alice": "s3cret-pw", "bob": "hunter2"}
# memcached's pwdb reader (sasl_defs.c, sasl_server_userdb_checkpass) ends the password at the
# next ':' ("additional tokens"), '\n' or '\r': such lines must work the same in memkitd.
PWDB_LINE = {"bob": "bob:hunter2:additional tokens\r\n"}


def sasl_env(directory, users=USERS):
    directory = Path(directory)
    pwdb = directory / "memcached-sasl-pwdb"
    pwdb.write_bytes("".join(PWDB_LINE.get(u, f"{u}:{p}\n") for u, p in users.items()).encode())
    saslpasswd2 = shutil.which("saslpasswd2")
    if not saslpasswd2:
        pytest.fail("saslpasswd2 not found (Debian package sasl2-bin): memcached -S needs a sasldb",
                    pytrace=False)
    sasldb = directory / "sasldb2"
    # memcached passes gethostname() as the user realm; saslpasswd2 must file users under it
    realm = socket.gethostname()
    for user, password in users.items():
        p = subprocess.run([saslpasswd2, "-p", "-c", "-a", "memcached", "-u", realm, "-f", str(sasldb), user],
                           input=password.encode(), capture_output=True, timeout=30)
        assert p.returncode == 0, p.stderr
    (directory / "memcached.conf").write_text(f"mech_list: plain\nsasldb_path: {sasldb}\n")
    return {"MEMCACHED_SASL_PWDB": str(pwdb), "SASL_CONF_PATH": str(directory)}


def client_plugin_dir():
    """Directory of the system's Cyrus SASL client plugins (libplain.so, Debian package
    libsasl2-modules). pylibmc's wheel bundles its own libsasl2, which looks for plugins only
    in /usr/lib64/sasl2 (where its build machine had them): on Debian it finds no PLAIN and
    every SASL attempt is "FAILED TO SEND AUTHENTICATION TO SERVER" (MEMCACHED_AUTH_PROBLEM)
    unless SASL_PATH points here, set before pylibmc is imported."""
    for pattern in ("/usr/lib/*/sasl2/libplain.so*", "/usr/lib/sasl2/libplain.so*",
                    "/usr/lib64/sasl2/libplain.so*"):
        hits = glob.glob(pattern)
        if hits:
            return os.path.dirname(hits[0])
    pytest.fail("no Cyrus SASL PLAIN plugin found (Debian package libsasl2-modules)", pytrace=False)
