<?php
// php-memcache (the older extension, text protocol): basic commands.
// Usage: php memcache_text.php PORT. Prints one JSON object of results.
$port = (int)$argv[1];
$m = new Memcache();
$out = ['connect' => $m->connect('127.0.0.1', $port, 3)];
$out['flush'] = $m->flush();
$out['get_miss'] = $m->get('absent');
$out['set'] = $m->set('k', 'value');
$out['get'] = $m->get('k');
$out['set_array'] = $m->set('arr', [1, 'two' => 2]);
$out['get_array'] = $m->get('arr');
$out['add_exists'] = $m->add('k', 'x');
$out['replace'] = $m->replace('k', 'value2');
$out['get_multi'] = $m->get(['k', 'absent', 'arr']);
$out['set_num'] = $m->set('n', '10');
$out['increment'] = $m->increment('n', 5);
$out['decrement'] = $m->decrement('n', 100);
$out['increment_missing'] = $m->increment('absent', 1);
$out['delete'] = $m->delete('k');
$out['delete_missing'] = $m->delete('k');
$out['get_deleted'] = $m->get('k');
$st = $m->getStats();
$out['stats_pid_positive'] = is_array($st) && $st['pid'] > 0;
$out['version_nonempty'] = strlen((string)$m->getVersion()) > 0;
$out['close'] = $m->close();
echo json_encode($out), "\n";
