<?php
// php-memcached (libmemcached) over the binary protocol against 127.0.0.1:PORT.
// Usage: php memcached_binary.php PORT. Prints one JSON object: what each call returned
// and the result code after it; test_php.py compares it with what memcached 1.6.18 gives.
$port = (int)$argv[1];
$m = new Memcached();
$m->setOption(Memcached::OPT_BINARY_PROTOCOL, true);
$m->setOption(Memcached::OPT_CONNECT_TIMEOUT, 3000);
$m->setOption(Memcached::OPT_SEND_TIMEOUT, 3000000);
$m->setOption(Memcached::OPT_RECV_TIMEOUT, 3000000);
$m->setOption(Memcached::OPT_POLL_TIMEOUT, 3000);
$m->addServer('127.0.0.1', $port);
$out = [];
// A server that does not answer makes every call wait for the poll timeout: stop at the
// first connection-level failure (timeout, connect/read/write failure, server marked dead).
const CONNECTION_LEVEL = [2, 3, 5, 6, 26, 31, 35, 47];
function rec($name, $value) {
    global $m, $out;
    $code = $m->getResultCode();
    $out[$name] = [$value, $code];
    if (in_array($code, CONNECTION_LEVEL, true)) {
        $out['aborted_at'] = [$name, $m->getResultMessage()];
        echo json_encode($out), "\n";
        exit(0);
    }
}

rec('flush', $m->flush());
rec('get_miss', $m->get('absent'));
rec('set', $m->set('k', 'v'));
rec('get', $m->get('k'));
rec('set_int', $m->set('int', 42));
rec('get_int', $m->get('int'));
rec('set_array', $m->set('arr', ['a' => 1, 'b' => [true, null, 1.5]]));
rec('get_array', $m->get('arr'));
rec('set_bin', $m->set('bin', "\x00\r\nEND\r\n\x80\xff"));
rec('get_bin_hex', bin2hex($m->get('bin')));
rec('add_exists', $m->add('k', 'x'));
rec('add_new', $m->add('new', 'n'));
rec('replace_missing', $m->replace('nope', 'x'));
rec('replace', $m->replace('new', 'n2'));
rec('get_replaced', $m->get('new'));

// multi
$items = [];
for ($i = 0; $i < 100; $i++) { $items["m$i"] = str_repeat(chr(97 + $i % 26), $i); }
rec('setMulti', $m->setMulti($items));
$keys = array_merge(array_keys($items), ['gone1', 'gone2']);
$got = $m->getMulti($keys);
rec('getMulti_count', is_array($got) ? count($got) : $got);
rec('getMulti_equal', $got === $items);
rec('getMulti_order', array_keys($got) === array_keys($items));
rec('getMulti_all_missing', $m->getMulti(['gone1', 'gone2']));
rec('deleteMulti', $m->deleteMulti(['m0', 'm1', 'gone1']));
$got = $m->getMulti(array_keys($items));
rec('getMulti_after_delete', is_array($got) ? count($got) : $got);

// cas
$e = $m->get('k', null, Memcached::GET_EXTENDED);
rec('get_extended_value', $e['value']);
rec('cas_nonzero', is_int($e['cas']) && $e['cas'] > 0);
rec('cas_ok', $m->cas($e['cas'], 'k', 'v2'));
rec('cas_stale', $m->cas($e['cas'], 'k', 'v3'));
rec('get_after_cas', $m->get('k'));
rec('cas_missing', $m->cas($e['cas'], 'no-such-key', 'x'));
$e2 = $m->get('k', null, Memcached::GET_EXTENDED);
rec('cas_changed', $e2['cas'] !== $e['cas']);

// counters: the initial value (and creating on a miss) exists only in the binary protocol
rec('incr_missing_no_initial', $m->increment('ctr'));
rec('incr_initial', $m->increment('ctr', 1, 10));
rec('incr_again', $m->increment('ctr', 5, 10));
rec('decr_floor', $m->decrement('ctr', 100));
rec('decr_initial', $m->decrement('dctr', 1, 7));
rec('get_counter', $m->get('dctr'));
rec('incr_big', $m->increment('big', 4294967295, 4294967295));
rec('incr_big2', $m->increment('big', 2));
$m->set('text', 'abc');
rec('incr_non_numeric', $m->increment('text'));

// append/prepend need compression off (php-memcached refuses them otherwise)
$m->setOption(Memcached::OPT_COMPRESSION, false);
rec('append_missing', $m->append('ap', 'x'));
rec('prepend_missing', $m->prepend('ap', 'x'));
$m->set('ap', 'mid');
rec('append', $m->append('ap', '>>'));
rec('prepend', $m->prepend('ap', '<<'));
rec('get_appended', $m->get('ap'));

// touch
rec('touch', $m->touch('k', 1000));
rec('touch_missing', $m->touch('absent', 1000));
rec('delete', $m->delete('k'));
rec('delete_missing', $m->delete('k'));

// sizes: php-memcached compresses values over 2000 bytes (fastlz) unless told not to
$big = str_repeat('0123456789abcdef', 60000); // 960000 bytes, stored uncompressed
rec('set_big', $m->set('big_value', $big));
rec('get_big_equal', $m->get('big_value') === $big);
rec('set_too_big', $m->set('too_big', random_bytes(1100000)));
rec('after_too_big', $m->set('after', 'fine'));
rec('get_after_too_big', $m->get('after'));

$v = $m->getVersion();
rec('version_nonempty', is_array($v) && count($v) === 1 && strlen(array_values($v)[0]) > 0);
$s = $m->getStats();
$st = $s["127.0.0.1:$port"] ?? [];
rec('stats_keys', array_values(array_intersect(
    ['pid', 'uptime', 'version', 'curr_items', 'total_items', 'get_hits', 'get_misses', 'cmd_get',
     'cmd_set', 'curr_connections', 'limit_maxbytes', 'threads', 'bytes'], array_keys($st))));
rec('stats_limit', $st['limit_maxbytes'] ?? null);
rec('stats_pid_positive', ($st['pid'] ?? 0) > 0);
rec('stats_items_positive', ($st['curr_items'] ?? 0) > 0);
rec('quit', $m->quit());
rec('get_after_quit', $m->get('after'));  // reconnects
echo json_encode($out), "\n";
