<?php
// php-memcache over a UNIX socket, as PHP-FPM on the same host connects.
// Usage: php memcache_unix.php PATH. Prints one JSON object of results.
$m = memcache_connect('unix://' . $argv[1], 0);
$out = ['connect' => $m !== false];
$out['set'] = $m->set('k', 'value');
$out['get'] = $m->get('k');
$out['set_num'] = $m->set('n', '10');
$out['increment'] = $m->increment('n', 5);
$out['get_multi'] = $m->get(['k', 'absent', 'n']);
$out['delete'] = $m->delete('k');
$out['get_deleted'] = $m->get('k');
// -F: flush_all refused (false, and the data stays); otherwise true.
$out['flush'] = $m->flush();
$out['n_after_flush'] = $m->get('n');
$out['close'] = $m->close();
echo json_encode($out), "\n";
