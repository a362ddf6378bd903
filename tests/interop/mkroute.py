"""run.sh's routed passes (MEMKITD_ROUTE=memcached or MEMKITD_ROUTE=memkitd): every memkitd a
suite starts is a router (`memkitd --route FILE`) in front of three backends of that kind on
127.0.0.1, one ketama pool under a hash route, and the suites talk to the router only.

The router gets the suites' flags (`-S` and its SASL environment, `-B`, `-D`, `-X`,
`-o idle_timeout=1`, a UNIX socket, ...): they are about the clients it faces. The backends
get the base flags only (`-U 0 -m 64`, plus the storage flags of STORAGE_FLAGS when a suite
passes one), no authentication: the router authenticates its clients and reaches its
backends over loopback, as it would a trusted network (its pools can log in too,
`username`/`password` with `protocol = "binary"`, which this pass does not use). Backends and
router are started and stopped together (`mkinterop.ServerProcess`), by PID; the router's
file is written in a scratch directory removed with them.

This module is the one place for what differs in this pass, each with its reason:
EXPECTED_DIFFERENCES (cases that cannot hold through a router, with either backend kind),
BY_BACKEND (the same, for one backend kind only), KNOWN_BUGS (router bugs the pass found,
xfails until fixed), RANDOM_LEFT_OUT (what the random differential does not generate),
STATS_LEFT_OUT (stat names a router leaves out), cas_scope (how CAS values are compared) and
keys_on_one_server (keys for a test of what one server promises across its keys).
conftest marks exactly the listed cases as xfail in this pass."""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import mkinterop as mk

ENV = "MEMKITD_ROUTE"
BACKEND_KINDS = ("memcached", "memkitd")
N_BACKENDS = 3
START_TIMEOUT = 10.0

# Flags of the suites' memkitd that are about storage, not the clients: the backends get
# them as well as the router (none of today's suites passes one).
STORAGE_FLAGS = {"-m": 1, "-I": 1, "-C": 0, "-M": 0, "-n": 1, "-f": 1, "-L": 0}


def backend_kind():
    """The backends' kind in this pass, None outside it."""
    v = os.environ.get(ENV)
    if not v:
        return None
    if v not in BACKEND_KINDS:
        raise RuntimeError(f"{ENV}={v!r}: expected one of {BACKEND_KINDS}")
    return v


def enabled():
    return backend_kind() is not None


# The routers this pass started, by address: their Backends (for keys_on_one_server).
ROUTERS = {}


def keys_on_one_server(addr, n, prefix):
    """`n` keys named `prefix`<number> that one memcached holds, for a test of what one server
    promises across its keys (each store its own CAS). Outside this pass, the first `n`.
    Through a router the keys spread over its backends, so candidates are stored through the
    router and looked for on each backend, then deleted; the first `n` one backend took."""
    names = [f"{prefix}{i}" for i in range(64)]
    backends = ROUTERS.get(addr)
    if backends is None:
        return names[:n]
    held = {b: [] for b in backends.addrs}
    stored = []
    try:
        for name in names:
            stored.append(name)
            mk.cmd(addr, f"set {name} 0 0 1\r\nv\r\n".encode())
            for b in backends.addrs:
                if mk.cmd(b, f"mg {name}\r\n".encode()).raw.startswith(b"HD"):
                    held[b].append(name)
            full = [keys for keys in held.values() if len(keys) >= n]
            if full:
                return full[0][:n]
    finally:
        for name in stored:
            mk.cmd(addr, f"delete {name}\r\n".encode())
    raise RuntimeError(f"no backend of {addr} holds {n} of {len(names)} keys")


def storage_flags(flags):
    """The STORAGE_FLAGS among `flags`, with their values."""
    out, i = [], 0
    flags = list(flags)
    while i < len(flags):
        n = STORAGE_FLAGS.get(flags[i])
        if n is None:
            i += 1
            continue
        out += flags[i:i + 1 + n]
        i += 1 + n
    return out


def config(servers, placement="ketama", protocol="meta", route="hash", name="main"):
    """A route file: one pool of `servers` ((host, port) or "host:port[:weight]") and one
    route of type `route` over it."""
    names = [s if isinstance(s, str) else f"{s[0]}:{s[1]}" for s in servers]
    listed = ", ".join(f'"{s}"' for s in names)
    return (f"[pools.{name}]\nservers = [{listed}]\nplacement = \"{placement}\"\n"
            f"protocol = \"{protocol}\"\n\n[[route]]\ntype = \"{route}\"\npool = \"{name}\"\n")


