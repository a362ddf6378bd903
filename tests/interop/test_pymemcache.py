"""pymemcache against the server, through every command it offers."""

import threading

import pytest
from pymemcache.client.base import Client
from pymemcache.exceptions import (
    MemcacheClientError,
    MemcacheIllegalInputError,
    MemcacheServerError,
    MemcacheUnknownCommandError,
)

import mkinterop as mk
import mkraft

ALL_BYTES = bytes(range(256)) + b"\r\nEND\r\n\r\n"


@pytest.fixture
def mc(server):
    c = Client(server, connect_timeout=5, timeout=5, no_delay=True)
    yield c
    c.close()


def test_set_get_default_noreply(mc):
    assert mc.set("k", b"v") is True  # noreply=True by default: no answer awaited
    assert mc.set("k2", b"v2", noreply=False) is True
    assert mc.get("k") == b"v"
    assert mc.get("k2") == b"v2"
    assert mc.get("missing") is None


def test_flags_and_expire_zero(mc):
    assert mc.set("f", b"x", expire=0, noreply=False)
    out = mc.raw_command(b"gets f", end_tokens=b"END\r\n")
    assert out.startswith(b"VALUE f 0 1 ")


def test_add_replace(mc):
    assert mc.add("a", b"1", noreply=False) is True
    assert mc.add("a", b"2", noreply=False) is False
    assert mc.get("a") == b"1"
    assert mc.replace("a", b"3", noreply=False) is True
    assert mc.replace("nope", b"3", noreply=False) is False
    assert mc.get("a") == b"3"
    assert mc.get("nope") is None


def test_append_prepend(mc):
    assert mc.append("ap", b"x", noreply=False) is False
    assert mc.prepend("ap", b"x", noreply=False) is False
    mc.set("ap", b"mid", noreply=False)
    assert mc.append("ap", b">>", noreply=False) is True
    assert mc.prepend("ap", b"<<", noreply=False) is True
    assert mc.get("ap") == b"<<mid>>"


def test_gets_cas_conflict(mc):
    assert mc.gets("c") == (None, None)
    mc.set("c", b"one", noreply=False)
    v, cas = mc.gets("c")
    assert v == b"one" and cas is not None
    assert mc.cas("c", b"two", cas, noreply=False) is True
    assert mc.cas("c", b"three", cas, noreply=False) is False  # EXISTS
    assert mc.get("c") == b"two"
    assert mc.cas("missing", b"x", cas, noreply=False) is None  # NOT_FOUND
    v2, cas2 = mc.gets("c")
    assert cas2 != cas
    res = mc.gets_many(["c", "nope"])
    assert res == {"c": (b"two", cas2)}


def test_incr_decr(mc):
    assert mc.incr("n", 1, noreply=False) is None
    mc.set("n", b"10", noreply=False)
    assert mc.incr("n", 5, noreply=False) == 15
    assert mc.decr("n", 20, noreply=False) == 0
    mc.set("n", b"10", noreply=False)
    # wraps at 2^64 (the stored value stays < 2^63: see README, memcached's strchr)
    assert mc.incr("n", 18446744073709551615, noreply=False) == 9
    mc.set("s", b"abc", noreply=False)
    with pytest.raises(MemcacheClientError):
        mc.incr("s", 1, noreply=False)
    mc.incr("n", 1)  # noreply
    assert mc.get("n") == b"10"


def test_delete(mc):
    mc.set("d", b"x", noreply=False)
    assert mc.delete("d", noreply=False) is True
    assert mc.delete("d", noreply=False) is False
    mc.set("d2", b"x", noreply=False)
    mc.delete("d2")  # noreply
    assert mc.get("d2") is None


def test_touch_and_gat(mc):
    assert mc.touch("t", 100, noreply=False) is False
    mc.set("t", b"x", noreply=False)
    assert mc.touch("t", 100, noreply=False) is True
    out = mc.raw_command(b"gat 0 t", end_tokens=b"END\r\n")
    assert out == b"VALUE t 0 1\r\nx\r\n"  # raw_command strips the END token
    out = mc.raw_command(b"gats 1000 t nope", end_tokens=b"END\r\n")
    assert out.startswith(b"VALUE t 0 1 ") and out.endswith(b"\r\nx\r\n")


