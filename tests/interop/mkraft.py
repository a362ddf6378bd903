"""run.sh's third pass (MEMKITD_RAFT_DIR set): every memkitd a suite starts is one node of a
3-node replicated group on 127.0.0.1, and the suite talks to that node only.

Why a follower: a write through a follower is forwarded to the leader and its reply renders
the outcome of the entry the leader committed, so the suites exercise the whole replicated
path (`crates/memkit-server/src/exec/replicate.rs`), not only the leader's shortcut. To get
one without depending on who wins an election, the two other nodes (ids 1 and 2; 1
bootstraps the group) start first and elect a leader between them, a majority of the three;
the suites' node (id 3) starts last on an empty directory and joins as a follower.

The two other nodes are started and stopped with the suites' node (`ServerProcess`), by PID,
each group in a scratch directory of its own under MEMKITD_RAFT_DIR. They get the base flags
only: the suites' own flags (`-S`, `-X`, `-o idle_timeout=1`, ...) are for the node they
talk to. The pass fails when the group does not form: no leader agreed on by the two, or the
suites' node not following it (not checked under `-S`, where ASCII `stats` is refused and a
SASL login would move the `auth_cmds` the SASL suite counts: there every write, forwarded,
fails unless the node has joined).

This module is the one place for what differs in this pass, each with its reason:
EXPECTED_DIFFERENCES (cases that cannot hold in a group), KNOWN_BUGS (memkitd bugs the pass
found), TIME_SCALE (time bounds) and RANDOM_LEFT_OUT (the random differential). conftest
marks exactly the listed cases as xfail in this pass, with their reasons."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import mkinterop as mk

SUITE_NODE = 3
OTHER_NODES = (1, 2)
FORM_TIMEOUT = 20.0

# The default heartbeat (100 ms; elections after 2-4 without one, the hard timeout of an
# append is one): a debug memkitd on a loaded 2-core machine misses 50 ms ones often enough
# that the group changes leaders under the suites.
RAFT_FLAGS = []

# Why cases differ in a group; each reason once, named by the cases below.
MG_VIVIFY = ("`mg ... N` (create on a miss) answers CLIENT_ERROR in a group: a read must not "
             "change the replicated state (exec/replicate.rs)")

TOO_LARGE_KEEPS = ("a `set` refused as too large leaves the old value in a group (memcached "
                   "drops it): the refusal comes before the log, and a node changing its state "
                   "alone would differ from the others (docs/replication.md)")

# nodeid -> why the case cannot hold against a node of a replicated group. Only a documented
# property of replication belongs here, never a memkitd bug (KNOWN_BUGS).
EXPECTED_DIFFERENCES = {
    "test_differential.py::test_handwritten[mg-vivify]": MG_VIVIFY,
    "test_differential.py::test_handwritten[set-too-large]": TOO_LARGE_KEEPS,
    # Each also checks that the old value is gone after a `set` refused as too large.
    "test_binary_raw.py::test_case[item-size-stepwise]": TOO_LARGE_KEEPS,
    "test_binary_raw.py::test_case[item-size-pipelined]": TOO_LARGE_KEEPS,
    "test_binary_raw.py::test_case[item-size-fragmented]": TOO_LARGE_KEEPS,
    "test_pylibmc.py::test_item_size_limit[memkitd]": TOO_LARGE_KEEPS,
    "test_pylibmc_binary.py::test_item_size_limit[memkitd]": TOO_LARGE_KEEPS,
    "test_pylibmc_binary.py::test_big_values[memkitd]": TOO_LARGE_KEEPS,
    "test_pymemcache.py::test_item_size_limit[memkitd]": TOO_LARGE_KEEPS,
    "test_python_memcached.py::test_item_size_limit[memkitd]": TOO_LARGE_KEEPS,
}

# Where a suite bounds a run in seconds (budget()), this pass gives it this many times as
# long: every write waits for its entry to be committed by a majority (a forward to the
# leader, an append to the others and their fsyncs), milliseconds each where memcached takes
# microseconds, so a stream of a few thousand writes outlasts a bound set for memcached.
# What the cases check is unchanged.
TIME_SCALE = 4

# memkitd bugs this pass finds, not fixed here: nodeid -> (the bug, how). Each must be removed
# with its fix. STRICT: run, and the run fails once the case passes; RUN: a non-strict xfail
# (for a bug that depends on the machine's speed); NOT_RUN: not run unless MKRAFT_RUN_BUGS=1.
# None known.
STRICT, RUN, NOT_RUN = "strict", "run", "not run"
KNOWN_BUGS = {}

# What test_differential's random sequences leave out in this pass, and why (the generator
# already leaves out memcached's documented differences); the sequences are otherwise the same.
RANDOM_LEFT_OUT = {
    "mg N": MG_VIVIFY,
}


def enabled():
    return bool(os.environ.get("MEMKITD_RAFT_DIR"))


def limit_maxbytes(memory):
    """The `limit_maxbytes` a memkitd started with `-m` of `memory` bytes reports in this pass:
    the engine's share of the budget, as with --persist, where a node's items are (its RAM a
    cache of them; docs/persistence.md): memkit-persist's `split_budget` keeps an eighth each,
    at least 4 and 8 MiB, for fjall's cache and memtables. `memory` itself otherwise."""
    if not enabled():
        return memory
    mib = 1 << 20
    cache, write_buffer = max(memory // 8, 4 * mib), max(memory // 8, 8 * mib)
    return max(memory - cache - write_buffer, 8 * mib)


def budget(seconds):
    """A suite's time bound, scaled in this pass (TIME_SCALE)."""
    return seconds * TIME_SCALE if enabled() else seconds


def leaves_out(what):
    """Whether the random differential leaves `what` out (RANDOM_LEFT_OUT, this pass only)."""
    assert what in RANDOM_LEFT_OUT, what
    return enabled()


def stats(addr, total=5.0):
    """`stats` of a node over ASCII, by name."""
    s = mk.connect_unix(addr, total) if isinstance(addr, str) else mk.connect(addr, total)
    try:
        r = mk.request(s, b"stats\r\n", done=mk.until_end, idle=total, total=total)
    finally:
        s.close()
    out = {}
    for line in r.lines():
        parts = line.decode("utf-8", "replace").split(" ", 2)
        if len(parts) == 3 and parts[0] == "STAT":
            out[parts[1]] = parts[2]
    return out


class Group:
    """The two other nodes of one suite memkitd's group, and the flags that make the suites'
    node the third."""

    def __init__(self, binary):
        self.binary = Path(binary)
        root = os.environ["MEMKITD_RAFT_DIR"]
        self.dir = Path(tempfile.mkdtemp(prefix="group-", dir=root))
        self.raft_ports = {i: mk.free_port() for i in OTHER_NODES + (SUITE_NODE,)}
        self.ports = {i: mk.free_port() for i in OTHER_NODES}
        self.procs = {}
        self.logs = {}
        self.leader = None

    def flags(self, node):
        peers = ",".join(f"{i}={mk.HOST}:{p}" for i, p in sorted(self.raft_ports.items()))
        return ["--persist", str(self.dir / f"node{node}"), "--raft-node", str(node),
                "--raft-listen", f"{mk.HOST}:{self.raft_ports[node]}", "--raft-peers", peers] + RAFT_FLAGS

    def start_others(self):
        """Starts nodes 1 and 2 and waits until they agree on a leader, one of them."""
        for i in OTHER_NODES:
            argv = ([str(self.binary), "-p", str(self.ports[i]), "-l", mk.HOST] + mk.BASE_FLAGS
                    + self.flags(i) + mk.root_flags())
            self.logs[i] = tempfile.TemporaryFile()
            self.procs[i] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.logs[i],
                                             stderr=subprocess.STDOUT)
        deadline = time.monotonic() + FORM_TIMEOUT
        seen = None
        while time.monotonic() < deadline:
            self._check_others()
            try:
                st = {i: stats((mk.HOST, self.ports[i]), total=2.0) for i in OTHER_NODES}
            except OSError:
                time.sleep(0.05)
                continue
            seen = {i: (s.get("raft_role"), s.get("raft_leader")) for i, s in st.items()}
            leaders = {s.get("raft_leader") for s in st.values()}
            if len(leaders) == 1:
                lead = int(leaders.pop() or 0)
                if lead in OTHER_NODES and st[lead].get("raft_role") == "leader":
                    self.leader = lead
                    return
            time.sleep(0.05)
        raise RuntimeError(f"the group did not form: no leader agreed on within {FORM_TIMEOUT}s "
                           f"(role, leader): {seen}\n{self.output()}")

    def check_joined(self, addr):
        """Waits until the suites' node follows a leader among the others (the one elected, or
        one that took over since) and has applied what that leader had committed before."""
        commit = int(stats((mk.HOST, self.ports[self.leader]))["raft_commit_index"])
        deadline = time.monotonic() + FORM_TIMEOUT
        s = {}
        while time.monotonic() < deadline:
            self._check_others()
            s = stats(addr)
            lead = int(s.get("raft_leader") or 0)
            if (s.get("raft_role") == "follower" and lead in OTHER_NODES
                    and int(s.get("raft_applied_index", 0)) >= commit
                    and stats((mk.HOST, self.ports[lead])).get("raft_role") == "leader"):
                self.leader = lead
                return
            time.sleep(0.05)
        picked = {k: v for k, v in s.items() if k.startswith("raft_")}
        raise RuntimeError(f"node {SUITE_NODE} did not join the group led by {self.leader} "
                           f"within {FORM_TIMEOUT}s: {picked}")

    def _check_others(self):
        for i, p in self.procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"group node {i} exited with {p.returncode}:\n{self.output()}")

    def alive(self):
        return all(p.poll() is None for p in self.procs.values())

    def output(self, limit=2000):
        out = []
        for i, log in self.logs.items():
            try:
                log.flush()
                log.seek(0)
                out.append(f"--- node {i}:\n" + log.read()[-limit:].decode("utf-8", "replace"))
            except (OSError, ValueError):
                pass
        return "\n".join(out)

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)
