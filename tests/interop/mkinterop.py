"""Shared helpers for the interop tests: spawning servers, raw sockets, reply parsing.

Everything talks to 127.0.0.1 only. Every blocking call has a timeout.
"""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import mkraft
import mkroute

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_FLAGS = ["-U", "0", "-m", "64"]


def memkitd_path():
    """Path of the memkitd binary under test: env MEMKITD, else target/debug/memkitd."""
    env = os.environ.get("MEMKITD")
    if env:
        p = Path(env)
        if not p.is_absolute():
            p = (Path.cwd() / p).resolve()
        return p
    return REPO_ROOT / "target" / "debug" / "memkitd"


def memcached_path():
    return Path(os.environ.get("MEMCACHED") or shutil.which("memcached") or "/usr/bin/memcached")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def flash_flags(port):
    """With MEMKITD_FLASH_DIR set (run.sh's second pass), memkitd runs with a flash file there
    and `ext_item_size=0,ext_item_age=0`: every non-empty value goes to flash as it is stored,
    so every read of one parks its connection and comes from the flash store."""
    d = os.environ.get("MEMKITD_FLASH_DIR")
    if not d:
        return []
    path = Path(d) / f"memkitd-{port}.flash"
    return [
        "-o",
        f"ext_page_size=2,ext_wbuf_size=2,ext_item_size=0,ext_item_age=0,ext_path={path}:64m",
    ]


def root_flags():
    """memcached and memkitd refuse to run as root without -u; elsewhere -u is ignored."""
    return ["-u", "root"] if os.geteuid() == 0 else []


