"""pylibmc (libmemcached, text protocol) against the server, through every command it offers.
test_pylibmc_binary.py runs these same tests with binary=True (its `binary` fixture)."""

import threading

import pylibmc
import pytest

ALL_BYTES = bytes(range(256)) + b"\r\nEND\r\n\r\n"
BEHAVIORS = {
    "cas": True,
    "tcp_nodelay": True,
    "connect_timeout": 5000,
    "send_timeout": 5_000_000,
    "receive_timeout": 5_000_000,
    "_poll_timeout": 5000,
}


def client(addr, binary=False, **behaviors):
    b = dict(BEHAVIORS)
    b.update(behaviors)
    return pylibmc.Client([f"{addr[0]}:{addr[1]}"], binary=binary, behaviors=b)


@pytest.fixture
def binary():
    """The protocol pylibmc speaks: text here, binary in test_pylibmc_binary.py."""
    return False


@pytest.fixture
def mc(server, binary):
    c = client(server, binary)
    yield c
    c.disconnect_all()


def test_set_get(mc):
    assert mc.set("k", b"v") is True
    assert mc.get("k") == b"v"
    assert mc.get("missing") is None
    assert mc.set("s", "text") is True
    assert mc.get("s") == "text"
    assert mc.set("i", 42) is True
    assert mc.get("i") == 42  # pylibmc's integer flag round-trips through the server's flags


def test_add_replace(mc, binary):
    assert mc.add("a", b"1") is True
    assert mc.add("a", b"2") is False
    assert mc.replace("a", b"3") is True
    if binary:  # the binary reply is KEY_ENOENT, which libmemcached reports as NotFound
        with pytest.raises(pylibmc.NotFound):
            mc.replace("nope", b"3")
    else:
        assert mc.replace("nope", b"3") is False
    assert mc.get("a") == b"3"


def test_append_prepend(mc):
    assert mc.append("ap", b"x") is False
    assert mc.prepend("ap", b"x") is False
    mc.set("ap", b"mid")
    assert mc.append("ap", b">>") is True
    assert mc.prepend("ap", b"<<") is True
    assert mc.get("ap") == b"<<mid>>"


def test_gets_cas_conflict(mc):
    assert mc.gets("c") == (None, None)
    mc.set("c", b"one")
    v, cas = mc.gets("c")
    assert v == b"one" and cas
    assert mc.cas("c", b"two", cas) is True
    assert mc.cas("c", b"three", cas) is False  # EXISTS
    assert mc.get("c") == b"two"
    v2, cas2 = mc.gets("c")
    assert cas2 != cas
    with pytest.raises(pylibmc.NotFound):
        mc.cas("missing", b"x", cas)


def test_incr_decr(mc):
    with pytest.raises(pylibmc.NotFound):
        mc.incr("n")
    mc.set("n", b"10")
    assert mc.incr("n", 5) == 15
    assert mc.decr("n", 20) == 0
    mc.set("m", b"1")
    mc.incr_multi(["n", "m"], delta=3)
    # "0" came from "15" rewritten in place: memcached keeps the old length, space-padded
    assert mc.get_multi(["n", "m"]) == {"n": b"3 ", "m": b"4"}
    mc.set("s", b"abc")
    with pytest.raises(pylibmc.Error):
        mc.incr("s")


def test_delete_touch(mc):
    mc.set("d", b"x")
    assert mc.delete("d") is True
    assert mc.delete("d") is False
    assert mc.touch("d", 100) is False
    mc.set("d", b"x")
    assert mc.touch("d", 100) is True
    assert mc.get("d") == b"x"


def test_multi(mc):
    items = {f"m{i}": str(i).encode() for i in range(1000)}
    assert mc.set_multi(items) == []
    assert mc.get_multi(list(items) + ["absent"]) == items
    assert mc.add_multi({"m0": b"x", "new": b"y"}) == ["m0"]
    assert mc.delete_multi(list(items)[:500]) is True
    assert mc.get_multi(list(items)) == {k: v for k, v in list(items.items())[500:]}


def test_flush_stats(mc):
    mc.set("x", b"1")
    assert mc.flush_all() is True
    assert mc.get("x") is None
    (name, st), = mc.get_stats()
    for f in ("pid", "uptime", "version", "curr_items", "get_hits", "cmd_get", "limit_maxbytes"):
        assert f in st, f


def test_binary_safe(mc):
    assert mc.set("bin", ALL_BYTES)
    assert mc.get("bin") == ALL_BYTES


def test_key_lengths(mc):
    k250 = "k" * 250
    assert mc.set(k250, b"ok")
    assert mc.get(k250) == b"ok"
    with pytest.raises(ValueError):  # refused client-side; the raw refusal is in test_raw.py
        mc.set("k" * 251, b"no")


def test_item_size_limit(mc):
    limit = 1048516
    assert mc.set("L", b"a" * limit) is True
    assert len(mc.get("L")) == limit
    with pytest.raises(pylibmc.Error):
        mc.set("L", b"b" * (limit + 1))
    assert mc.get("L") is None
    assert mc.set("after", b"fine")
    assert mc.get("after") == b"fine"


def test_noreply(server, binary):
    c = client(server, binary, _noreply=True)  # libmemcached sends "noreply" on storage commands
    try:
        for i in range(100):
            c.set(f"nr{i}", str(i).encode())
        c.delete("nr0")
        # a get on the same connection is answered after every noreply command before it
        # (another connection could overtake them: that would be a race in this test)
        expect = {f"nr{i}": str(i).encode() for i in range(1, 100)}
        assert c.get_multi([f"nr{i}" for i in range(100)]) == expect
    finally:
        c.disconnect_all()


def test_concurrent_incr(server, binary):
    c0 = client(server, binary)
    c0.set("ctr", b"0")
    errors = []

    def work():
        c = client(server, binary)
        try:
            for _ in range(500):
                c.incr("ctr")
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
    assert not errors, errors
    assert c0.get("ctr") == b"4000"
    c0.disconnect_all()
