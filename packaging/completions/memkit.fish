# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_memkit_global_optspecs
    string join \n s/servers= d/distribution= timeout-ms= tls tls-ca= tls-cert= tls-key= tls-server-name= tls-insecure binary username= password= which= h/help V/version
end

function __fish_memkit_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_memkit_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_memkit_using_subcommand
    set -l cmd (__fish_memkit_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c memkit -n "__fish_memkit_needs_command" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_needs_command" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_needs_command" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_needs_command" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_needs_command" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_needs_command" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_needs_command" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_needs_command" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_needs_command" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_needs_command" -l which -d 'Print the server KEY maps to, one line per --which (then run the command, if one is given)' -r
complete -c memkit -n "__fish_memkit_needs_command" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_needs_command" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_needs_command" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_needs_command" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_needs_command" -s V -l version -d 'Print version'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "get" -d 'Print each item found (like memccat); exit 1 if any key is missing'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "gat" -d 'Get and touch: read each key and set its expiry (`gat`); exit 1 if any is missing'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "touch" -d 'Set a key\'s expiry; exit 1 if it is missing'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "set" -d 'Store VALUE (or stdin) under KEY'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "add" -d 'Store only if KEY is absent; exit 1 if it exists'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "replace" -d 'Store only if KEY is present; exit 1 if it is missing'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "append" -d 'Add VALUE (or stdin) after KEY\'s value; exit 1 if it is missing'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "prepend" -d 'Add VALUE (or stdin) before KEY\'s value; exit 1 if it is missing'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "cas" -d 'Store only if KEY\'s CAS is still CAS (from `get --format line|json`); exit 1 on a mismatch or a missing key'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "delete" -d 'Delete keys'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "incr" -d 'Increment a counter; prints the new value'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "decr" -d 'Decrement a counter (stops at 0); prints the new value'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "stats" -d '`stats [ARGS]` of every server'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "flush" -d '`flush_all [DELAY]` on every server'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "ping" -d '`version` of every server, with the round-trip time'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "version" -d '`version` of every server: `host:port VERSION` per line'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "verbosity" -d '`verbosity LEVEL` on every server (text protocol only: not with --binary)'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "top" -d 'Live dashboard: ops/s, hit ratio, evictions, items, memory, connections, and the memory per item-size class; q quits, tab moves between the total and each server'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "dump" -d 'Every key with its metadata (`lru_crawler metadump all`; text protocol only: not with --binary)'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "watch" -d 'Stream the servers\' `watch` events (fetchers, mutations, evictions; default all; text protocol only: not with --binary)'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "cluster" -d 'A replicated memkitd group (--raft-*), through the first server that answers: its status, or a member added or removed (text protocol only: not with --binary)'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "trace" -d 'Render the cookbook\'s M/L/W/U/H per-key trace files (or every *.trace in a directory)'
complete -c memkit -n "__fish_memkit_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c memkit -n "__fish_memkit_using_subcommand get" -s f -l format -d 'value (the bytes, then a newline), line (`KEY FLAGS CAS TTL VALUE`, TTL -1 for none, `-` with --binary, which cannot read it), json (one object per key: key, found, flags, cas, ttl (not with --binary), value or value_base64)' -r -f -a "value\t'The value\'s bytes, then a newline (like memccat)'
line\t'`KEY FLAGS CAS TTL VALUE` (TTL in seconds, -1 for none, `-` when unknown: over binary), then a newline'
json\t'One JSON object per key'"
complete -c memkit -n "__fish_memkit_using_subcommand get" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand get" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand get" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand get" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand get" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand get" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand get" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand get" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand get" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand get" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand get" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand get" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memkit -n "__fish_memkit_using_subcommand gat" -s f -l format -d 'As for `get`' -r -f -a "value\t'The value\'s bytes, then a newline (like memccat)'
line\t'`KEY FLAGS CAS TTL VALUE` (TTL in seconds, -1 for none, `-` when unknown: over binary), then a newline'
json\t'One JSON object per key'"
complete -c memkit -n "__fish_memkit_using_subcommand gat" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand gat" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand gat" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand gat" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand gat" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand gat" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand gat" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand gat" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand gat" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand gat" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand gat" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand gat" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand gat" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memkit -n "__fish_memkit_using_subcommand touch" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand touch" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand touch" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand touch" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand touch" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand touch" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand touch" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand touch" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand touch" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand touch" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand touch" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand touch" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand touch" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand set" -l flags -d 'Client flags' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -l exptime -d 'Expiry (memcached\'s exptime: seconds, or an absolute Unix time)' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand set" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand set" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand set" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand set" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand add" -l flags -d 'Client flags' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -l exptime -d 'Expiry (memcached\'s exptime: seconds, or an absolute Unix time)' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand add" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand add" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand add" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand add" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l flags -d 'Client flags' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l exptime -d 'Expiry (memcached\'s exptime: seconds, or an absolute Unix time)' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand replace" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand replace" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand append" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand append" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand append" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand append" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand append" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand append" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand append" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand append" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand append" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand append" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand append" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand append" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand append" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand prepend" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l flags -d 'Client flags' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l exptime -d 'Expiry (memcached\'s exptime: seconds, or an absolute Unix time)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand cas" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand cas" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand delete" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand delete" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand delete" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand delete" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand delete" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand delete" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand delete" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand delete" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand delete" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand delete" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand delete" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand delete" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand delete" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand incr" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand incr" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand incr" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand incr" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand incr" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand incr" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand incr" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand incr" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand incr" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand incr" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand incr" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand incr" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand incr" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand decr" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand decr" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand decr" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand decr" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand decr" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand decr" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand decr" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand decr" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand decr" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand decr" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand decr" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand decr" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand decr" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand stats" -s f -l format -d 'text (memcstat\'s layout), table, json, or prometheus (memcached_exporter names)' -r -f -a "text\t'`Server: h:p` then a tab-indented `name: value` per line (memcstat\'s layout)'
table\t'One row per stat, one column per server'
json\t'`{"h:p": {"name": value, ...}, ...}`; numbers as JSON numbers, errors as `{"error": ...}`'
prometheus\t'Prometheus text format with the memcached exporter\'s metric names'"
complete -c memkit -n "__fish_memkit_using_subcommand stats" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand stats" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand stats" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand stats" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand stats" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand stats" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand stats" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand stats" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand stats" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand stats" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand stats" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand stats" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand stats" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memkit -n "__fish_memkit_using_subcommand flush" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand flush" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand flush" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand flush" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand flush" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand flush" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand flush" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand flush" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand flush" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand flush" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand flush" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand flush" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand flush" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand ping" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand ping" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand ping" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand ping" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand ping" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand ping" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand ping" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand ping" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand ping" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand ping" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand ping" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand ping" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand ping" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand version" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand version" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand version" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand version" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand version" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand version" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand version" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand version" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand version" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand version" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand version" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand version" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand version" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand verbosity" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand top" -s i -l interval -d 'Seconds between refreshes' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -s n -l iterations -d 'Stop after N refreshes' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand top" -s b -l batch -d 'Print frames as plain text (the default when not on a terminal)'
complete -c memkit -n "__fish_memkit_using_subcommand top" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand top" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand top" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand top" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l prefix -d 'Only keys starting with PREFIX' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -s n -l limit -d 'Stop after N keys' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -s f -l format -d 'text (columns), json (one object per line), raw (the server\'s lines)' -r -f -a "text\t'Aligned columns: key, size, class, TTL left, last access, fetched, CAS'
json\t'One JSON object per line with every field the server sent (plus `server`)'
raw\t'The server\'s lines as they are (`key=... exp=... la=...`)'"
complete -c memkit -n "__fish_memkit_using_subcommand dump" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand dump" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand dump" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memkit -n "__fish_memkit_using_subcommand watch" -s n -l count -d 'Stop after N events' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l duration -d 'Stop after SECS seconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand watch" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand watch" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -f -a "status" -d 'The group as a node sees it (the leader\'s view when one answers): role, leader, term, indexes, and each member, voter or learner, with its lag behind the leader'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -f -a "add" -d 'Add node ID, whose peer port is HOST:PORT (its --raft-listen): it must run already, started with --raft-node ID --raft-listen HOST:PORT and --raft-peers listing the members and itself. It joins as a learner, catches up, then votes'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -f -a "remove" -d 'Remove node ID, voter or learner, from the group (a leader removed steps down)'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and not __fish_seen_subcommand_from status add remove help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -s f -l format -d 'text (a table) or json (one object)' -r -f -a "text\t'The node\'s view, then a row per member'
json\t'One JSON object: the node\'s figures and `members`'"
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from remove" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from help" -f -a "status" -d 'The group as a node sees it (the leader\'s view when one answers): role, leader, term, indexes, and each member, voter or learner, with its lag behind the leader'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add node ID, whose peer port is HOST:PORT (its --raft-listen): it must run already, started with --raft-node ID --raft-listen HOST:PORT and --raft-peers listing the members and itself. It joins as a learner, catches up, then votes'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from help" -f -a "remove" -d 'Remove node ID, voter or learner, from the group (a leader removed steps down)'
complete -c memkit -n "__fish_memkit_using_subcommand cluster; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l width -d 'Letters per line' -r
complete -c memkit -n "__fish_memkit_using_subcommand trace" -s s -l servers -d 'Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211)' -r
complete -c memkit -n "__fish_memkit_using_subcommand trace" -s d -l distribution -d 'ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>, php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP\'s pecl memcache)' -r
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l timeout-ms -d 'Connect and request timeout in milliseconds' -r
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l tls-ca -d 'CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt' -r
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l tls-cert -d 'Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode)' -r
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l tls-key -d 'The client certificate\'s private key (PEM)' -r
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l tls-server-name -d 'The name the server certificates must carry (default: each server\'s host)' -r
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l username -d 'User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary (servers started with -S)' -r
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l password -d 'Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`)' -r
complete -c memkit -n "__fish_memkit_using_subcommand trace" -s F -l follow -d 'Keep reading: print letters as they are appended (like `tail -f`)'
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l tls -d 'Speak TLS (servers started with -Z). Implied by the other --tls-* options'
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l tls-insecure -d 'Accept any server certificate. For tests only: anyone on the path can read and change the traffic'
complete -c memkit -n "__fish_memkit_using_subcommand trace" -l binary -d 'Speak the binary protocol (servers started with -S serve nothing else); with --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster have no binary form and are refused'
complete -c memkit -n "__fish_memkit_using_subcommand trace" -s h -l help -d 'Print help'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "get" -d 'Print each item found (like memccat); exit 1 if any key is missing'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "gat" -d 'Get and touch: read each key and set its expiry (`gat`); exit 1 if any is missing'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "touch" -d 'Set a key\'s expiry; exit 1 if it is missing'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "set" -d 'Store VALUE (or stdin) under KEY'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "add" -d 'Store only if KEY is absent; exit 1 if it exists'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "replace" -d 'Store only if KEY is present; exit 1 if it is missing'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "append" -d 'Add VALUE (or stdin) after KEY\'s value; exit 1 if it is missing'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "prepend" -d 'Add VALUE (or stdin) before KEY\'s value; exit 1 if it is missing'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "cas" -d 'Store only if KEY\'s CAS is still CAS (from `get --format line|json`); exit 1 on a mismatch or a missing key'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "delete" -d 'Delete keys'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "incr" -d 'Increment a counter; prints the new value'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "decr" -d 'Decrement a counter (stops at 0); prints the new value'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "stats" -d '`stats [ARGS]` of every server'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "flush" -d '`flush_all [DELAY]` on every server'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "ping" -d '`version` of every server, with the round-trip time'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "version" -d '`version` of every server: `host:port VERSION` per line'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "verbosity" -d '`verbosity LEVEL` on every server (text protocol only: not with --binary)'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "top" -d 'Live dashboard: ops/s, hit ratio, evictions, items, memory, connections, and the memory per item-size class; q quits, tab moves between the total and each server'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "dump" -d 'Every key with its metadata (`lru_crawler metadump all`; text protocol only: not with --binary)'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "watch" -d 'Stream the servers\' `watch` events (fetchers, mutations, evictions; default all; text protocol only: not with --binary)'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "cluster" -d 'A replicated memkitd group (--raft-*), through the first server that answers: its status, or a member added or removed (text protocol only: not with --binary)'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "trace" -d 'Render the cookbook\'s M/L/W/U/H per-key trace files (or every *.trace in a directory)'
complete -c memkit -n "__fish_memkit_using_subcommand help; and not __fish_seen_subcommand_from get gat touch set add replace append prepend cas delete incr decr stats flush ping version verbosity top dump watch cluster trace help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c memkit -n "__fish_memkit_using_subcommand help; and __fish_seen_subcommand_from cluster" -f -a "status" -d 'The group as a node sees it (the leader\'s view when one answers): role, leader, term, indexes, and each member, voter or learner, with its lag behind the leader'
complete -c memkit -n "__fish_memkit_using_subcommand help; and __fish_seen_subcommand_from cluster" -f -a "add" -d 'Add node ID, whose peer port is HOST:PORT (its --raft-listen): it must run already, started with --raft-node ID --raft-listen HOST:PORT and --raft-peers listing the members and itself. It joins as a learner, catches up, then votes'
complete -c memkit -n "__fish_memkit_using_subcommand help; and __fish_seen_subcommand_from cluster" -f -a "remove" -d 'Remove node ID, voter or learner, from the group (a leader removed steps down)'
