"""A tiny encoder/decoder for memcached's binary protocol (24-byte header frames), for the
raw binary differential and SASL tests. Everything talks to 127.0.0.1 with timeouts."""

import socket
import struct
import time
from collections import namedtuple

REQ_MAGIC = 0x80
RES_MAGIC = 0x81
HEADER = struct.Struct(">BBHBBHIIQ")  # magic opcode keylen extlen datatype vbucket/status bodylen opaque cas

# opcodes
GET, SET, ADD, REPLACE, DELETE, INCREMENT, DECREMENT, QUIT = range(0x00, 0x08)
FLUSH, GETQ, NOOP, VERSION, GETK, GETKQ, APPEND, PREPEND = range(0x08, 0x10)
STAT, SETQ, ADDQ, REPLACEQ, DELETEQ, INCREMENTQ, DECREMENTQ, QUITQ = range(0x10, 0x18)
FLUSHQ, APPENDQ, PREPENDQ, VERBOSITY, TOUCH, GAT, GATQ = range(0x18, 0x1F)
SASL_LIST_MECHS, SASL_AUTH, SASL_STEP = 0x20, 0x21, 0x22
GATK, GATKQ = 0x23, 0x24

# status codes
SUCCESS = 0x00
KEY_ENOENT = 0x01
KEY_EEXISTS = 0x02
E2BIG = 0x03
EINVAL = 0x04
NOT_STORED = 0x05
DELTA_BADVAL = 0x06
AUTH_ERROR = 0x20
AUTH_CONTINUE = 0x21
UNKNOWN_COMMAND = 0x81
ENOMEM = 0x82

NO_CREATE = 0xFFFFFFFF  # incr/decr expiry: fail with KEY_ENOENT instead of creating


def request(opcode, key=b"", value=b"", extras=b"", opaque=0, cas=0, vbucket=0,
            magic=REQ_MAGIC, datatype=0, keylen=None, extlen=None, bodylen=None):
    """One request frame. keylen/extlen/bodylen override the header fields (malformed frames)."""
    if isinstance(key, str):
        key = key.encode()
    kl = len(key) if keylen is None else keylen
    el = len(extras) if extlen is None else extlen
    bl = len(extras) + len(key) + len(value) if bodylen is None else bodylen
    return HEADER.pack(magic, opcode, kl, el, datatype, vbucket, bl, opaque, cas) + extras + key + value


def storage_extras(flags=0, exptime=0):
    return struct.pack(">II", flags, exptime)


def delta_extras(delta, initial=0, exptime=0):
    return struct.pack(">QQI", delta, initial, exptime)


def exptime_extras(exptime):
    return struct.pack(">I", exptime)


# convenience builders
def get(key, opaque=0, op=GET):
    return request(op, key, opaque=opaque)


def store(op, key, value, flags=0, exptime=0, cas=0, opaque=0):
    return request(op, key, value, storage_extras(flags, exptime), opaque=opaque, cas=cas)


def delta(op, key, by, initial=0, exptime=0, opaque=0, cas=0):
    return request(op, key, extras=delta_extras(by, initial, exptime), opaque=opaque, cas=cas)


def concat(op, key, value, opaque=0, cas=0):
    return request(op, key, value, opaque=opaque, cas=cas)


def touch(op, key, exptime, opaque=0):
    return request(op, key, extras=exptime_extras(exptime), opaque=opaque)


def simple(op, opaque=0, key=b"", extras=b""):
    return request(op, key, extras=extras, opaque=opaque)


def sasl_plain(user, password, opaque=0):
    return request(SASL_AUTH, b"PLAIN", b"\0" + user.encode() + b"\0" + password.encode(), opaque=opaque)


class Packet(namedtuple("Packet", "magic opcode status opaque cas extras key value datatype")):
    """One response frame."""

    @property
    def flags(self):
        return struct.unpack(">I", self.extras)[0] if len(self.extras) == 4 else None

    @property
    def counter(self):
        return struct.unpack(">Q", self.value)[0] if len(self.value) == 8 else None

    def __repr__(self):
        v = self.value if len(self.value) <= 60 else self.value[:60] + b"...(%d)" % len(self.value)
        return (f"Packet(op=0x{self.opcode:02x} status=0x{self.status:02x} opaque={self.opaque} "
                f"cas={self.cas} extras={self.extras!r} key={self.key!r} value={v!r})")


def parse(buf):
    """Split bytes into complete response packets. Returns (packets, rest, bad) where `bad`
    is true if a header does not start with the response magic (rest then holds it)."""
    pkts = []
    i = 0
    while len(buf) - i >= HEADER.size:
        magic, op, kl, el, dt, status, bl, opaque, cas = HEADER.unpack_from(buf, i)
        if magic != RES_MAGIC:
            return pkts, buf[i:], True
        if len(buf) - i - HEADER.size < bl:
            break
        body = buf[i + HEADER.size : i + HEADER.size + bl]
        pkts.append(Packet(magic, op, status, opaque, cas, body[:el], body[el : el + kl], body[el + kl :], dt))
        i += HEADER.size + bl
    return pkts, buf[i:], False


class Result:
    def __init__(self, packets, rest, closed, timed_out, bad):
        self.packets = packets
        self.rest = rest
        self.closed = closed
        self.timed_out = timed_out
        self.bad = bad

    def __repr__(self):
        return (f"Result(closed={self.closed} timed_out={self.timed_out} bad={self.bad} "
                f"rest={self.rest[:40]!r} packets={self.packets!r})")


def read(sock, done=None, idle=0.3, total=5.0):
    """Read response packets until done(packets) is true, the peer closes, `idle` seconds
    pass without a byte (only when done is None, else that is a timeout), or `total` passes."""
    buf = b""
    closed = timed_out = False
    start = time.monotonic()
    while True:
        pkts, rest, bad = parse(buf)
        if bad or (done is not None and not rest and done(pkts)):
            break
        left = total - (time.monotonic() - start)
        if left <= 0:
            timed_out = True
            break
        sock.settimeout(min(idle, left) if done is None else left)
        try:
            chunk = sock.recv(1 << 20)
        except socket.timeout:
            timed_out = done is not None
            break
        except (ConnectionResetError, BrokenPipeError):
            closed = True
            break
        if not chunk:
            closed = True
            break
        buf += chunk
    pkts, rest, bad = parse(buf)
    return Result(pkts, rest, closed, timed_out, bad)


def until(n):
    return lambda pkts: len(pkts) >= n


def until_op(op):
    """Done when a packet with this opcode arrived (a NOOP barrier, or a stat terminator)."""
    return lambda pkts: any(p.opcode == op for p in pkts)


def until_stat_end(pkts):
    return any(p.opcode == STAT and not p.key for p in pkts)


def connect(addr, timeout=5.0):
    s = socket.create_connection(addr, timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(timeout)
    return s


def roundtrip(sock, data, done=None, idle=0.3, total=5.0):
    sock.sendall(data)
    return read(sock, done=done, idle=idle, total=total)


def call(sock, data, total=5.0):
    """Send one request that gets exactly one reply; return it (AssertionError if none)."""
    r = roundtrip(sock, data, done=until(1), total=total)
    assert len(r.packets) == 1, r
    return r.packets[0]


def wait_closed(sock, total=3.0):
    """True if the peer closes the connection (EOF or reset) within `total` seconds; bytes
    that arrive first are returned too."""
    data = b""
    deadline = time.monotonic() + total
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return False, data
        except (ConnectionResetError, BrokenPipeError):
            return True, data
        if not chunk:
            return True, data
        data += chunk
    return False, data
