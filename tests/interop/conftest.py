"""Fixtures: `memkitd`, `memcached` (fresh servers on free loopback ports, killed by PID at
the end), `server` (parametrized over both, so a failure shows whether memcached itself
behaves that way), `server_pair` (both at once, for the differential test) and `spawn`
(a server of a given kind with extra flags)."""

import os

import pytest

import mkinterop as mk
import mkraft
import mkroute

KINDS = ["memkitd", "memcached"]


def binary(kind):
    """The executable of `kind` (memkitd or memcached); fails the test when missing."""
    return _binary(kind)


def _binary(kind):
    if kind == "memkitd":
        p = mk.memkitd_path()
        if not p.exists():
            pytest.fail(
                f"memkitd binary not found at {p} (set MEMKITD or build with "
                "`cargo build -p memkit-server`)",
                pytrace=False,
            )
        return p
    p = mk.memcached_path()
    if not p.exists():
        pytest.fail(f"memcached binary not found at {p}", pytrace=False)
    return p


class _Pool:
    """Session-wide pool of servers keyed by (kind, extra flags); restarted if one died."""

    def __init__(self):
        self.procs = {}

    def get(self, kind, flags=(), env=None):
        key = (kind, tuple(flags), tuple(sorted((env or {}).items())))
        sp = self.procs.get(key)
        if sp is None:
            sp = mk.ServerProcess(kind, _binary(kind), flags, env)
            self.procs[key] = sp
        try:
            sp.ensure_running()
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)
        return sp

    def stop_all(self):
        for sp in self.procs.values():
            sp.stop()


_POOLS = []


@pytest.fixture(scope="session")
def pool():
    p = _Pool()
    _POOLS.append(p)
    yield p
    p.stop_all()
    _POOLS.remove(p)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    if rep.when == "call" and (rep.failed or hasattr(rep, "wasxfail")):
        item.stash[_FAILED] = True
    return rep


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def _fresh_group_after_failure(request):
    """In run.sh's replicated pass, a case that failed may leave its group without a leader
    or with an append it cannot finish (in a routed pass, a backend marked down): the pool's
    memkitd groups (routers and their backends) are started afresh after it, so that one
    failure is reported once and not again by every case after it."""
    yield
    if (mkraft.enabled() or mkroute.enabled()) and request.node.stash.get(_FAILED, False):
        for p in _POOLS:
            for sp in p.procs.values():
                if sp.kind == "memkitd":
                    sp.stop()


def _fresh(pool, kind, flags=()):
    sp = pool.get(kind, flags)
    mk.flush(sp.addr)
    return sp


def _check_alive(sp):
    if not sp.alive():
        pytest.fail(
            f"{sp.kind} died during the test (exit {sp.proc.returncode}); output:\n{sp.output()}",
            pytrace=False,
        )


@pytest.fixture
def memkitd(pool):
    sp = _fresh(pool, "memkitd")
    yield sp.addr
    _check_alive(sp)


@pytest.fixture
def memcached(pool):
    sp = _fresh(pool, "memcached")
    yield sp.addr
    _check_alive(sp)


@pytest.fixture(params=KINDS)
def server(request, pool):
    """(host, port) of a flushed server; the test runs once per kind."""
    sp = _fresh(pool, request.param)
    yield sp.addr
    _check_alive(sp)


@pytest.fixture
def server_kind(request):
    return request.node.callspec.params.get("server")


@pytest.fixture
def server_pair(pool):
    """{'memkitd': ServerProcess, 'memcached': ServerProcess}: same flags, both flushed.
    (Validate the differential test itself with MEMKITD=/usr/bin/memcached.)"""
    a = _fresh(pool, "memkitd")
    b = _fresh(pool, "memcached")
    yield {"memkitd": a, "memcached": b}
    _check_alive(a)
    _check_alive(b)


@pytest.fixture
def spawn():
    """spawn(kind, flags, env=None, unix=None, plain=False) -> ServerProcess with extra flags
    (and environment variables; on a UNIX socket path instead of TCP; `plain`: as it is in
    every pass, see ServerProcess); stopped at test end."""
    started = []

    def _spawn(kind, flags=(), env=None, unix=None, plain=False):
        sp = mk.ServerProcess(kind, _binary(kind), flags, env, unix, plain=plain)
        started.append(sp)
        try:
            sp.start()
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)
        return sp

    yield _spawn
    for sp in started:
        sp.stop()


@pytest.hookimpl(tryfirst=True)  # before -k deselects: a stale entry is told apart from a skipped one
def pytest_collection_modifyitems(config, items):
    """In run.sh's replicated pass (mkraft) and routed passes (mkroute), the cases the pass's
    module names (and only those) are xfails with their reasons: an expected difference is
    strict (if it passes, the run fails, so the list cannot outlive the difference), a known
    bug strict, not strict or not run, as the module says. A listed case that its collected
    module does not have is an error too (renamed or removed)."""
    if mkraft.enabled():
        mod, what, env = mkraft, "replicated group", "MKRAFT_RUN_BUGS"
        differences, bug = mkraft.EXPECTED_DIFFERENCES, "memkitd bug"
    elif mkroute.enabled():
        mod, what, env = mkroute, f"router ({mkroute.backend_kind()} backends)", "MKROUTE_RUN_BUGS"
        differences, bug = mkroute.expected_differences(), "router bug"
    else:
        return
    by_id = {item.nodeid: item for item in items}
    modules = {item.nodeid.split("::")[0] for item in items}
    run_bugs = os.environ.get(env) == "1"
    listed = {k: (f"{what}: {v}", {"strict": True}) for k, v in differences.items()}
    for k, (v, how) in mod.KNOWN_BUGS.items():
        run = run_bugs or how != mod.NOT_RUN
        kw = {"strict": True} if how == mod.STRICT else {"strict": False, "run": run}
        listed[k] = (f"{bug}: {v}", kw)
    for nodeid, (reason, kw) in listed.items():
        item = by_id.get(nodeid)
        if item is None:
            if nodeid.split("::")[0] in modules:
                raise pytest.UsageError(f"{mod.__name__} names no such test: {nodeid}")
            continue
        item.add_marker(pytest.mark.xfail(reason=reason, **kw))