def connect_unix(path, timeout=5.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except OSError:
        s.close()
        raise
    return s


class ServerProcess:
    """One server process we started ourselves; stopped by its PID only. With `unix`, it
    listens on that UNIX socket path (`-s`) instead of TCP, and `addr` is the path."""

    def __init__(self, kind, binary, extra_flags=(), env=None, unix=None, plain=False):
        """`plain`: a memkitd started as it is, whatever the pass (no flash file, no group, not
        a router in front of backends); for tests that set up such things themselves."""
        self.kind = kind
        self.plain = plain
        self.binary = Path(binary)
        self.extra_flags = list(extra_flags)
        self.env = dict(env or {})  # added to this process's environment (e.g. SASL files)
        self.unix = str(unix) if unix else None
        self.proc = None
        self.port = None
        self.log = None
        self.restarts = 0
        self.group = None  # mkraft.Group: the other two nodes, in run.sh's replicated pass
        self.backends = None  # mkroute.Backends: what it routes to, in run.sh's routed passes

    @property
    def addr(self):
        return self.unix if self.unix else (HOST, self.port)

    def argv(self, port):
        listen = ["-s", self.unix] if self.unix else ["-p", str(port), "-l", HOST]
        flash = flash_flags(port) if self.kind == "memkitd" and not self.plain else []
        raft = self.group.flags(mkraft.SUITE_NODE) if self.group else []
        route = self.backends.flags() if self.backends else []
        return ([str(self.binary)] + listen + BASE_FLAGS + flash + raft + route + self.extra_flags
                + root_flags())

    def _ready(self, port):
        if self.unix:
            with connect_unix(self.unix, timeout=0.5):
                return True
        with socket.create_connection((HOST, port), timeout=0.5):
            return True

    def start(self, timeout=10.0):
        if not self.binary.exists():
            raise RuntimeError(f"{self.kind} binary not found: {self.binary}")
        last_err = None
        for _attempt in range(5):
            port = free_port()
            if self.kind == "memkitd" and mkraft.enabled() and not self.plain:
                self.group = mkraft.Group(self.binary)
                try:
                    self.group.start_others()
                except RuntimeError:
                    self.stop()
                    raise
            if self.kind == "memkitd" and mkroute.enabled() and not self.plain:
                self.backends = mkroute.Backends(mkroute.backend_kind(),
                                                 flags=mkroute.storage_flags(self.extra_flags))
                try:
                    self.backends.start()
                except RuntimeError:
                    self.stop()
                    raise
            self.log = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(
                self.argv(port), stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                env={**os.environ, **self.env} if self.env else None,
            )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    last_err = f"{self.kind} exited with {self.proc.returncode}: {self.output()}"
                    self.stop()  # its group's other nodes, its backends
                    break
                try:
                    self._ready(port)
                except OSError:
                    time.sleep(0.02)
                    continue
                self.port = port
                if self.backends:
                    mkroute.ROUTERS[self.addr] = self.backends
                # Under -S, ASCII `stats` is refused (see mkraft's docstring).
                if self.group and "-S" not in self.extra_flags:
                    try:
                        self.group.check_joined(self.addr)
                    except (RuntimeError, OSError) as e:
                        out = self.output()
                        self.stop()
                        raise RuntimeError(f"{e}\n{out}")
                return self
            else:
                last_err = f"{self.kind} did not accept connections on {port} within {timeout}s"
                self.stop()
        raise RuntimeError(last_err)

    def alive(self):
        return (self.proc is not None and self.proc.poll() is None
                and (not self.group or self.group.alive())
                and (not self.backends or self.backends.alive()))

    def ensure_running(self):
        if not self.alive():
            if self.proc is not None:
                self.restarts += 1
                self.stop()  # what is left of it: in a group, the nodes still up; its backends
            self.start()
        return self

    def output(self, limit=4000):
        group = f"\n{self.group.output()}" if self.group else ""
        if self.backends:
            group += f"\n{self.backends.output()}"
        if self.log is None:
            return group
        try:
            self.log.flush()
            self.log.seek(0)
            data = self.log.read()
        except (OSError, ValueError):
            return group
        return data[-limit:].decode("utf-8", "replace") + group

    def stop(self):
        if self.group:
            self.group.stop()
            self.group = None
        if self.backends:
            mkroute.ROUTERS.pop(self.addr, None)
            self.backends.stop()
            self.backends = None
        p = self.proc
        if p is None:
            return
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


class Startup:
    """A server started with exactly `argv` (plus -u root as root, unless `as_root_flags` is
    false), watched until it exits or `ready()` succeeds, for the start-up differential test.
    `code` is its exit status, None while it runs; `stderr` what it printed by then."""

    def __init__(self, binary, argv, ready, timeout=5.0, as_root_flags=True, env=None):
        """`ready` None: only wait for the exit (a refusal), so that another process taking
        the same free port meanwhile cannot pass for this one accepting."""
        self.err = tempfile.TemporaryFile()
        flags = root_flags() if as_root_flags else []
        self.proc = subprocess.Popen([str(binary)] + list(argv) + flags, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.err, env=env)
        self.code = None
        self.accepts = False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.code = self.proc.returncode
                break
            if ready is None:
                time.sleep(0.02)
                continue
            try:
                ready()
                self.accepts = True
                break
            except OSError:
                time.sleep(0.02)

    @property
    def stderr(self):
        self.err.flush()
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


# ---------------------------------------------------------------- raw sockets

def connect(addr, timeout=5.0):
    s = socket.create_connection(addr, timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(timeout)
    return s


def parse_units(buf):
    """Split reply bytes into units: (line, data) where data is the value block of
    VALUE/VA lines (else None). Returns (units, rest) with `rest` the unparsed tail."""
    units = []
    i = 0
    n = len(buf)
    while i < n:
        j = buf.find(b"\r\n", i)
        if j < 0:
            break
        line = buf[i:j]
        size = None
        parts = line.split(b" ")
        try:
            if parts[0] == b"VALUE" and len(parts) >= 4:
                size = int(parts[3])
            elif parts[0] == b"VA" and len(parts) >= 2:
                size = int(parts[1])
        except ValueError:
            size = None
        if size is not None and size >= 0:
            end = j + 2 + size + 2
            if end > n:
                break
            units.append((line, buf[j + 2 : j + 2 + size] if buf[j + 2 + size : end] == b"\r\n" else buf[j + 2 : end]))
            i = end
        else:
            units.append((line, None))
            i = j + 2
    return units, buf[i:]


class Reply:
    def __init__(self, raw, units, rest, closed, timed_out):
        self.raw = raw
        self.units = units
        self.rest = rest
        self.closed = closed
        self.timed_out = timed_out

    def lines(self):
        return [u[0] for u in self.units]


def read_reply(sock, done=None, idle=0.2, total=5.0):
    """Read until done(units, rest) is true, the peer closes, `idle` seconds pass with
    no byte, or `total` seconds pass. The same procedure is used for every server."""
    buf = b""
    closed = False
    timed_out = False
    start = time.monotonic()
    while True:
        if done is not None:
            units, rest = parse_units(buf)
            if not rest and done(units):
                break
        left = total - (time.monotonic() - start)
        if left <= 0:
            timed_out = True
            break
        sock.settimeout(min(idle, left))
        try:
            chunk = sock.recv(1 << 20)
        except socket.timeout:
            timed_out = done is not None
            break
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        buf += chunk
    units, rest = parse_units(buf)
    return Reply(buf, units, rest, closed, timed_out)


def ends_with_mn(units):
    return bool(units) and units[-1] == (b"MN", None)


def request(addr_or_sock, data, done=None, idle=0.2, total=5.0):
    """Send `data` on a fresh connection (or the given socket) and read the reply."""
    own = not isinstance(addr_or_sock, socket.socket)
    s = connect(addr_or_sock) if own else addr_or_sock
    try:
        s.sendall(data)
        return read_reply(s, done=done, idle=idle, total=total)
    finally:
        if own:
            s.close()


def until_lines(n):
    return lambda units: len(units) >= n


def until_end(units):
    return bool(units) and units[-1][0] in (b"END",) or (
        bool(units) and units[-1][0].split(b" ")[0] in (b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR")
    )


def cmd(addr_or_sock, data, nlines=1, total=5.0):
    """Send a command expecting `nlines` reply units; return the reply lines joined."""
    r = request(addr_or_sock, data, done=until_lines(nlines), idle=total, total=total)
    return r


def flush(addr):
    r = request(addr, b"flush_all\r\n", done=until_lines(1), idle=5.0, total=5.0)
    assert r.lines() == [b"OK"], r.raw


# ---------------------------------------------------------------- normalisation

_META_CODES = {b"HD", b"VA", b"EN", b"NF", b"NS", b"EX", b"MN"}


class CasCanon:
    """Maps raw CAS values to c1, c2, ... in order of first appearance, so equal
    structure of CAS values is compared while the numbers themselves are not. In run.sh's
    routed passes the structure is compared per key (mkroute.cas_scope)."""

    def __init__(self):
        self.map = {}
        self.last = None
        self.by_key = {}

    def canon(self, raw, key=None):
        self.last = raw
        if key is not None:
            self.by_key[key] = raw
        scoped = mkroute.cas_scope(raw, key)
        if scoped is None:
            return b"c"
        if scoped not in self.map:
            self.map[scoped] = b"c%d" % (len(self.map) + 1)
        return self.map[scoped]


_PADDED = re.compile(rb"^\d+ *$")


def unpad_numbers(units):
    """memcached rewrites an incr/decr result in place, space-padded to the old length, only
    when nobody else holds a reference to the item (refcount == 2); otherwise it allocates a
    new item of the exact length. That choice depends on its background threads, so two
    memcached processes disagree now and then: "0 " vs "0". Used by the random test only."""
    out = []
    for line, data in units:
        if data is not None and _PADDED.match(data):
            parts = line.split(b" ")
            i = 3 if parts[0] == b"VALUE" else 1
            parts[i] = b"<len>"
            line, data = b" ".join(parts), data.rstrip(b" ")
        out.append((line, data))
    return out


def normalize(units, canon, stats_names_only=True):
    """Turn reply units into comparable byte strings, masking the fields that
    legitimately differ between two servers (version, CAS, stats numbers, timings,
    `me` debug lines)."""
    out = []
    stat_block = []

    def flush_stats():
        if stat_block:
            out.append(b"STAT-NAMES " + b" ".join(sorted(set(stat_block))))
            stat_block.clear()

    for line, data in units:
        parts = line.split(b" ")
        head = parts[0]
        if head == b"STAT" and len(parts) >= 2 and stats_names_only:
            stat_block.append(re.sub(rb"^\d+:", b"*:", re.sub(rb":\d+:", b":*:", parts[1])))
            continue
        flush_stats()
        if head == b"VERSION":
            out.append(b"VERSION <v>")
        elif head == b"VALUE" and len(parts) == 5:
            c = canon.canon(parts[4], key=parts[1])
            out.append(b" ".join(parts[:4] + [c]))
        elif head in _META_CODES and line == line.strip():
            start = 2 if head == b"VA" else 1
            key = None
            for t in parts[start:]:
                if t.startswith(b"k"):
                    key = t[1:]
            new = list(parts[:start])
            for t in parts[start:]:
                if t[:1] == b"c" and t[1:].isdigit():
                    t = canon.canon(t[1:], key=key)
                elif t[:1] == b"t" and t != b"t-1" and re.fullmatch(rb"t-?\d+", t):
                    t = b"t<n>"
                elif t[:1] == b"l" and re.fullmatch(rb"l\d+", t):
                    t = b"l<n>"
                new.append(t)
            out.append(b" ".join(new))
        elif head == b"ME" and len(parts) >= 2:
            names = [p.split(b"=")[0] for p in parts[2:]]
            out.append(b"ME " + parts[1] + b" " + b" ".join(names))
        else:
            out.append(line)
        if data is not None:
            out.append(b"  data " + repr(data).encode())
    flush_stats()
    return out
