"""The router (`memkitd --route FILE`) places keys where the clients it stands in for would:
three real memcached behind a router with one pool (weighted where the client weighs), a few
hundred keys stored through the router, then every backend asked what it holds (each key on
exactly one, every backend some) and the client itself, given the same three servers, must
find every key where the router put it, and the router every key the client stored.

- pylibmc (libmemcached): `ketama` is libmemcached's weighted ketama (`ketama_weighted`),
  `ketama-unweighted` its `ketama` behaviour, `modula` its modula with the `crc` hash;
- pecl memcache (Debian's php-memcache, `Memcache`): `php-consistent` and `php-standard:fnv`
  against `memcache.hash_strategy` consistent/crc32 and standard/fnv.

Also `stats router`: each server's `requests` is the number of keys stored on it.

Runs in every pass the same way: the router and its memcached are started here (`plain`),
whatever the pass makes of the suites' memkitd."""

import pylibmc
import pytest

import mkinterop as mk
import mkroute
from test_php import php, run_php  # noqa: F401  (the fixture checks both extensions load)
from test_php_placement import held_keys

N_KEYS = 300

PYLIBMC_CASES = {
    "ketama": ({"ketama_weighted": True}, (1, 2, 3)),
    "ketama-unweighted": ({"ketama": True}, (1, 1, 1)),
    "modula": ({"distribution": "modula", "hash": "crc"}, (1, 1, 1)),
}
PHP_CASES = {
    "php-consistent": (("consistent", "crc32"), (1, 2, 3)),
    "php-standard:fnv": (("standard", "fnv"), (1, 2, 3)),
}


def keys_for(prefix, n=N_KEYS):
    """The keys php/memcache_placement.php reads: PREFIX:i, every fifth PREFIX:café:i, one of 250
    bytes."""
    keys = [f"{prefix}:café:{i}" if i % 5 == 0 else f"{prefix}:{i}" for i in range(n)]
    return keys + [f"{prefix}:long:".ljust(250, "x")]


def value_of(key):
    return b"v:" + key.encode()


def store_through(addr, keys):
    data = b"".join(b"set %s 0 0 %d\r\n%s\r\n" % (k.encode(), len(value_of(k)), value_of(k))
                    for k in keys)
    r = mk.request(addr, data, done=mk.until_lines(len(keys)), idle=10.0, total=30.0)
    assert r.lines() == [b"STORED"] * len(keys), r.raw[-300:]


def holders(backends, keys):
    """key -> index of the backend holding it; each key on exactly one, every backend some."""
    holder = {}
    for i, sp in enumerate(backends):
        for k in held_keys(sp.addr, keys):
            assert k not in holder, f"{k!r} on two backends"
            holder[k] = i
    missing = [k for k in keys if k not in holder]
    assert not missing, f"{len(missing)} keys on no backend: {missing[:5]}"
    counts = [list(holder.values()).count(i) for i in range(len(backends))]
    assert all(counts), f"a backend holds no key: {counts}"
    return holder, counts


def router_requests(addr, n):
    r = mk.request(addr, b"stats router\r\n", done=mk.until_end, idle=5.0, total=5.0)
    st = dict(line.decode().split(" ", 2)[1:] for line in r.lines() if line.startswith(b"STAT "))
    return [int(st[f"pool:main:{i}:requests"]) for i in range(n)]


def read_through(addr, keys):
    """The keys the router finds, with their values (multi-gets of 25)."""
    found = {}
    for i in range(0, len(keys), 25):
        part = keys[i:i + 25]
        r = mk.request(addr, b"get " + b" ".join(k.encode() for k in part) + b"\r\n",
                       done=mk.until_end, idle=5.0, total=10.0)
        assert r.units and r.units[-1][0] == b"END", r.raw[-200:]
        for line, data in r.units[:-1]:
            found[line.split(b" ")[1].decode()] = data
    return found


@pytest.mark.parametrize("placement", list(PYLIBMC_CASES))
def test_router_places_keys_as_pylibmc(spawn, tmp_path, placement):
    behaviors, weights = PYLIBMC_CASES[placement]
    backends, router, specs = mkroute.spawn_router(spawn, tmp_path, placement, weights)
    keys = keys_for(f"rp-{placement}")
    store_through(router.addr, keys)
    holder, counts = holders(backends, keys)
    assert router_requests(router.addr, len(backends)) == counts

    mc = pylibmc.Client(specs, behaviors=behaviors)
    try:
        got = mc.get_multi(keys)
        missed = [k for k in keys if got.get(k) != value_of(k)]
        assert not missed, (f"pylibmc {behaviors} over {specs} misses {len(missed)} of {len(keys)} "
                            f"keys the router stored: {missed[:5]}; per backend {counts}")
        # and the other way: what pylibmc stores, the router finds
        others = keys_for(f"pr-{placement}")
        assert not mc.set_multi({k: value_of(k) for k in others})
    finally:
        mc.disconnect_all()
    # the check can fail: a client placing keys another way misses some
    names = list(PYLIBMC_CASES)
    other = PYLIBMC_CASES[names[(names.index(placement) + 1) % len(names)]][0]
    mc = pylibmc.Client(specs, behaviors=other)
    try:
        assert len(mc.get_multi(keys)) < len(keys), other
    finally:
        mc.disconnect_all()
    found = read_through(router.addr, others)
    missed = [k for k in others if found.get(k) != value_of(k)]
    assert not missed, f"the router misses {len(missed)} keys pylibmc stored: {missed[:5]}"


@pytest.mark.parametrize("placement", list(PHP_CASES))
def test_router_places_keys_as_php_memcache(php, spawn, tmp_path, placement):  # noqa: F811
    (strategy, hash_fn), weights = PHP_CASES[placement]
    backends, router, specs = mkroute.spawn_router(spawn, tmp_path, placement, weights)
    prefix = f"rphp-{strategy}-{hash_fn}"
    keys = keys_for(prefix)
    store_through(router.addr, keys)
    holder, counts = holders(backends, keys)
    ini = (f"memcache.hash_strategy={strategy}", f"memcache.hash_function={hash_fn}")
    got, err = run_php(php, "memcache_placement.php", ",".join(specs), prefix, N_KEYS, "read", ini=ini)
    assert got["ini"] == [strategy, hash_fn], err
    assert "Warning" not in err and "Notice" not in err, err
    assert [k for k, _, _ in got["keys"]] == keys
    by_port = {f"{mk.HOST}:{sp.port}": i for i, sp in enumerate(backends)}
    wrong = [(k, s, holder[k]) for k, s, _ in got["keys"] if by_port.get(s) != holder[k]]
    assert not wrong, (f"{len(wrong)} of {len(keys)} keys: (key, PHP's server, backend holding "
                       f"it) {wrong[:5]}; per backend {counts}")
    missed = [k for k, _, v in got["keys"] if v != value_of(k).decode()]
    assert not missed, f"PHP misses {len(missed)} keys: {missed[:5]}"