def test_multi(mc):
    items = {f"m{i}": str(i).encode() for i in range(1000)}
    assert mc.set_many(items, noreply=False) == []
    got = mc.get_many(list(items) + ["absent"])
    assert got == items
    assert mc.delete_many(list(items)[:500], noreply=False) is True
    got = mc.get_many(list(items))
    assert got == {k: v for k, v in list(items.items())[500:]}


def test_flush_stats_version(mc):
    mc.set("x", b"1", noreply=False)
    assert mc.flush_all(noreply=False) is True
    assert mc.get("x") is None
    st = mc.stats()
    for name in (b"pid", b"uptime", b"curr_items", b"total_items", b"bytes", b"curr_connections",
                 b"get_hits", b"get_misses", b"cmd_get", b"cmd_set", b"limit_maxbytes", b"threads"):
        assert name in st, name
    assert int(st[b"limit_maxbytes"]) == mkraft.limit_maxbytes(64 * 1024 * 1024)
    assert isinstance(mc.version(), bytes) and mc.version()
    assert b"maxbytes" in mc.stats("settings")
    assert mc.cache_memlimit(64) is True
    mc.quit()


def test_binary_safe_values(mc):
    assert mc.set("bin", ALL_BYTES, noreply=False)
    assert mc.get("bin") == ALL_BYTES
    assert mc.set("empty", b"", noreply=False)
    assert mc.get("empty") == b""
    big = bytes(range(256)) * 4000
    assert mc.set("bigbin", big, noreply=False)
    assert mc.get("bigbin") == big


def test_key_lengths(mc):
    k250 = "k" * 250
    assert mc.set(k250, b"ok", noreply=False)
    assert mc.get(k250) == b"ok"
    with pytest.raises(MemcacheIllegalInputError):
        mc.set("k" * 251, b"no", noreply=False)  # refused client-side


def test_key_251_sent_raw_is_refused(server):
    """pymemcache with key checks disabled: the server must refuse the 251-byte key."""
    c = Client(server, connect_timeout=5, timeout=5, allow_unicode_keys=True)
    c.check_key = lambda key, key_prefix=b"": key if isinstance(key, bytes) else key.encode()
    try:
        with pytest.raises(MemcacheClientError) as ei:
            c.get("k" * 251)
        assert b"bad command line format" in str(ei.value).encode()
    finally:
        c.close()


def test_item_size_limit(mc):
    limit = 1048516  # 56 header + 1 key + 1 + 1048516 + 2 = 1048576 at -I 1m
    assert mc.set("L", b"a" * limit, noreply=False) is True
    assert len(mc.get("L")) == limit
    with pytest.raises(MemcacheServerError) as ei:
        mc.set("L", b"b" * (limit + 1), noreply=False)
    assert "object too large for cache" in str(ei.value)
    assert mc.get("L") is None  # memcached unlinks the old item on a too-large set
    with pytest.raises(MemcacheServerError):
        mc.set("L2", b"c" * (2 * 1024 * 1024), noreply=False)
    # connection still usable after the server swallowed the data
    assert mc.set("after", b"fine", noreply=False)
    assert mc.get("after") == b"fine"


def test_unknown_command(mc):
    with pytest.raises(MemcacheUnknownCommandError):
        mc.raw_command(b"frobnicate", end_tokens=b"\r\n")


def test_concurrent_incr(server):
    c0 = Client(server, connect_timeout=5, timeout=5)
    c0.set("ctr", b"0", noreply=False)
    errors = []

    def work():
        c = Client(server, connect_timeout=5, timeout=10, no_delay=True)
        try:
            for _ in range(500):
                c.incr("ctr", 1, noreply=False)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            c.close()

    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in ts), "incr threads hung"
    assert not errors, errors
    assert c0.get("ctr") == b"4000"
    c0.close()
