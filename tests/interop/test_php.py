"""PHP against the server, run the way a user runs it: Debian's `php` CLI with its own ini
(no -n; only the settings a user would pass), scripts in tests/interop/php/.

- php-memcached (libmemcached 1.1.4) with OPT_BINARY_PROTOCOL: every call's return value and
  result code, compared with what memcached 1.6.18 gives (EXPECTED below);
- the memcached session handler with Debian's defaults (memcached.sess_binary_protocol On,
  memcached.sess_locking On): three requests in three `php` processes count 1, 2, 3; two
  processes on one session id at once both finish and the second sees the first's write;
- php-memcache (the other extension, text protocol): basic commands.

Each test runs against memkitd and memcached ([memkitd]/[memcached]); the session handler's
also through a router over three memcached (`..._through_router`)."""

import json
import secrets
import select
import shutil
import subprocess
from pathlib import Path

import pytest

import mkinterop as mk
import mkraft
import mkroute

PHP_DIR = Path(__file__).resolve().parent / "php"

# Result codes (Memcached::RES_*)
SUCCESS, UNKNOWN_READ_FAILURE, DATA_EXISTS, NOTSTORED, NOTFOUND, E2BIG = 0, 7, 12, 14, 16, 37

EXPECTED = {
    "flush": [True, SUCCESS],
    "get_miss": [False, NOTFOUND],
    "set": [True, SUCCESS],
    "get": ["v", SUCCESS],
    "set_int": [True, SUCCESS],
    "get_int": [42, SUCCESS],
    "set_array": [True, SUCCESS],
    "get_array": [{"a": 1, "b": [True, None, 1.5]}, SUCCESS],
    "set_bin": [True, SUCCESS],
    "get_bin_hex": ["000d0a454e440d0a80ff", SUCCESS],
    "add_exists": [False, DATA_EXISTS],
    "add_new": [True, SUCCESS],
    "replace_missing": [False, NOTFOUND],
    "replace": [True, SUCCESS],
    "get_replaced": ["n2", SUCCESS],
    "setMulti": [True, SUCCESS],
    "getMulti_count": [100, SUCCESS],
    "getMulti_equal": [True, SUCCESS],
    "getMulti_order": [True, SUCCESS],
    "getMulti_all_missing": [[], NOTFOUND],
    "deleteMulti": [{"m0": True, "m1": True, "gone1": NOTFOUND}, NOTFOUND],
    "getMulti_after_delete": [98, SUCCESS],
    "get_extended_value": ["v", SUCCESS],
    "cas_nonzero": [True, SUCCESS],
    "cas_ok": [True, SUCCESS],
    "cas_stale": [False, DATA_EXISTS],
    "get_after_cas": ["v2", SUCCESS],
    "cas_missing": [False, NOTFOUND],
    "cas_changed": [True, SUCCESS],
    "incr_missing_no_initial": [False, NOTFOUND],
    "incr_initial": [10, SUCCESS],  # created with the initial value, the delta not added
    "incr_again": [15, SUCCESS],
    "decr_floor": [0, SUCCESS],
    "decr_initial": [7, SUCCESS],
    "get_counter": ["7", SUCCESS],
    "incr_big": [4294967295, SUCCESS],
    "incr_big2": [4294967297, SUCCESS],  # past 32 bits: the reply is 8 bytes
    # libmemcached 1.1.4 has no result code for DELTA_BADVAL (0x06): it reports
    # UNKNOWN_READ_FAILURE, as it does against memcached
    "incr_non_numeric": [False, UNKNOWN_READ_FAILURE],
    "append_missing": [False, NOTSTORED],
    "prepend_missing": [False, NOTSTORED],
    "append": [True, SUCCESS],
    "prepend": [True, SUCCESS],
    "get_appended": ["<<mid>>", SUCCESS],
    "touch": [True, SUCCESS],
    "touch_missing": [False, NOTFOUND],
    "delete": [True, SUCCESS],
    "delete_missing": [False, NOTFOUND],
    "set_big": [True, SUCCESS],
    "get_big_equal": [True, SUCCESS],
    "set_too_big": [False, E2BIG],
    "after_too_big": [True, SUCCESS],
    "get_after_too_big": ["fine", SUCCESS],
    "version_nonempty": [True, SUCCESS],
    "stats_keys": [["pid", "uptime", "version", "curr_items", "total_items", "get_hits", "get_misses",
                    "cmd_get", "cmd_set", "curr_connections", "limit_maxbytes", "threads", "bytes"], SUCCESS],
    "stats_limit": [mkraft.limit_maxbytes(64 * 1024 * 1024), SUCCESS],
    "stats_pid_positive": [True, SUCCESS],
    "stats_items_positive": [True, SUCCESS],
    "quit": [True, SUCCESS],
    "get_after_quit": ["fine", SUCCESS],
}


def php_bin():
    p = shutil.which("php")
    if not p:
        pytest.fail("php not found (Debian packages php-cli php-memcached php-memcache)", pytrace=False)
    return p


