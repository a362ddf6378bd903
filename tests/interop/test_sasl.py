"""SASL (`-S`, mechanism PLAIN) against memkitd and memcached 1.6.18, both given the same users
(mksasl.py): pylibmc username/password, php-memcached setSaslAuthData, and the raw binary
exchange (what is refused before authentication, with which status, and what it does to the
connection)."""

import json
import subprocess
import sys

import pytest

import mkbinary as b
import mksasl
from conftest import KINDS
from test_php import php, run_php  # noqa: F401  (the php fixture)

ALICE, ALICE_PW = "alice", mksasl.USERS["alice"]
BOB, BOB_PW = "bob", mksasl.USERS["bob"]  # his pwdb line has a trailing token and CRLF
AUTH_FAILURE = 41  # libmemcached's MEMCACHED_AUTH_FAILURE


@pytest.fixture(scope="module")
def sasl_env(tmp_path_factory):
    return mksasl.sasl_env(tmp_path_factory.mktemp("sasl"))


@pytest.fixture(params=KINDS)
def sasl_server(request, pool, sasl_env):
    """(host, port) of a server started with -S (shared by this module's tests)."""
    sp = pool.get(request.param, ["-S"], sasl_env)
    yield sp.addr
    assert sp.alive(), f"{sp.kind} died: {sp.output()}"


PYLIBMC_SCRIPT = r"""
import json, sys
import pylibmc
host, port, user, password = sys.argv[1:5]
c = pylibmc.Client([f"{host}:{port}"], binary=True, username=user, password=password,
                   behaviors={"connect_timeout": 3000, "_poll_timeout": 3000,
                              "send_timeout": 3000000, "receive_timeout": 3000000})
out = {}
for name, call in [("set", lambda: c.set("sk", b"sv")), ("get", lambda: c.get("sk")),
                   ("incr", lambda: c.incr("sn")), ("set_n", lambda: c.set("sn", b"41")),
                   ("incr2", lambda: c.incr("sn")), ("delete", lambda: c.delete("sk"))]:
    try:
        r = call()
        out[name] = r.decode() if isinstance(r, bytes) else r
    except pylibmc.Error as e:
        out[name] = "error: " + str(e)
print(json.dumps(out))
"""


