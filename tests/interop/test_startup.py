"""Start-up differential: memkitd and memcached 1.6.18 run with the same command line, case
by case, and must agree on the exit status, the first line of standard error (for the
command lines they refuse) and the behaviour (whether the listener accepts connections).

Normalizations, both deliberate:
- getopt prefixes its messages with the program as started (argv[0]: "/usr/bin/memcached:
  invalid option -- 'j'"); that prefix is replaced by "PROG" on both sides.
- For command lines both start with, standard error is not compared: memkitd prints a
  one-line warning for each flag that has no effect on it (memcached is silent). What is
  compared then is behaviour: both accept connections (on every listener the case names).
- `-Z` without certificates: memcached's first line is an OpenSSL error stack; only the
  exit status is compared.

As root both need `-u` (added as `-u root`), except in the cases about `-u` itself. Validate
the test with MEMKITD=/usr/bin/memcached (memcached against itself must agree)."""

import os
import signal
import socket
import stat
import subprocess
import time

import pytest

import conftest
import mkinterop as mk

ROOT = os.geteuid() == 0

# (id, argv, what to compare). {port}/{port2} are free TCP ports, {dir} a private directory.
# "refused": exit status + first stderr line; "status": exit status only; "starts": both keep
# running and accept connections on {port} (or the -s socket).
CASES = [
    ("c0", ["-c", "0"], "refused"),
    ("c_abc", ["-c", "abc"], "refused"),
    ("t0", ["-t", "0"], "refused"),
    ("t_neg", ["-t", "-1"], "refused"),
    ("R0", ["-R", "0"], "refused"),
    ("f1", ["-f", "1"], "refused"),
    ("n0", ["-n", "0"], "refused"),
    ("D_empty", ["-D", ""], "refused"),
    ("N0", ["-N", "0"], "refused"),
    ("N_over_threads", ["-N", "8", "-t", "4"], "refused"),
    ("I_512", ["-I", "512"], "refused"),
    ("I_1k", ["-I", "1k"], "refused"),
    ("I_1000k", ["-I", "1000k"], "refused"),
    ("I_over_gig", ["-m", "5000", "-I", "2000m"], "refused"),
    ("I_over_half", ["-m", "100", "-I", "64m"], "refused"),
    ("m0", ["-m", "0"], "refused"),
    ("m_abc", ["-m", "abc"], "refused"),
    ("B_bad", ["-B", "foo"], "refused"),
    ("o_illegal", ["-o", "frobnicate=1"], "refused"),
    ("o_hashpower_low", ["-o", "hashpower=5"], "refused"),
    ("o_hashpower_high", ["-o", "hashpower=40"], "refused"),
    ("o_idle_missing", ["-o", "idle_timeout"], "refused"),
    ("o_automove", ["-o", "slab_automove=3"], "refused"),
    ("o_tail_repair", ["-o", "tail_repair_time=5"], "refused"),
    ("o_hash_alg", ["-o", "hash_algorithm=md5"], "refused"),
    ("o_crawler_sleep", ["-o", "lru_crawler_sleep=2000000"], "refused"),
    ("o_hot_pct", ["-o", "hot_lru_pct=90"], "refused"),
    ("o_lru_sum", ["-o", "hot_lru_pct=50,warm_lru_pct=40"], "refused"),
    ("o_temp_ttl", ["-o", "temporary_ttl=5,no_lru_maintainer"], "refused"),
    ("o_chunk_max", ["-o", "slab_chunk_max=3"], "refused"),
    ("o_logbuf", ["-o", "watcher_logbuf_size=x"], "refused"),
    ("o_verify_mode", ["-o", "ssl_verify_mode=9"], "refused"),
    ("p_70000", ["-p", "70000", "-l", "127.0.0.1"], "refused"),
    ("l_bad_host", ["-l", "999.1.1.1"], "refused"),
    ("l_bad_port", ["-l", "127.0.0.1:x"], "refused"),
    ("l_notls", ["-l", "notls:127.0.0.1"], "refused"),
    ("l_v6_unclosed", ["-l", "[::1"], "refused"),
    ("s_bad_dir", ["-s", "{dir}/missing/x.sock"], "refused"),
    ("unknown_flag", ["-j"], "refused"),
    ("unknown_long", ["--frobnicate"], "refused"),
    ("sasl_ascii", ["-S", "-B", "ascii"], "refused"),
    ("sasl_udp", ["-S", "-U", "5"], "refused"),
    ("auth_binary", ["-Y", "{dir}/none", "-B", "binary"], "refused"),
    ("Z_no_cert", ["-Z"], "status"),
    ("port_in_use", ["-p", "{busy}", "-l", "127.0.0.1"], "refused"),
    ("t65", ["-t", "65"], "starts"),
    ("many_flags", ["-A", "-C", "-F", "-M", "-X", "-W", "-L", "-k", "-r", "-b", "10", "-R", "5",
                    "-f", "1.5", "-n", "40", "-D", "/", "-N", "2", "-c", "100", "-vv"], "starts"),
    ("long_flags", ["--enable-shutdown", "--disable-flush-all", "--disable-cas", "--threads=2",
                    "--max-item-size=2m", "--memory-limit=64", "--listen-backlog=64"], "starts"),
    ("o_knobs", ["-o", "modern,no_lru_crawler,lru_crawler_sleep=50,hot_lru_pct=10,slab_chunk_max=16384,"
                 "hash_algorithm=xxh3,tail_repair_time=60,track_sizes,no_hashexpand,"
                 "resp_obj_mem_limit=5,read_buf_mem_limit=0,sock_cookie_id=1"], "starts"),
    ("e_file", ["-e", "{dir}/mem"], "starts"),
    ("I_2m", ["-I", "2m"], "starts"),
    ("U_only", ["-U", "{port}"], "starts"),
    ("l_list", ["-l", "127.0.0.1,[::1]:{port2}"], "starts"),
    ("l_repeat", ["-l", "127.0.0.1", "-l", "::1"], "starts"),
    ("unix", ["-s", "{dir}/s.sock", "-a", "770"], "starts"),
    ("pidfile", ["-P", "{dir}/m.pid"], "starts"),
]
if ROOT:
    CASES += [
        ("root_without_u", [], "refused-as-root"),
        ("u_unknown", ["-u", "no-such-user-here"], "refused-as-root"),
        ("u_nobody", ["-u", "nobody"], "starts-as-root"),
    ]


