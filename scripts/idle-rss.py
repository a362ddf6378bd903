#!/usr/bin/env python3
"""What an idle connection costs a server: VmRSS per connection over N idle ones.

Starts the server (memkitd or memcached, the binary given) with `-t 1 -c N+100` on a free
loopback port, opens 50 warm connections (each a `set` and a `get`), reads VmRSS, opens N
more that each send one `get` and read its reply, then sit; reads VmRSS again. Prints the
difference divided by N. The server is stopped by its PID.

    python3 scripts/idle-rss.py target/release/memkitd [N]
    python3 scripts/idle-rss.py /usr/bin/memcached [N]
"""

import os
import resource
import socket
import subprocess
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ask(s, req, end):
    s.sendall(req)
    got = b""
    while not got.endswith(end):
        chunk = s.recv(4096)
        if not chunk:
            raise RuntimeError(f"closed after {got!r}")
        got += chunk
    return got


def main():
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port = free_port()
    args = [binary, "-p", str(port), "-l", "127.0.0.1", "-U", "0", "-t", "1", "-c", str(n + 100)]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        warm = []
        for i in range(50):
            s = socket.create_connection(("127.0.0.1", port))
            ask(s, b"set warm:%d 0 0 5\r\nhello\r\n" % i, b"\r\n")
            ask(s, b"get warm:%d\r\n" % i, b"END\r\n")
            warm.append(s)
        time.sleep(1)
        before = rss_kib(server.pid)
        idle = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            ask(s, b"get warm:%d\r\n" % (i % 50), b"END\r\n")
            idle.append(s)
        time.sleep(2)
        after = rss_kib(server.pid)
        per = (after - before) * 1024 / n
        print(f"{os.path.basename(binary)}: {per:.0f} B per idle connection "
              f"(VmRSS {before / 1024:.1f} -> {after / 1024:.1f} MiB, {n} connections)")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
