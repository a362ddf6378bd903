"""pylibmc (libmemcached) with binary=True against the server: every test of
test_pylibmc.py (imported below and run with this module's `binary` fixture), plus what the
binary protocol carries differently: CAS in the header, the 8-byte counter reply and its
wrap-around, incr on a missing key (libmemcached sends the 0xffffffff "don't create" expiry),
flags kept by append, touch/expiry, multi-key commands (GETKQ/SETQ/DELETEQ + NOOP), client
behaviours that change how requests are batched, values near the item size limit."""

import os

import pylibmc
import pytest

import mkraft
import mkroute

from test_pylibmc import (  # noqa: F401  (collected again here, with binary=True)
    ALL_BYTES,
    client,
    test_add_replace,
    test_append_prepend,
    test_binary_safe,
    test_concurrent_incr,
    test_delete_touch,
    test_flush_stats,
    test_gets_cas_conflict,
    test_incr_decr,
    test_item_size_limit,
    test_key_lengths,
    test_multi,
    test_noreply,
    test_set_get,
)

LIMIT = 1048516  # largest value memcached 1.6.18 -m 64 -I 1m stores under a 1-byte key, flags 0


@pytest.fixture
def binary():
    return True


# libmemcached 1.0.16 (pylibmc's wheel) does not expect the flags extras memcached 1.6.18
# puts in a binary TOUCH reply: after each touch it waits for its poll timeout (5 s by
# default, against memcached as against memkitd), then reports success. A shorter poll
# timeout keeps that wait short.
POLL_MS = 1500


@pytest.fixture
def mc(server, binary):
    c = client(server, binary, _poll_timeout=POLL_MS)
    yield c
    c.disconnect_all()


def test_client_is_binary(mc):
    assert mc.binary is True
    assert mc.get_behaviors()["cas"] == 1
    mc.set("proto", b"x")
    assert mc.get("proto") == b"x"


def test_cas_in_header(mc):
    mc.set("c", b"v1")
    _, c1 = mc.gets("c")
    assert isinstance(c1, int) and c1 > 0
    _, again = mc.gets("c")
    assert again == c1  # a read leaves the CAS alone
    assert mc.touch("c", 1000) is True
    _, after_touch = mc.gets("c")
    assert after_touch == c1  # so does touch (memcached 1.6.18)
    assert mc.append("c", b"+") is True
    _, after_append = mc.gets("c")
    assert after_append != c1
    assert mc.cas("c", b"stale", c1) is False
    assert mc.cas("c", b"v2", after_append) is True
    v, c3 = mc.gets("c")
    assert v == b"v2" and c3 not in (c1, after_append)
    mc.delete("c")
    with pytest.raises(pylibmc.NotFound):
        mc.cas("c", b"gone", c3)
    assert mc.get("c") is None


def test_cas_multi_keys(mc, server):
    # Keys of one server: CAS values are unique across one server's keys only.
    x, y = mkroute.keys_on_one_server(server, 2, "cas")
    mc.set_multi({x: b"1", y: b"2"})
    vx, cx = mc.gets(x)
    vy, cy = mc.gets(y)
    assert (vx, vy) == (b"1", b"2")
    assert cx != cy  # every store gets its own CAS
    assert mc.cas(x, b"10", cx) is True
    assert mc.cas(y, b"20", cx) is False  # x's CAS does not fit y
    assert mc.get_multi([x, y]) == {x: b"10", y: b"2"}


def test_counters(mc):
    with pytest.raises(pylibmc.NotFound):
        mc.incr("absent")  # libmemcached sends expiry 0xffffffff: no item is created
    with pytest.raises(pylibmc.NotFound):
        mc.decr("absent")
    assert mc.get("absent") is None
    mc.set("n", b"5")
    assert mc.incr("n", 0) == 5
    assert mc.decr("n", 100) == 0  # decr stops at 0
    assert mc.get("n") == b"0"
    mc.set("w", b"4294967295")
    assert mc.incr("w") == 4294967296  # the reply is 8 bytes, big-endian
    assert mc.get("w") == b"4294967296"
    # (wrap-around needs a delta over 2^63, more than pylibmc's C long: see test_binary_raw.py)


@pytest.mark.parametrize("key", ["text", "neg"])
def test_counter_on_non_number(server, key):
    c = client(server, True)
    try:
        c.set_multi({"text": b"12abc", "neg": b"-1"})
        with pytest.raises(pylibmc.Error):  # DELTA_BADVAL
            c.incr(key)
    finally:
        c.disconnect_all()
    # libmemcached 1.0.16 (pylibmc's wheel) takes DELTA_BADVAL as a protocol error and
    # disables the server for a while: read back with a new client
    c = client(server, True)
    try:
        assert c.get_multi(["text", "neg"]) == {"text": b"12abc", "neg": b"-1"}
    finally:
        c.disconnect_all()


def test_append_keeps_flags(mc):
    mc.set("i", 42)  # pylibmc's integer flag
    assert mc.append("i", b"43") is True
    assert mc.prepend("i", b"1") is True
    assert mc.get("i") == 14243
    mc.set("s", "text")
    assert mc.append("s", b"!") is True
    assert mc.get("s") == "text!"


def test_touch_expires(mc):
    assert mc.set("t", b"x", time=1000) is True
    assert mc.set("keep", b"y", time=1000) is True
    assert mc.touch("t", 1) is True
    assert mc.touch("gone", 1) is False
    import time

    time.sleep(2.5)  # memcached's clock ticks once a second: 1 s expires within 2 s
    assert mc.get("t") is None
    assert mc.get("keep") == b"y"