def spawn_router(spawn, directory, placement="ketama", weights=(1, 1, 1), kind="memcached"):
    """For tests of the router itself, in any pass: len(weights) backends of `kind` and a
    router over them (one pool, `placement`, a hash route; its file in `directory`), started
    with conftest's `spawn` as they are (`plain`). Returns (backends, router, server specs
    host:port:weight)."""
    backends = [spawn(kind, plain=True) for _ in weights]
    specs = [f"{mk.HOST}:{sp.port}:{w}" for sp, w in zip(backends, weights)]
    path = Path(directory) / "route.toml"
    path.write_text(config(specs, placement=placement))
    router = spawn("memkitd", ["--route", str(path)], plain=True)
    return backends, router, specs


def binary_of(kind):
    return mk.memkitd_path() if kind == "memkitd" else mk.memcached_path()


class Backends:
    """The backends of one router, and the `--route` flags that make a memkitd their router.
    `flags` are extra flags for each backend (the storage flags of the router's)."""

    def __init__(self, kind, n=N_BACKENDS, flags=(), placement="ketama", protocol="meta"):
        self.kind = kind
        self.n = n
        self.extra = list(flags)
        self.placement = placement
        self.protocol = protocol
        self.dir = Path(tempfile.mkdtemp(prefix="route-"))
        self.path = self.dir / "route.toml"
        self.procs = []
        self.logs = []
        self.ports = []

    @property
    def addrs(self):
        return [(mk.HOST, p) for p in self.ports]

    def flags(self):
        return ["--route", str(self.path)]

    def start(self):
        """Starts the backends (each on a free port, retried if another process took it) and
        writes the route file; raises RuntimeError if one does not start."""
        binary = binary_of(self.kind)
        if not binary.exists():
            raise RuntimeError(f"{self.kind} binary not found: {binary}")
        for _ in range(self.n):
            self._start_one(binary)
        self.path.write_text(config(self.addrs, self.placement, self.protocol))
        return self

    def _start_one(self, binary):
        err = None
        for _attempt in range(5):
            port = mk.free_port()
            log = tempfile.TemporaryFile()
            argv = ([str(binary), "-p", str(port), "-l", mk.HOST] + mk.BASE_FLAGS + self.extra
                    + mk.root_flags())
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                if p.poll() is not None:
                    log.seek(0)
                    err = f"backend {self.kind} exited with {p.returncode}: {log.read()[-2000:]!r}"
                    break
                try:
                    with socket.create_connection((mk.HOST, port), timeout=0.5):
                        pass
                except OSError:
                    time.sleep(0.02)
                    continue
                self.procs.append(p)
                self.logs.append(log)
                self.ports.append(port)
                return
            else:
                err = f"backend {self.kind} did not accept connections on {port}"
            _stop(p)
        self.stop()
        raise RuntimeError(err)

    def alive(self):
        return all(p.poll() is None for p in self.procs)

    def output(self, limit=2000):
        out = []
        for i, log in enumerate(self.logs):
            try:
                log.flush()
                log.seek(0)
                text = log.read()[-limit:].decode("utf-8", "replace")
            except (OSError, ValueError):
                continue
            code = self.procs[i].poll()
            state = "running" if code is None else f"exited {code}"
            out.append(f"--- backend {i} ({self.kind} on {self.ports[i]}, {state}):\n{text}")
        return "\n".join(out)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            _stop(p)
        self.procs, self.ports = [], []
        shutil.rmtree(self.dir, ignore_errors=True)


def _stop(p):
    if p.poll() is None:
        p.terminate()
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=5)


# ---------------------------------------------------------------- what differs in this pass

# Why cases differ through a router; each reason once, named by the cases below.
OWN_STORE = ("a router stores nothing: `stats` items/bytes, `stats items`/`slabs` and their "
             "per-class counters are its own empty store's (`stats router` has the pools')")
OWN_DUMPS = ("item dumps and debug views (`lru_crawler mgdump`, `me`, `watch fetchers`) show the "
             "router's own empty store, not the backends' items")

