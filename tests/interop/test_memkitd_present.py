"""CI must not pass vacuously: the memkitd binary under test has to exist, and the memkitd the
suites talk to is what the pass says it is (in run.sh's replicated pass, a follower of a
3-node group that forwards writes to its leader; in the routed passes, a router over three
backends; otherwise neither)."""

import re

import mkinterop as mk
import mkraft
import mkroute


def test_memkitd_binary_exists():
    p = mk.memkitd_path()
    assert p.exists(), f"memkitd binary not found at {p}; set MEMKITD or build memkit-server"


def test_memkitd_is_a_follower_in_the_replicated_pass(pool):
    sp = pool.get("memkitd")
    st = mkraft.stats(sp.addr)
    if not mkraft.enabled():
        assert "raft_role" not in st, st
        return
    assert (st["raft_node"], st["raft_role"]) == (str(mkraft.SUITE_NODE), "follower"), st
    leader = sp.group.leader
    assert st["raft_leader"] == str(leader), st
    r = mk.cmd(sp.addr, b"set present 0 0 2\r\nhi\r\n")
    assert r.lines() == [b"STORED"], r.raw
    # Written through the follower, committed by the leader: every node reads it, with the
    # same CAS (the entry's log index).
    seen = set()
    for addr in [sp.addr] + [(mk.HOST, sp.group.ports[i]) for i in mkraft.OTHER_NODES]:
        r = mk.request(addr, b"gets present\r\n", done=mk.until_end)
        assert len(r.units) == 2 and r.units[0][1] == b"hi", (addr, r.raw)
        seen.add(re.fullmatch(rb"VALUE present 0 2 (\d+)", r.units[0][0]).group(1))
    assert len(seen) == 1, seen
    assert mkraft.stats((mk.HOST, sp.group.ports[leader]))["raft_role"] == "leader"


def test_memkitd_is_a_router_in_the_routed_pass(pool):
    """In run.sh's routed passes the suites' memkitd is a router over three backends of the
    pass's kind (mkroute), and a key stored through it is on exactly one of them; elsewhere
    memkitd is no router (`stats router` is an unknown command)."""
    sp = pool.get("memkitd")
    r = mk.request(sp.addr, b"stats router\r\n", done=mk.until_end, idle=5.0, total=5.0)
    if not mkroute.enabled():
        assert r.lines() == [b"ERROR"], r.raw
        return
    st = dict(line.decode().split(" ", 2)[1:] for line in r.lines() if line.startswith(b"STAT "))
    backends = sp.backends.addrs
    assert st["pool:main:servers"] == str(len(backends)) == str(mkroute.N_BACKENDS), st
    assert [st[f"pool:main:{i}:addr"] for i in range(len(backends))] == [f"{h}:{p}" for h, p in backends]
    assert mk.cmd(sp.addr, b"set routed 0 0 2\r\nhi\r\n").lines() == [b"STORED"]
    held = [mk.request(a, b"get routed\r\n", done=mk.until_end).units for a in backends]
    assert sorted(len(u) for u in held) == [1, 1, 2], held
    for a in backends:
        v = mk.request(a, b"version\r\n", done=mk.until_lines(1)).lines()[0]
        assert (b"memkit" in v) == (mkroute.backend_kind() == "memkitd"), v
