"""memkitd --persist on a small tmpfs, written until it is full (run by full_disk.sh).

usage: full_disk.py MEMKITD MOUNTPOINT

Checks, in order: every write is answered STORED or `SERVER_ERROR out of disk space storing
object`, and the refusals come; the connection and server stay up and reads return every
acknowledged value; an overwrite refused for space leaves the old value; deletes still work;
after the tmpfs is enlarged (mount -o remount) writes are accepted again; after SIGKILL and a
restart every acknowledged write is there with its value.
"""
import base64, os, socket, subprocess, sys, time

MEMKITD, MNT = sys.argv[1], sys.argv[2]
STORE = os.path.join(MNT, "store")
FULL = b"SERVER_ERROR out of disk space storing object"
VALUE_LEN = 8192


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Conn:
    def __init__(self, port):
        deadline = time.time() + 20
        while True:
            try:
                self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            assert chunk, "server closed the connection"
            self.buf += chunk
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l

    def exact(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            assert chunk, "server closed the connection"
            self.buf += chunk
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def cmd(self, data):
        self.s.sendall(data)
        return self.line()

    def set(self, key, value):
        return self.cmd(b"set %s 0 0 %d\r\n%s\r\n" % (key, len(value), value))

    def get_many(self, keys):
        self.s.sendall(b"get " + b" ".join(keys) + b"\r\n")
        out = {}
        while True:
            l = self.line()
            if l == b"END":
                return out
            _, k, _, n = l.split()
            out[k] = self.exact(int(n) + 2)[:-2]

    def stats(self):
        self.s.sendall(b"stats\r\n")
        out = {}
        while True:
            l = self.line()
            if l == b"END":
                return out
            _, k, v = l.decode().split(" ", 2)
            out[k] = v


def start(port):
    # -m 16 and the default reserve (64 MiB at this size) on a 96 MiB tmpfs.
    return subprocess.Popen(
        [MEMKITD, "-p", str(port), "-l", "127.0.0.1", "-m", "16", "-u", "root", "--persist", STORE])


def value(i):
    # Random bytes in base64: lz4 cannot shrink them much, so the disk really fills.
    return (b"%08d" % i) + base64.b64encode(os.urandom(VALUE_LEN))[: VALUE_LEN - 8]


def check_all(c, acked, label):
    keys = sorted(acked)
    for i in range(0, len(keys), 100):
        got = c.get_many(keys[i:i + 100])
        for k in keys[i:i + 100]:
            assert got.get(k) == acked[k], "%s: %r lost or wrong" % (label, k)


port = free_port()
proc = start(port)
try:
    c = Conn(port)
    acked, refused, i = {}, 0, 0
    limit = 96 * 2 * 1024 * 1024 // VALUE_LEN  # twice what the tmpfs could hold
    while refused < 50:
        assert i < limit, "wrote %d values to a 96 MiB disk and none was refused" % i
        k, v = b"fill:%06d" % i, value(i)
        r = c.set(k, v)
        if r == b"STORED":
            acked[k] = v
        else:
            assert r == FULL, "unexpected reply %r" % r
            refused += 1
        i += 1
    print("  %d writes acknowledged, then refused: %s" % (len(acked), FULL.decode()))
    st = c.stats()
    assert st["persist_failed"] == "0", st
    assert int(st["persist_refused_full"]) >= 50, st
    assert st["persist_disk_low"] == "1", st
    # Reads still work; an overwrite refused for space keeps the old value.
    first = min(acked)
    assert c.set(first, b"new value") == FULL
    check_all(c, acked, "while full")
    # Deletes go through (a tombstone is a few bytes of the reserve).
    gone = sorted(acked)[1]
    r = c.cmd(b"delete %s\r\n" % gone)
    assert r == b"DELETED", r
    del acked[gone]
    # Free space: enlarge the tmpfs. Writes resume without a restart.
    subprocess.run(["mount", "-o", "remount,size=128m", MNT], check=True)
    deadline = time.time() + 10
    while True:
        r = c.set(b"after:0", b"x")
        if r == b"STORED":
            break
        assert r == FULL and time.time() < deadline, r
        time.sleep(0.05)
    acked[b"after:0"] = b"x"
    for j in range(1, 200):
        k, v = b"after:%d" % j, value(j)
        assert c.set(k, v) == b"STORED", "write %d after freeing space" % j
        acked[k] = v
    assert c.stats()["persist_disk_low"] == "0"
    print("  writes accepted again after the tmpfs grew")
finally:
    proc.kill()
    proc.wait()

# Every acknowledged write survives SIGKILL and a restart; the refused overwrite never
# happened and the deleted key stays deleted.
port = free_port()
proc = start(port)
try:
    c = Conn(port)
    check_all(c, acked, "after restart")
    assert c.get_many([gone]) == {}, "a deleted key came back"
    assert c.set(b"restarted", b"1") == b"STORED"
    print("  all %d acknowledged writes present after SIGKILL + restart" % len(acked))
finally:
    proc.kill()
    proc.wait()
