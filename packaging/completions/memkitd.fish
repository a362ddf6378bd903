complete -c memkitd -s p -l port -d 'TCP port to listen on (0: none)' -r
complete -c memkitd -s U -l udp-port -d 'UDP port; only 0 (off) is supported' -r
complete -c memkitd -s l -l listen -d 'Interface(s) to listen on: repeatable, comma separated, `[::1]:PORT`, `*` (default 127.0.0.1, loopback only)' -r
complete -c memkitd -s m -l memory-limit -d 'Item memory in megabytes (also accepts k/m/g suffixes)' -r
complete -c memkitd -s c -l conn-limit -d 'Max simultaneous connections' -r
complete -c memkitd -s t -l threads -d 'Number of worker threads' -r
complete -c memkitd -l io -d 'How worker threads wait for their connections (memkitd\'s own): io_uring where the kernel has it, else epoll; or epoll' -r -f -a "uring\t'io_uring where the kernel has it (Linux 6.1 and later, not disabled), else epoll'
epoll\t'epoll (mio), edge-triggered'"
complete -c memkitd -s R -l max-reqs-per-event -d 'Maximum number of requests per event: a connection with more input waiting then gives way to the others (counted in conn_yields)' -r
complete -c memkitd -s B -l protocol -d 'Protocol: auto (default: a client\'s first byte decides), ascii or binary. -S implies binary and -Y ascii, as in memcached' -r
complete -c memkitd -s I -l max-item-size -d 'Maximum item size, with k/m suffix (default 1m, minimum 1k, at most half of -m)' -r
complete -c memkitd -s o -l extended -d 'Comma-separated extended options, e.g. -o idle_timeout=60' -r
complete -c memkitd -s b -l listen-backlog -d 'TCP backlog queue length' -r
complete -c memkitd -s P -l pidfile -d 'Write the process id to this file' -r
complete -c memkitd -s f -l slab-growth-factor -d 'Chunk size growth factor (accepted: memkitd has no slab classes)' -r
complete -c memkitd -s n -l slab-min-size -d 'Minimum space allocated for key+value+flags (accepted, unused)' -r
complete -c memkitd -l sasl-pwdb -d 'With -S: the password file (default: the MEMCACHED_SASL_PWDB environment variable)' -r
complete -c memkitd -s u -l user -d 'Assume the identity of this user (and its group) once listening; required when run as root, ignored otherwise' -r
complete -c memkitd -s D -d 'Stats prefix delimiter (turns per-prefix stats on)' -r
complete -c memkitd -s s -l unix-socket -d 'UNIX socket to listen on (disables the TCP listeners)' -r
complete -c memkitd -s a -l unix-mask -d 'Access mask for the UNIX socket, in octal (default 700)' -r
complete -c memkitd -s e -l memory-file -d 'Restartable cache: a graceful stop (SIGUSR1) saves the cache to this file, the next start with the same -m and -I restores it' -r
complete -c memkitd -s N -l napi-ids -d 'Number of NAPI ids (accepted, no effect)' -r
complete -c memkitd -l persist -d 'Persistent mode: keep the data in this directory (MemcacheDB-style, crash-safe)' -r -F
complete -c memkitd -l durability -d 'With --persist: when a write is on disk (with --raft-*: an entry in the log). sync (default: acknowledged once fsynced, group commit), periodic[:MS] (fsync every MS ms, default 1000), none (never fsync)' -r
complete -c memkitd -l persist-reserve -d 'With --persist: refuse new data (SERVER_ERROR out of disk space storing object) while fewer than this many MiB are free on the store\'s filesystem, so that the store itself never meets a full disk. Default: 4x the memtable budget, at least 64. 0 turns the guard off' -r
complete -c memkitd -l raft-node -d 'With --persist: this node\'s id in a replicated group (a number from 1)' -r
complete -c memkitd -l raft-listen -d 'The address the group\'s peers reach this node at' -r
complete -c memkitd -l raft-peers -d 'The group: every node\'s id and peer address, this one\'s included. A node started with it on an empty --persist directory joins the group\'s first start (the lowest id bootstraps it); on a non-empty one it rejoins' -r
complete -c memkitd -l read-consistency -d 'linearizable (default: a read sees every write acknowledged before it began, on any node) or local (a node\'s own state, which may lag the leader\'s by what is not yet replicated to it)' -r
complete -c memkitd -l raft-timeout-ms -d 'How long a write or a linearizable read may wait for the group (a leader, a majority) before it is answered SERVER_ERROR' -r
complete -c memkitd -l raft-heartbeat-ms -d 'Heartbeat period; an election starts after 6 to 8 of them without a leader (openraft adds its leader lease to the election timeout)' -r
complete -c memkitd -l raft-snapshot-after -d 'A snapshot after this many log entries since the last; the log keeps a tenth of that (at most 1000) behind it for followers slightly behind' -r
complete -c memkitd -l route -d 'Run as a router in front of the pools this TOML file describes (docs/router.md): requests go to the backends, not to a local store. SIGHUP reloads the file' -r -F
complete -c memkitd -l metrics-addr -d 'Serve Prometheus metrics (memcached_exporter\'s names) at http://HOST:PORT/metrics, and a live page for operators at http://HOST:PORT/' -r
complete -c memkitd -l log-format -d 'Log format on standard error; the level is RUST_LOG when set, else -v/-vv/-vvv' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line'"
complete -c memkitd -s Y -l auth-file -d 'Enable ASCII protocol authentication. FILE holds `user:password` lines; a client\'s first command must be `set <any key> 0 0 <bytes>` with `user password` as data' -r
complete -c memkitd -s M -l disable-evictions -d 'Return an error on memory exhausted instead of evicting'
complete -c memkitd -s C -l disable-cas -d 'Disable use of CAS (accepted with a warning: CAS stays on)'
complete -c memkitd -s A -l enable-shutdown -d 'Enable the ascii "shutdown" command'
complete -c memkitd -s v -l verbose -d 'Verbose (repeat for more: -vv prints every command)'
complete -c memkitd -s X -l disable-dumping -d 'Disable `stats cachedump` and `lru_crawler metadump`'
complete -c memkitd -s W -l disable-watch -d 'Disable `watch` (the logger)'
complete -c memkitd -s S -l enable-sasl -d 'Require SASL authentication (binary protocol, mechanism PLAIN). The password file (`user:password` lines) is named by MEMCACHED_SASL_PWDB or --sasl-pwdb'
complete -c memkitd -s d -l daemon -d 'Run as a daemon (fork, detach from the terminal)'
complete -c memkitd -s r -l enable-coredumps -d 'Maximize the core file limit'
complete -c memkitd -s k -l lock-memory -d 'Lock down all paged memory (mlockall)'
complete -c memkitd -s L -l enable-largepages -d 'Try to use large memory pages (accepted, no effect)'
complete -c memkitd -s F -l disable-flush-all -d 'Disable the flush_all command'
complete -c memkitd -s i -l license -d 'Print the license and exit'
complete -c memkitd -l dashboard-keys -d 'Show keys on the page: its hot keys and read-only key browser (behind -Y or -S\'s credentials when they are on)'
complete -c memkitd -s Z -l enable-ssl -d 'Enable TLS (-o ssl_chain_cert=FILE,ssl_key=FILE[,ssl_ca_cert=FILE,ssl_verify_mode=N])'
complete -c memkitd -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memkitd -s V -l version -d 'Print version'