def _busy_port():
    s = socket.socket()
    s.bind((mk.HOST, 0))
    s.listen(1)
    return s


def _argv(template, d, port, port2, busy):
    vals = {"port": port, "port2": port2, "dir": d, "busy": busy}
    argv = [a.format(**vals) for a in template]
    if "-p" not in argv and "-U" not in argv and "--port" not in argv:
        argv = ["-p", str(port)] + argv
    if not any(a in argv for a in ("-l", "-s")):
        argv += ["-l", mk.HOST]
    return argv


def _first_line(text, binary):
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    for prog in (f"{binary}: ", "memcached: ", "memkitd: "):
        if line.startswith(prog):
            return "PROG: " + line[len(prog):]
    return line


def _run(kind, template, tmp_path, root_flags, refusal):
    d = tmp_path / kind
    d.mkdir()
    port, port2 = mk.free_port(), mk.free_port()
    busy = _busy_port()
    try:
        argv = _argv(template, str(d), port, port2, busy.getsockname()[1])
        if "-s" in argv:
            path = argv[argv.index("-s") + 1]
            ready = lambda: mk.connect_unix(path, timeout=0.5).close()  # noqa: E731
        else:
            ready = lambda: socket.create_connection((mk.HOST, port), timeout=0.5).close()  # noqa: E731
        exe = conftest.binary(kind)
        st = mk.Startup(exe, argv, None if refusal else ready, as_root_flags=root_flags)
        facts = {"code": st.code, "accepts": st.accepts, "first": _first_line(st.stderr, exe)}
        if st.accepts:
            facts.update(_behaviour(st, argv, port2, d))
        st.stop()
        facts["stderr"] = st.stderr
        return facts
    finally:
        busy.close()