# nodeid -> why the case cannot hold through a router, whatever the backends. Only what
# routing itself implies belongs here, never a router bug (KNOWN_BUGS).
EXPECTED_DIFFERENCES = {
    "test_differential.py::test_handwritten[stats-items-slabs]": OWN_STORE,
    "test_binary_raw.py::test_case[stats-stepwise]": OWN_STORE,
    "test_binary_raw.py::test_case[stats-pipelined]": OWN_STORE,
    "test_binary_raw.py::test_case[stats-fragmented]": OWN_STORE,
    "test_php.py::test_php_memcached_binary[memkitd]": OWN_STORE,
    "test_pylibmc_binary.py::test_stats_binary[memkitd]": OWN_STORE,
    "test_python_memcached.py::test_flush_stats[memkitd]": OWN_STORE,
    "test_stats_truth.py::test_per_class_counters_match_memcached": OWN_STORE,
    "test_differential.py::test_handwritten[me]": OWN_DUMPS,
    "test_stats_truth.py::test_mgdump_documented_difference": OWN_DUMPS,
    "test_stats_truth.py::test_log_watcher_counters": OWN_DUMPS,
}

# What the backends answer, the router passes on: memkitd's documented differences from
# memcached 1.6.18 (docs/protocol-notes.md) are memcached's answers with memcached backends.
MEMCACHED_ANSWERS = ("with memcached backends the router passes on memcached 1.6.18's answer, "
                     "not memkitd's documented one")
# backend kind -> {nodeid: why}: what differs with that kind of backend only.
BY_BACKEND = {
    "memcached": {
        "test_differential.py::test_deliberate_difference[flag-E-accepted]": MEMCACHED_ANSWERS,
        "test_differential.py::test_deliberate_difference[flag-x-accepted]": MEMCACHED_ANSWERS,
        "test_differential.py::test_deliberate_difference[ms-append-prepend-vivify]":
            MEMCACHED_ANSWERS,
    },
    "memkitd": {},
}

# Router bugs this pass finds, not fixed here: nodeid -> (the bug, how), as in mkraft
# (STRICT: the run fails once the case passes; RUN: non-strict; NOT_RUN: not run unless
# MKROUTE_RUN_BUGS=1). Each must be removed with its fix.
STRICT, RUN, NOT_RUN = "strict", "run", "not run"
KNOWN_BUGS = {}


# What test_differential's random sequences leave out in this pass, and why (the generator
# already leaves out memcached's documented differences); the sequences are otherwise the same.
# A router bug's entry goes with its fix, as KNOWN_BUGS' do.
RANDOM_LEFT_OUT = {}


def leaves_out(what):
    """Whether the random differential leaves `what` out (RANDOM_LEFT_OUT, this pass only)."""
    assert what in RANDOM_LEFT_OUT, what
    return enabled()


# `stats` names a router leaves out (only a backend knows why it missed or refused;
# docs/router.md, "What clients see"): the stats comparisons allow them in this pass.
STATS_LEFT_OUT = {"get_expired", "get_flushed", "store_no_memory"}


def stats_left_out():
    return STATS_LEFT_OUT if enabled() else set()


def unkeyed_cas_masked(lines):
    """Normalized reply lines written out by hand (`c1`, `c2`...), as this pass renders them:
    the CAS of a meta reply naming no key is `c` (cas_scope)."""
    if not enabled():
        return lines
    out = []
    for line in lines:
        parts = line.split(b" ")
        if parts[0] in (b"HD", b"VA", b"EN", b"NF", b"NS", b"EX") and not any(
                p.startswith(b"k") for p in parts[1:]):
            parts = [b"c" if re.fullmatch(rb"c\d+", p) else p for p in parts]
        out.append(b" ".join(parts))
    return out


def cas_scope(raw, key):
    """What tells a CAS value apart in the replies the suites compare (mkinterop.CasCanon,
    test_binary_raw): the value itself, as one server's CAS numbers are unique across its
    keys. Not through a router: each backend counts its own, so two keys on two backends
    often share one. There the value is told apart per key where the reply names it, and
    where it does not (binary replies, `mg` without `k`) only zero from non-zero (None)."""
    if not enabled():
        return raw
    return None if key is None else (key, raw)


def expected_differences():
    """nodeid -> reason for this pass's backend kind."""
    return {**EXPECTED_DIFFERENCES, **BY_BACKEND.get(backend_kind(), {})}
