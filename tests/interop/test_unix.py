"""The UNIX-socket listener (`-s PATH -a MASK`) through the clients that use one: PHP's
memcache extension (`memcache_connect('unix:///path', 0)`, as PHP-FPM on the same host) and
pylibmc (`pylibmc.Client(['/path'])`, text and binary), each against memkitd and memcached
([memkitd]/[memcached]); with `-F`, flush_all refused through the socket."""

import json
import os
import stat
import subprocess

import pylibmc
import pytest

import mkinterop as mk
from test_php import PHP_DIR, php  # noqa: F401 (the fixture)

KINDS = ["memkitd", "memcached"]


@pytest.fixture(params=KINDS)
def unix_server(request, spawn, tmp_path):
    def start(flags=()):
        path = tmp_path / f"{request.param}.sock"
        return spawn(request.param, ["-a", "770", *flags], unix=path)
    return start


def test_socket_mode_is_the_mask(unix_server):
    sp = unix_server()
    assert stat.S_IMODE(os.stat(sp.addr).st_mode) == 0o770


@pytest.mark.parametrize("flags, flushed", [((), True), (("-F",), False)], ids=["plain", "F"])
def test_php_memcache_over_unix_socket(php, unix_server, flags, flushed):  # noqa: F811
    sp = unix_server(flags)
    r = subprocess.run([php, str(PHP_DIR / "memcache_unix.php"), sp.addr], capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 0, err
    got = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert got == {
        "connect": True, "set": True, "get": "value", "set_num": True, "increment": 15,
        "get_multi": {"k": "value", "n": "15"}, "delete": True, "get_deleted": False,
        "flush": flushed, "n_after_flush": False if flushed else "15", "close": True,
    }, err


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_pylibmc_over_unix_socket(unix_server, binary):
    sp = unix_server(["-F"])
    mc = pylibmc.Client([sp.addr], binary=binary, behaviors={"connect_timeout": 5000,
                                                               "_poll_timeout": 5000})
    try:
        assert mc.set("k", b"v") is True
        assert mc.get("k") == b"v"
        assert mc.add("k", b"x") is False
        assert mc.incr("n", 1) if mc.set("n", b"1") else False
        assert mc.get_multi(["k", "n", "absent"]) == {"k": b"v", "n": b"2"}
        assert mc.delete("k") is True
        assert mc.get("k") is None
        # -F: nothing is flushed. libmemcached raises the text CLIENT_ERROR; its binary
        # flush returns True without looking at the AUTH_ERROR, then counts the server as
        # failed (against memcached too), so a new client checks the data.
        if binary:
            assert mc.flush_all() is True
        else:
            with pytest.raises(pylibmc.Error, match="CLIENT ERROR"):
                mc.flush_all()
        mc.disconnect_all()
        mc = pylibmc.Client([sp.addr], binary=binary)
        assert mc.get("n") == b"2"
    finally:
        mc.disconnect_all()


def test_raw_text_meta_binary_over_unix_socket(unix_server):
    sp = unix_server()
    s = mk.connect_unix(sp.addr)
    try:
        s.sendall(b"set a 3 0 2\r\nhi\r\nmg a v f\r\nmn\r\n")
        r = mk.read_reply(s, done=lambda u: bool(u) and u[-1][0] == b"MN")
        assert r.lines() == [b"STORED", b"VA 2 f3", b"MN"], r.raw
    finally:
        s.close()
    # A connection's first byte picks its protocol: binary on a new one.
    s = mk.connect_unix(sp.addr)
    try:
        # binary NOOP: magic 0x80, opcode 0x0a, opaque 7
        s.sendall(bytes([0x80, 0x0A]) + bytes(10) + (7).to_bytes(4, "big") + bytes(8))
        got = b""
        while len(got) < 24:
            chunk = s.recv(64)
            assert chunk, got
            got += chunk
        assert (got[0], got[1], got[12:16]) == (0x81, 0x0A, (7).to_bytes(4, "big")), got
    finally:
        s.close()