def test_set_expires(mc):
    import time

    assert mc.set("e", b"x", time=1) is True
    assert mc.set_multi({"e1": b"1", "e2": b"2"}, time=1) == []
    assert mc.get_multi(["e", "e1", "e2"]) == {"e": b"x", "e1": b"1", "e2": b"2"}
    time.sleep(2.5)
    assert mc.get_multi(["e", "e1", "e2"]) == {}


def test_multi_prefix_and_misses(mc):
    items = {f"k{i}": os.urandom(i % 300) for i in range(300)}
    assert mc.set_multi(items, key_prefix="p:") == []
    assert mc.get("p:k7") == items["k7"]
    keys = list(items) + [f"none{i}" for i in range(50)]
    assert mc.get_multi(keys, key_prefix="p:") == items
    assert mc.get_multi(keys) == {}  # without the prefix: every key misses
    assert mc.delete_multi(list(items)[:100], key_prefix="p:") is True
    assert mc.delete_multi(list(items)[:100], key_prefix="p:") is False  # all missing now
    left = mc.get_multi(list(items), key_prefix="p:")
    assert left == {k: v for k, v in list(items.items())[100:]}
    assert mc.add_multi({"k150": b"dup", "k0": b"new"}, key_prefix="p:") == ["k150"]
    assert mc.get("p:k0") == b"new"


def test_big_values(mc):
    assert mc.set("L", b"a" * LIMIT) is True  # exactly at the limit
    assert mc.get("L") == b"a" * LIMIT
    k250 = "K" * 250  # the key counts against the same limit
    assert mc.set(k250, b"b" * (LIMIT - 249)) is True
    with pytest.raises(pylibmc.TooBig):
        mc.set(k250, b"b" * (LIMIT - 248))
    assert mc.get(k250) is None  # as in text: a refused store drops the old value
    blobs = {f"blob{i}": os.urandom(400_000 + i) for i in range(4)}
    assert mc.set_multi(blobs) == []
    assert mc.get_multi(list(blobs)) == blobs  # one multi-get reply well over 1 MB
    assert mc.append("L", b"z") is False  # append past the limit is NOT_STORED
    assert mc.get("L") == b"a" * LIMIT


def test_too_large_then_usable(mc):
    for size in (LIMIT + 1, 2 * 1024 * 1024, 5 * 1024 * 1024):
        with pytest.raises(pylibmc.TooBig):
            mc.set("huge", b"h" * size)
        # the server swallowed the body: the same connection goes on in step
        assert mc.set("after", str(size).encode()) is True
        assert mc.get("after") == str(size).encode()
    assert mc.get("huge") is None
    with pytest.raises(pylibmc.TooBig):  # pylibmc raises rather than listing the failed key
        mc.set_multi({"h1": b"h" * (LIMIT + 10)})
    assert mc.get_multi(["h1", "after"]) == {"after": b"5242880"}


# Not here: verify_keys (libmemcached refuses it with binary), buffer_requests (pylibmc
# raises on the BUFFERED status of every buffered store), pylibmc's get_stats(group) (it
# parses only the general stats; the stat groups are in test_binary_raw.py).
BEHAVIOR_SETS = {
    "no_block": {"no_block": True},
    "noreply": {"_noreply": True},
    "noreply+no_block": {"_noreply": True, "no_block": True},
    "no_cas": {"cas": False},
    "ketama+md5": {"ketama": True, "hash": "md5"},
    "small_io_watermark": {"_io_msg_watermark": 4, "_io_bytes_watermark": 512},
    "tcp_keepalive": {"tcp_keepalive": True},
}


@pytest.mark.parametrize("name", list(BEHAVIOR_SETS))
def test_behaviors(server, name):
    behaviors = BEHAVIOR_SETS[name]
    c = client(server, True, **behaviors)
    try:
        got = c.get_behaviors()
        for k, v in behaviors.items():
            assert got[k] == v or got[k] == int(v), (k, got[k])
        items = {f"b{i}": str(i).encode() * (i % 7 + 1) for i in range(200)}
        c.set_multi(items)
        for i in range(20):
            c.set(f"s{i}", b"v%d" % i)
        c.delete("b0")
        c.set("n", b"1")
        c.append("s0", b"+")
        # a read's reply comes after every write before it on the connection (quiet or not)
        expect = {k: v for k, v in items.items() if k != "b0"}
        assert c.get_multi(list(items)) == expect
        assert c.get("s19") == b"v19"
        assert c.get("s0") == b"v0+"
        if not behaviors.get("_noreply"):  # with noreply, libmemcached ignores incr's reply
            assert c.incr("n", 9) == 10
            assert c.get("n") == b"10"
            assert c.add("n", b"x") is False
            assert c.delete("b0") is False
    finally:
        c.disconnect_all()


def test_stats_binary(mc):
    mc.set("a", b"1")
    mc.get("a")
    mc.get("nope")
    (name, st), = mc.get_stats()
    assert st["version"]
    assert int(st["pid"]) > 0
    assert int(st["curr_items"]) >= 1
    assert int(st["get_hits"]) >= 1 and int(st["get_misses"]) >= 1
    assert int(st["limit_maxbytes"]) == mkraft.limit_maxbytes(64 * 1024 * 1024)
