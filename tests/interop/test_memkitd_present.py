"""CI must not pass vacuously: the memkitd binary under test has to exist, and the memkitd the
suites talk to is what the pass says it is (in run.sh's replicated pass, a follower of a
3-node group that forwards writes to its leader; otherwise no group at all)."""

import re

import mkinterop as mk
import mkraft


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