def run_pylibmc(addr, user, password):
    """pylibmc in its own process: SASL_PATH must be set before pylibmc (its wheel's own
    libsasl2) is loaded; see mksasl.client_plugin_dir."""
    env = {"SASL_PATH": mksasl.client_plugin_dir()}
    import os

    r = subprocess.run([sys.executable, "-c", PYLIBMC_SCRIPT, addr[0], str(addr[1]), user, password],
                       capture_output=True, timeout=60, env={**os.environ, **env}, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def test_pylibmc_right_password(sasl_server):
    got = run_pylibmc(sasl_server, ALICE, ALICE_PW)
    assert got.pop("incr").startswith("error: "), got  # libmemcached's no-create incr on a miss
    assert got == {"set": True, "get": "sv", "set_n": True, "incr2": 42, "delete": True}, got
    got = run_pylibmc(sasl_server, BOB, BOB_PW)
    assert got["set"] is True and got["get"] == "sv" and got["incr2"] == 42, got


@pytest.mark.parametrize("user,password", [(ALICE, "wrong"), (ALICE, ALICE_PW + "x"), ("carol", ALICE_PW),
                                           (BOB, "hunter2:additional tokens"), (BOB, "hunter")])
def test_pylibmc_wrong_password(sasl_server, user, password):
    got = run_pylibmc(sasl_server, user, password)
    assert got["set"] == "error: error 41 from memcached_set: AUTHENTICATION FAILURE", got
    assert all(str(v).startswith("error: ") for v in got.values()), got


def test_php_right_password(php, sasl_server):  # noqa: F811
    got, err = run_php(php, "sasl.php", sasl_server[1], ALICE, ALICE_PW)
    assert got["set"] == [True, 0] and got["get"] == ["sasl_value", 0], (got, err)
    assert got["increment"][1] == 0 and got["increment"][0] >= 5, (got, err)
    got, err = run_php(php, "sasl.php", sasl_server[1], BOB, BOB_PW)
    assert got["set"] == [True, 0] and got["get"] == ["sasl_value", 0], (got, err)


def test_php_wrong_password(php, sasl_server):  # noqa: F811
    got, err = run_php(php, "sasl.php", sasl_server[1], ALICE, "nope")
    assert got["set"] == [False, AUTH_FAILURE], (got, err)
    assert got["get"][0] is False and got["increment"][0] is False, (got, err)


# ---------------------------------------------------------------- raw binary exchange

AUTH_FAIL_BODY = b"Auth failure."


def expect(p, op, status, value=None, opaque=None):
    assert (p.opcode, p.status) == (op, status), p
    if value is not None:
        assert p.value == value, p
    if opaque is not None:
        assert p.opaque == opaque, p
    assert p.key == b"" and p.extras == b"", p


@pytest.mark.parametrize("req,op", [
    (b.get("k", opaque=11), b.GET),
    (b.get("k", opaque=11, op=b.GETQ), b.GETQ),  # a quiet command's refusal is not quiet
    (b.store(b.SET, "k", b"v", opaque=11), b.SET),
    (b.simple(b.NOOP, opaque=11), b.NOOP),
    (b.simple(b.STAT, opaque=11), b.STAT),
    (b.simple(b.FLUSH, opaque=11), b.FLUSH),
    (b.delta(b.INCREMENT, "n", 1, opaque=11), b.INCREMENT),
    (b.touch(b.GAT, "k", 0, opaque=11), b.GAT),
    (b.simple(b.QUIT, opaque=11), b.QUIT),
    (b.simple(0x50, opaque=11), 0x50),  # even an unknown opcode
], ids=["get", "getq", "set", "noop", "stat", "flush", "incr", "gat", "quit", "unknown"])
def test_before_auth_refused_and_closed(sasl_server, req, op):
    """memcached 1.6.18: AUTH_ERROR (0x20) "Auth failure.", then it closes the connection."""
    s = b.connect(sasl_server)
    try:
        r = b.roundtrip(s, req, done=b.until(1), total=5.0)
        assert len(r.packets) == 1, r
        expect(r.packets[0], op, b.AUTH_ERROR, AUTH_FAIL_BODY, opaque=11)
        closed, data = b.wait_closed(s, total=3.0)
        assert closed and data == b"", (closed, data)
    finally:
        s.close()


def test_version_and_mechs_before_auth(sasl_server):
    s = b.connect(sasl_server)
    try:
        p = b.call(s, b.simple(b.VERSION, opaque=3))
        expect(p, b.VERSION, b.SUCCESS, opaque=3)
        assert p.value
        p = b.call(s, b.simple(b.SASL_LIST_MECHS, opaque=4))
        expect(p, b.SASL_LIST_MECHS, b.SUCCESS, opaque=4)
        assert b"PLAIN" in p.value.split(b" "), p
        # still not authenticated
        expect(b.call(s, b.get("k", opaque=5)), b.GET, b.AUTH_ERROR, AUTH_FAIL_BODY, opaque=5)
    finally:
        s.close()


def test_wrong_then_right_password(sasl_server):
    s = b.connect(sasl_server)
    try:
        expect(b.call(s, b.sasl_plain(ALICE, "bad", opaque=1)), b.SASL_AUTH, b.AUTH_ERROR, AUTH_FAIL_BODY, 1)
        # a failed attempt keeps the connection: the client may try again
        expect(b.call(s, b.sasl_plain("nobody", ALICE_PW, opaque=2)), b.SASL_AUTH, b.AUTH_ERROR,
               AUTH_FAIL_BODY, 2)
        expect(b.call(s, b.sasl_plain(ALICE, ALICE_PW, opaque=3)), b.SASL_AUTH, b.SUCCESS, b"Authenticated", 3)
        expect(b.call(s, b.store(b.SET, "sk", b"v", opaque=4)), b.SET, b.SUCCESS, b"", 4)
        p = b.call(s, b.get("sk", opaque=5))
        assert (p.status, p.value, p.opaque) == (b.SUCCESS, b"v", 5), p
        # authenticate and command in one write
        s2 = b.connect(sasl_server)
        try:
            r = b.roundtrip(s2, b.sasl_plain(BOB, BOB_PW, opaque=6) + b.get("sk", opaque=7), done=b.until(2))
            assert [(p.opcode, p.status, p.value, p.opaque) for p in r.packets] == [
                (b.SASL_AUTH, b.SUCCESS, b"Authenticated", 6), (b.GET, b.SUCCESS, b"v", 7)], r
        finally:
            s2.close()
    finally:
        s.close()


def test_failed_reauth_drops_authentication(sasl_server):
    s = b.connect(sasl_server)
    try:
        expect(b.call(s, b.sasl_plain(ALICE, ALICE_PW, opaque=1)), b.SASL_AUTH, b.SUCCESS, b"Authenticated", 1)
        expect(b.call(s, b.sasl_plain(ALICE, "bad", opaque=2)), b.SASL_AUTH, b.AUTH_ERROR, AUTH_FAIL_BODY, 2)
        expect(b.call(s, b.get("k", opaque=3)), b.GET, b.AUTH_ERROR, AUTH_FAIL_BODY, 3)
        assert b.wait_closed(s)[0]
    finally:
        s.close()


@pytest.mark.parametrize("req", [
    b.request(b.SASL_STEP, b"PLAIN", b"\0alice\0x", opaque=9),  # a step with no auth started
    b.request(b.SASL_AUTH, b"PLAIN", b"no-nul-separators", opaque=9),
    b.request(b.SASL_AUTH, b"PLAIN", b"bob\0alice\0" + ALICE_PW.encode(), opaque=9),  # authzid != authcid
    b.request(b.SASL_AUTH, b"CRAM-MD5", b"x", opaque=9),  # a mechanism not offered
], ids=["step-without-start", "malformed-plain", "other-authzid", "other-mech"])
def test_bad_sasl_requests(sasl_server, req):
    s = b.connect(sasl_server)
    try:
        p = b.call(s, req)
        assert (p.status, p.value, p.opaque) == (b.AUTH_ERROR, AUTH_FAIL_BODY, 9), p
        expect(b.call(s, b.get("k", opaque=10)), b.GET, b.AUTH_ERROR, AUTH_FAIL_BODY, 10)
    finally:
        s.close()


@pytest.mark.parametrize("req", [
    b.request(b.SASL_AUTH, b"plain", b"\0alice\0" + ALICE_PW.encode(), opaque=9),  # mech name: any case
    b.request(b.SASL_AUTH, b"PLAIN", b"alice\0alice\0" + ALICE_PW.encode(), opaque=9),  # authzid == authcid
], ids=["lowercase-mech", "same-authzid"])
def test_plain_variants_accepted(sasl_server, req):
    s = b.connect(sasl_server)
    try:
        p = b.call(s, req)
        assert (p.status, p.value, p.opaque) == (b.SUCCESS, b"Authenticated", 9), p
        assert b.call(s, b.get("k", opaque=10)).status == b.KEY_ENOENT
    finally:
        s.close()


def test_auth_continue_then_step(sasl_server):
    """PLAIN without an initial response: AUTH_CONTINUE (0x21, empty body), then the
    credentials come in SASL_STEP."""
    for password, status, body in ((ALICE_PW, b.SUCCESS, b"Authenticated"), ("bad", b.AUTH_ERROR, AUTH_FAIL_BODY)):
        s = b.connect(sasl_server)
        try:
            expect(b.call(s, b.request(b.SASL_AUTH, b"PLAIN", b"", opaque=7)), b.SASL_AUTH, b.AUTH_CONTINUE,
                   b"", 7)
            step = b.request(b.SASL_STEP, b"PLAIN", b"\0alice\0" + password.encode(), opaque=8)
            expect(b.call(s, step), b.SASL_STEP, status, body, 8)
            want = b.KEY_ENOENT if status == b.SUCCESS else b.AUTH_ERROR
            assert b.call(s, b.get("nokey", opaque=9)).status == want
        finally:
            s.close()
    s = b.connect(sasl_server)
    try:  # a command between AUTH and STEP: still not authenticated
        expect(b.call(s, b.request(b.SASL_AUTH, b"PLAIN", b"", opaque=7)), b.SASL_AUTH, b.AUTH_CONTINUE, b"", 7)
        expect(b.call(s, b.get("k", opaque=8)), b.GET, b.AUTH_ERROR, AUTH_FAIL_BODY, 8)
    finally:
        s.close()


def test_ascii_refused(sasl_server):
    """With -S memcached serves binary only: a text command is never answered, and once 24
    bytes (a header's worth) arrived without the request magic it closes the connection."""
    s = b.connect(sasl_server)
    try:
        s.sendall(b"get some_key_long_enough_for_24_bytes\r\n")
        closed, data = b.wait_closed(s, total=3.0)
        assert closed and data == b"", (closed, data)
    finally:
        s.close()


@pytest.mark.parametrize("kind", KINDS)
def test_auth_stats(spawn, sasl_env, kind):
    """auth_cmds counts SASL auth and step requests (not list-mechs), auth_errors the failed ones."""
    sp = spawn(kind, ["-S"], sasl_env)
    s = b.connect(sp.addr)
    try:
        b.call(s, b.simple(b.SASL_LIST_MECHS))
        b.call(s, b.sasl_plain(ALICE, "bad"))
        b.call(s, b.request(b.SASL_STEP, b"PLAIN", b"\0alice\0x"))
        b.call(s, b.sasl_plain(ALICE, ALICE_PW))
        r = b.roundtrip(s, b.simple(b.STAT), done=b.until_stat_end)
        st = {p.key: p.value for p in r.packets}
        assert (st.get(b"auth_cmds"), st.get(b"auth_errors")) == (b"3", b"2"), r
    finally:
        s.close()
