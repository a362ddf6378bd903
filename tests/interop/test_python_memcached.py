"""python-memcached (`memcache` module) against the server, through every command it offers."""

import threading

import memcache
import pytest

ALL_BYTES = bytes(range(256)) + b"\r\nEND\r\n\r\n"


def client(addr, **kw):
    return memcache.Client([f"{addr[0]}:{addr[1]}"], socket_timeout=5, dead_retry=0, **kw)


@pytest.fixture
def mc(server):
    c = client(server, cache_cas=True)
    yield c
    c.disconnect_all()


def test_set_get(mc):
    assert mc.set("k", "v")
    assert mc.get("k") == "v"
    assert mc.get("missing") is None
    assert mc.set("i", 42)
    assert mc.get("i") == 42
    assert mc.set("obj", {"a": [1, 2]})
    assert mc.get("obj") == {"a": [1, 2]}  # pickled, flag 1


def test_add_replace(mc):
    assert mc.add("a", "1")
    assert not mc.add("a", "2")
    assert mc.replace("a", "3")
    assert not mc.replace("nope", "3")
    assert mc.get("a") == "3"


def test_append_prepend(mc):
    assert not mc.append("ap", "x")
    assert not mc.prepend("ap", "x")
    mc.set("ap", "mid")
    assert mc.append("ap", ">>")
    assert mc.prepend("ap", "<<")
    assert mc.get("ap") == "<<mid>>"


def test_gets_cas_conflict(server):
    a = client(server, cache_cas=True)
    b = client(server, cache_cas=True)
    try:
        a.set("c", "one")
        assert a.gets("c") == "one"
        assert b.gets("c") == "one"
        assert a.cas("c", "two")  # STORED
        assert not b.cas("c", "three")  # EXISTS: b's token is stale
        assert b.get("c") == "two"
        a.reset_cas()
        assert a.cas("c", "plain")  # no cached token: plain set
        assert a.get("c") == "plain"
    finally:
        a.disconnect_all()
        b.disconnect_all()


def test_incr_decr(mc):
    assert mc.incr("n") is None
    mc.set("n", "10")
    assert mc.incr("n", 5) == 15
    assert mc.decr("n", 20) == 0
    assert mc.decr("nope") is None


def test_delete_touch(mc):
    mc.set("d", "x")
    assert mc.delete("d")
    assert mc.delete("d") == 0  # NOT_FOUND
    assert not mc.touch("d", 100)
    mc.set("d", "x")
    assert mc.touch("d", 100)
    assert mc.get("d") == "x"


def test_multi(mc):
    items = {f"m{i}": str(i) for i in range(1000)}
    assert mc.set_multi(items) == []
    assert mc.get_multi(list(items) + ["absent"]) == items
    assert mc.delete_multi(list(items)[:500])
    assert mc.get_multi(list(items)) == {k: v for k, v in list(items.items())[500:]}
    assert mc.set_multi({"a": 1, "b": 2}, key_prefix="p:") == []
    assert mc.get_multi(["a", "b"], key_prefix="p:") == {"a": 1, "b": 2}


def test_flush_stats(mc):
    mc.set("x", "1")
    mc.flush_all()
    assert mc.get("x") is None
    (name, st), = mc.get_stats()
    for f in ("pid", "uptime", "version", "curr_items", "get_hits", "cmd_get"):
        assert f in st, f
    (name, st), = mc.get_stats("settings")
    assert "maxbytes" in st
    mc.set("y", "1")
    slabs = mc.get_slab_stats()
    assert slabs and slabs[0][1]
    (_n, items), = mc.get_stats("items")
    assert any(k.endswith(":number") for k in items)


def test_binary_safe(mc):
    assert mc.set("bin", ALL_BYTES)
    assert mc.get("bin") == ALL_BYTES


def test_key_lengths(mc):
    assert mc.set("k" * 250, "ok")
    assert mc.get("k" * 250) == "ok"
    with pytest.raises(memcache.Client.MemcachedKeyLengthError):
        mc.set("k" * 251, "no")


def test_key_251_unchecked_is_refused(server):
    # The server answers CLIENT_ERROR to the command line, then reads the data line as a
    # command (ERROR): the client's connection is out of step afterwards, so use fresh ones.
    for op in (lambda c: c.set("k" * 251, "no"), lambda c: c.get("k" * 251)):
        c = client(server, check_keys=False)
        try:
            assert not op(c)
        finally:
            c.disconnect_all()
    c = client(server)
    assert c.set("after", "ok")
    assert c.get("after") == "ok"
    assert c.get("k" * 250) is None
    c.disconnect_all()


def test_item_size_limit(server):
    c = client(server, server_max_value_length=4 * 1024 * 1024)  # let the server decide
    try:
        limit = 1048516
        assert c.set("L", b"a" * limit)
        assert len(c.get("L")) == limit
        assert not c.set("L", b"b" * (limit + 1))  # SERVER_ERROR object too large for cache
        assert c.get("L") is None
        assert c.set("after", "ok")
        assert c.get("after") == "ok"
    finally:
        c.disconnect_all()


def test_concurrent_incr(server):
    c0 = client(server)
    c0.set("ctr", "0")
    errors = []

    def work():
        c = client(server)
        try:
            for _ in range(500):
                if c.incr("ctr") is None:
                    errors.append("incr returned None")
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            c.disconnect_all()

    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in ts)
    assert not errors, errors[:5]
    assert c0.get("ctr") == "4000"
    c0.disconnect_all()
