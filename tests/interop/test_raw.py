"""Raw-socket checks of limits, on both servers (exact memcached 1.6.18 replies)."""

import pytest

import mkinterop as mk
import mkraft

K250 = b"k" * 250
K251 = b"k" * 251
LIMIT = 1048516  # largest value for a 1-byte key and flags 0 at the default -I 1m


def one(addr, data, n=1):
    r = mk.request(addr, data, done=mk.until_lines(n), idle=5.0, total=10.0)
    return r.lines()


def test_key_250_ok(server):
    assert one(server, b"set " + K250 + b" 0 0 1\r\nx\r\n") == [b"STORED"]
    r = mk.request(server, b"get " + K250 + b"\r\n", done=mk.until_end, idle=5, total=5)
    assert r.units == [(b"VALUE " + K250 + b" 0 1", b"x"), (b"END", None)]


@pytest.mark.parametrize(
    "data,expect",
    [
        # set: the command line is refused, then the data line is read as a command
        (b"set %s 0 0 1\r\nx\r\n" % K251, [b"CLIENT_ERROR bad command line format", b"ERROR"]),
        (b"get %s\r\n" % K251, [b"CLIENT_ERROR bad command line format"]),
        (b"get a %s b\r\n" % K251, [b"CLIENT_ERROR bad command line format"]),
        (b"delete %s\r\n" % K251, [b"CLIENT_ERROR bad command line format"]),
        (b"incr %s 1\r\n" % K251, [b"CLIENT_ERROR bad command line format"]),
        (b"touch %s 1\r\n" % K251, [b"CLIENT_ERROR bad command line format"]),
        (b"mg %s v\r\n" % K251, [b"CLIENT_ERROR bad command line format"]),
        (b"md %s\r\n" % K251, [b"CLIENT_ERROR bad command line format"]),
    ],
    ids=["set", "get", "get-multi", "delete", "incr", "touch", "mg", "md"],
)
def test_key_251_refused(server, data, expect):
    assert one(server, data + b"mn\r\n", len(expect) + 1) == expect + [b"MN"]


@pytest.mark.parametrize(
    "key,flags,size,ok",
    [
        (b"k", 0, LIMIT, True),
        (b"k", 0, LIMIT + 1, False),
        (b"kk", 0, LIMIT, False),
        (b"kk", 0, LIMIT - 1, True),
        (b"k", 1, LIMIT, False),  # non-zero client flags cost 4 more bytes in memcached
        (b"k", 1, LIMIT - 4, True),
        (b"k", 1, LIMIT - 3, False),
        (b"k", 0, 2 * 1024 * 1024, False),
    ],
)
def test_item_size_limit(server, key, flags, size, ok):
    s = mk.connect(server, timeout=10)
    try:
        line = b"set %s %d 0 %d\r\n" % (key, flags, size)
        s.sendall(line + b"v" * size + b"\r\nget " + key + b"\r\n")
        r = mk.read_reply(s, done=mk.until_lines(3 if ok else 2), idle=10, total=20)
        if ok:
            assert r.lines() == [b"STORED", b"VALUE %s %d %d" % (key, flags, size), b"END"]
        else:
            assert r.lines() == [b"SERVER_ERROR object too large for cache", b"END"]
    finally:
        s.close()


def test_too_large_ms(server):
    r = mk.request(server, b"ms k %d T0\r\n" % (LIMIT + 1) + b"x" * (LIMIT + 1) + b"\r\nmn\r\n",
                   done=mk.ends_with_mn, idle=10, total=20)
    assert r.lines() == [b"SERVER_ERROR object too large for cache", b"MN"]


def test_noreply_is_silent(server):
    stream = (b"set a 0 0 1 noreply\r\n1\r\nadd a 0 0 1 noreply\r\n2\r\nincr a 5 noreply\r\n"
              b"append a 0 0 1 noreply\r\nz\r\ndelete b noreply\r\ntouch a 0 noreply\r\n"
              b"flush_all noreply\r\nset c 0 0 1 noreply\r\n3\r\nget a c\r\n")
    r = mk.request(server, stream, done=mk.until_end, idle=5, total=5)
    assert r.units == [(b"VALUE c 0 1", b"3"), (b"END", None)]


def test_large_pipeline(server):
    n = 2000
    stream = b"".join(b"set p%d 0 0 4\r\n%04d\r\n" % (i, i % 10000) for i in range(n))
    stream += b"get " + b" ".join(b"p%d" % i for i in range(n)) + b"\r\n"
    r = mk.request(server, stream, done=mk.until_end, idle=10, total=mkraft.budget(20))
    assert r.lines()[:n] == [b"STORED"] * n
    assert len(r.units) == 2 * n + 1
    assert r.units[n] == (b"VALUE p0 0 4", b"0000")


def test_line_without_newline_closes(server):
    """memcached closes a connection whose command line exceeds 2048 bytes without \\n
    (unless it starts with get/gets)."""
    s = mk.connect(server)
    try:
        s.sendall(b"set " + b"x" * 4096)
        r = mk.read_reply(s, idle=2.0, total=5.0)
        assert r.closed, r.raw
    finally:
        s.close()