def _behaviour(st, argv, port2, d):
    """What a started server shows beyond accepting: the other listeners, the socket's mode,
    the pid file, the user it runs as, and that -s leaves TCP off."""
    out = {}
    if "{port2}".format(port2=port2) in " ".join(argv) and socket.has_ipv6:
        try:
            socket.create_connection(("::1", port2), timeout=1).close()
            out["v6"] = True
        except OSError as e:
            out["v6"] = f"no: {e}"
    if "::1" in argv:
        try:
            socket.create_connection(("::1", int(argv[argv.index("-p") + 1])), timeout=1).close()
            out["v6"] = True
        except OSError as e:
            out["v6"] = f"no: {e}"
    if "-s" in argv:
        out["mode"] = oct(stat.S_IMODE(os.stat(argv[argv.index("-s") + 1]).st_mode))
    if "-P" in argv:
        pid = open(argv[argv.index("-P") + 1]).read().strip()
        out["pidfile_is_pid"] = pid == str(st.proc.pid)
    if "-u" in argv:
        status = open(f"/proc/{st.proc.pid}/status").read()
        out["uid"] = next(ln for ln in status.splitlines() if ln.startswith("Uid:")).split()[1:]
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_startup_matches_memcached(case, tmp_path):
    name, template, what = case
    root_flags = not what.endswith("-as-root")
    refusal = what.startswith("refused") or what == "status"
    a = _run("memkitd", template, tmp_path, root_flags, refusal)
    b = _run("memcached", template, tmp_path, root_flags, refusal)
    detail = f"\nmemkitd:   {a}\nmemcached: {b}"
    if what.startswith("refused"):
        assert b["code"] not in (None, 0), f"memcached itself did not refuse {template}{detail}"
        assert (a["code"], a["first"]) == (b["code"], b["first"]), detail
    elif what == "status":
        assert b["code"] not in (None, 0), detail
        assert a["code"] == b["code"], detail
    else:
        assert b["accepts"], f"memcached itself did not start with {template}{detail}"
        assert a["accepts"] and a["code"] is None, detail
        keys = set(a) - {"code", "first", "stderr"}
        assert {k: a[k] for k in keys} == {k: b.get(k) for k in keys}, detail


@pytest.mark.parametrize("kind", ["memkitd", "memcached"])
def test_daemon_mode(kind, tmp_path):
    """`-d -P FILE`: the command returns 0 at once, the daemon answers, the pid file names it,
    SIGTERM stops it and it removes its pid file, for memkitd as for memcached."""
    port = mk.free_port()
    pidfile = tmp_path / "d.pid"
    argv = [str(conftest.binary(kind)), "-d", "-P", str(pidfile), "-p", str(port), "-l", mk.HOST,
            "-U", "0"] + mk.root_flags()
    r = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 5
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = int(pidfile.read_text())  # the daemon we started: stopped below by this pid
    try:
        reply = mk.request((mk.HOST, port), b"version\r\n", done=mk.until_lines(1))
        assert reply.lines()[0].startswith(b"VERSION"), reply.raw
        status = open(f"/proc/{pid}/status").read()
        ppid = next(ln for ln in status.splitlines() if ln.startswith("PPid:")).split()[1]
        assert ppid != str(os.getpid()), "detached from the command that started it"
    finally:
        os.kill(pid, signal.SIGTERM)
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline + 5:
        time.sleep(0.02)
    assert not pidfile.exists(), "a daemon removes its pid file at exit"