@pytest.fixture(scope="module")
def php():
    p = php_bin()
    r = subprocess.run([p, "-r", 'echo json_encode([extension_loaded("memcached"), '
                        'extension_loaded("memcache"), defined("Memcached::HAVE_SASL") && Memcached::HAVE_SASL]);'],
                       capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    have = json.loads(r.stdout)
    assert have == [True, True, True], (
        f"php extensions memcached/memcache/SASL support: {have} (Debian php-memcached php-memcache)")
    return p


def run_php(php, script, *args, ini=(), timeout=60):
    """Run one script with Debian's ini plus `-d` settings; return (json, stderr)."""
    argv = [php]
    for kv in ini:
        argv += ["-d", kv]
    argv += [str(PHP_DIR / script)] + [str(a) for a in args]
    r = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 0, f"{script} exited {r.returncode}:\n{r.stdout!r}\n{err}"
    lines = r.stdout.decode().strip().splitlines()
    assert lines, f"{script} printed nothing; stderr:\n{err}"
    return json.loads(lines[-1]), err


def test_php_memcached_binary(php, server):
    got, err = run_php(php, "memcached_binary.php", server[1])
    diffs = {k: (got.get(k, "<missing>"), v) for k, v in EXPECTED.items() if got.get(k, "<missing>") != v}
    assert not diffs, "name: (got, expected [value, result code])\n" + "\n".join(
        f"  {k}: {g!r} != {e!r}" for k, (g, e) in diffs.items()) + f"\nstderr:\n{err}"
    assert set(got) == set(EXPECTED)
    assert "Warning" not in err and "Fatal" not in err, err


def session_ini(addr):
    # what a user sets to keep sessions in memcached; everything else is Debian's default
    return ("session.save_handler=memcached", f"session.save_path={addr[0]}:{addr[1]}")


def new_session_id():
    return "interop" + secrets.token_hex(12)


def stored_session(addr, sid):
    r = mk.request(addr, b"get memc.sess.key.%s\r\n" % sid.encode(), done=mk.until_end, idle=5.0, total=5.0)
    units = r.units
    return units[0][1] if units and units[0][0].startswith(b"VALUE") else None


def test_php_session_binary_default(php):
    """The ini Debian ships: the session handler speaks binary and locks by default."""
    r = subprocess.run([php, "-r", 'echo json_encode([ini_get("memcached.sess_binary_protocol"),'
                        'ini_get("memcached.sess_locking")]);'],
                       capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert json.loads(r.stdout) == ["1", "1"], r.stdout


@pytest.fixture
def router(spawn, tmp_path):
    """(host, port) of a router (`memkitd --route`) over three memcached (ketama pool, hash
    route), started here in every pass (mkroute.spawn_router)."""
    _backends, sp, _specs = mkroute.spawn_router(spawn, tmp_path)
    return sp.addr


def test_php_session_counts(php, server):
    session_counts(php, server)


def test_php_session_counts_through_router(php, router):
    session_counts(php, router)


def session_counts(php, server):
    sid = new_session_id()
    for want in (1, 2, 3):
        got, err = run_php(php, "session_counter.php", sid, ini=session_ini(server))
        assert got["start"] is True and got["closed"] is True, (got, err)
        assert got["n"] == want, (got, err)
        assert "Warning" not in err, err  # e.g. "Failed to write session lock: A TIMEOUT OCCURRED"
    assert stored_session(server, sid) == b"n|i:3;"
    other, err = run_php(php, "session_counter.php", new_session_id(), ini=session_ini(server))
    assert other["n"] == 1, (other, err)


def test_php_session_lock_contention(php, server):
    session_lock_contention(php, server)


def test_php_session_lock_contention_through_router(php, router):
    session_lock_contention(php, router)


def session_lock_contention(php, server):
    """A holds the session (and its lock) for 0.4 s; B starts meanwhile and must wait for the
    lock (php-memcached retries every 150 ms, 5 times by default), then read A's write."""
    sid = new_session_id()
    ini = session_ini(server)
    argv = [php] + [x for kv in ini for x in ("-d", kv)]
    script = str(PHP_DIR / "session_counter.php")
    a = subprocess.Popen(argv + [script, sid, "0.4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    b = None
    try:
        ready, _, _ = select.select([a.stdout], [], [], 20)
        assert ready, "first php never opened its session"
        assert a.stdout.readline() == b"locked\n"
        b = subprocess.Popen(argv + [script, sid], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        out_a, err_a = a.communicate(timeout=30)
        out_b, err_b = b.communicate(timeout=30)
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=5)
    assert a.returncode == 0 and b.returncode == 0, (err_a, err_b)
    ra = json.loads(out_a.decode().strip().splitlines()[-1])
    rb = json.loads(out_b.decode().strip().splitlines()[-1])
    assert ra["n"] == 1 and ra["start"] is True, (ra, err_a)
    assert rb["start"] is True, (rb, err_b)
    assert rb["n"] == 2, f"second process did not see the first's write (no lock?): {rb} {err_b}"
    assert rb["waited"] >= 0.1, f"second process did not wait for the lock: {rb}"
    assert b"Warning" not in err_a + err_b, (err_a, err_b)
    assert stored_session(server, sid) == b"n|i:2;"
    third, err = run_php(php, "session_counter.php", sid, ini=ini)
    assert third["n"] == 3 and third["waited"] < 0.1, (third, err)  # the lock was released


def test_php_memcache_text(php, server):
    got, err = run_php(php, "memcache_text.php", server[1])
    assert got == {
        "connect": True, "flush": True, "get_miss": False, "set": True, "get": "value",
        "set_array": True, "get_array": {"0": 1, "two": 2}, "add_exists": False, "replace": True,
        "get_multi": {"k": "value2", "arr": {"0": 1, "two": 2}}, "set_num": True,
        "increment": 15, "decrement": 0, "increment_missing": False, "delete": True,
        "delete_missing": False, "get_deleted": False, "stats_pid_positive": True,
        "version_nonempty": True, "close": True,
    }, err
    assert "Warning" not in err and "Notice" not in err, err

