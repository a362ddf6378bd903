"""Debian's stock memcached configuration starts memkitd unchanged, and the process runs as the
configured user.

/etc/memcached.conf is read the way Debian's systemd unit reads it (its ExecStart is
/usr/share/memcached/scripts/systemd-memcached-wrapper: comments and `-d`/`-h` lines dropped,
directives without a dash such as `logfile` ignored, the rest joined into one command line),
and the service's command is run as root: Debian's wrapper for memcached, and for memkitd the
same wrapper with memkitd's path in it (docs/operations.md's switch), which `exec`s memkitd
with those options, unchanged.
So that the stock `-p 11211 -l 127.0.0.1 -P /var/run/memcached/memcached.pid` touch nothing
of this machine's, each runs in a private network namespace (its own loopback, port 11211
free) and a private mount namespace with a fresh tmpfs on /run/memcached owned by the
`memcache` user (as the package leaves it). Checked, the same for both: the process's real,
effective, saved and filesystem uids are the `-u` user's, its gid the user's group, the pid
file names it, and it answers on 127.0.0.1:11211. Needs root (namespaces, the identity
change) and the memcached package (the conf, the user)."""

import json
import os
import pwd
import re
import socket
import subprocess
import sys
import time

import pytest

CONF = "/etc/memcached.conf"


def wrapper_args(text):
    """systemd-memcached-wrapper's reading of the conf file, as a command line."""
    params = []
    for line in text.splitlines():
        line = re.sub(r"(?<!\\)#[^#]*", "", line).strip()
        if not line or re.match(r"^-[dh]", line):
            continue
        if not line.startswith("-"):
            continue  # `logfile ...`: systemd keeps the output
        params.append(line)
    if not any("-u" in p for p in params):
        params.append("-u root")
    return " ".join(params).split()


def test_wrapper_reading():
    args = wrapper_args("# c\n-d\nlogfile /x\n-m 64 # mem\n-u memcache\n-l 127.0.0.1\n")
    assert args == ["-m", "64", "-u", "memcache", "-l", "127.0.0.1"]


def _lo_up():
    """`ip link set lo up` without iproute2: SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP."""
    import fcntl
    import struct
    with socket.socket() as s:
        ifr = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, ifr)[:18])[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))


def _inside(wrapper, conf):
    """Run inside the private namespaces: start the service's command, `wrapper conf`,
    report what it became (the wrapper `exec`s the server: same pid)."""
    args = wrapper_args(open(conf).read())
    user = pwd.getpwnam(args[args.index("-u") + 1])
    _lo_up()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", "/run/memcached"],
                   check=True)
    os.chown("/run/memcached", user.pw_uid, user.pw_gid)
    proc = subprocess.Popen([wrapper, conf], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    out = {"accepts": False}
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", 11211), timeout=1) as c:
                    c.sendall(b"set k 0 0 1\r\nv\r\nget k\r\n")
                    time.sleep(0.2)
                    out["reply"] = c.recv(100).decode()
                out["accepts"] = True
                break
            except OSError:
                time.sleep(0.05)
        status = open(f"/proc/{proc.pid}/status").read() if proc.poll() is None else ""
        for field in ("Uid", "Gid"):
            m = re.search(rf"^{field}:\s+(.*)$", status, re.M)
            out[field] = m.group(1).split() if m else None
        pidfile = args[args.index("-P") + 1] if "-P" in args else None
        out["pidfile"] = open(pidfile).read().strip() if pidfile and os.path.exists(pidfile) else None
        out["pid"] = str(proc.pid)
        out["expect_uid"], out["expect_gid"] = str(user.pw_uid), str(user.pw_gid)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=5)
        out["exit"] = proc.returncode
        out["stderr"] = proc.stderr.read().decode("utf-8", "replace")[-2000:]
    print(json.dumps(out))


WRAPPER = "/usr/share/memcached/scripts/systemd-memcached-wrapper"


def memkitd_wrapper(memkitd, dest):
    """docs/operations.md's switch: Debian's wrapper with memkitd's path in place of memcached's."""
    text = open(WRAPPER).read()
    new, n = re.subn(r"(?m)^my \$memcached = .*$", f'my $memcached = "{memkitd}";', text)
    assert n == 1, "the wrapper names its memcached on one line"
    dest.write_text(new)
    dest.chmod(0o755)
    return str(dest)


@pytest.mark.parametrize("kind", ["memkitd", "memcached"])
def test_stock_debian_conf_starts_and_runs_as_its_user(kind, tmp_path):
    import conftest
    if os.geteuid() != 0:
        why = "needs root: the service starts as root and drops to -u (CI runs as root)"
        if os.environ.get("MEMKIT_REQUIRE_INTEROP") == "1" or os.environ.get("CI") == "true":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    assert os.path.exists(CONF), f"{CONF} missing: install Debian's memcached package"
    args = wrapper_args(open(CONF).read())
    assert "-u" in args, f"the stock conf names a user: {args}"
    wrapper = WRAPPER if kind == "memcached" else memkitd_wrapper(conftest.binary(kind), tmp_path / "w")
    r = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private", sys.executable,
                        __file__, "--inside", wrapper, CONF],
                       capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr.decode()
    got = json.loads(r.stdout.decode().strip().splitlines()[-1])
    detail = f"{kind} {args}: {got}"
    assert got["accepts"], detail
    assert got["reply"] == "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n", detail
    assert got["Uid"] == [got["expect_uid"]] * 4, detail
    assert got["Gid"] == [got["expect_gid"]] * 4, detail
    if "-P" in args:
        assert got["pidfile"] == got["pid"], detail


if __name__ == "__main__" and sys.argv[1:2] == ["--inside"]:
    _inside(sys.argv[2], sys.argv[3])
