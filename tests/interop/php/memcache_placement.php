<?php
// pecl memcache's placement: stores (or, with `read`, gets) keys through one weighted
// Memcache pool and names the server of each key as the extension sees it (findServer).
// Usage: php -d memcache.hash_strategy=S -d memcache.hash_function=F memcache_placement.php
//            host:port:weight,... PREFIX N [read]
// Keys are PREFIX:i, every fifth with UTF-8 bytes >= 0x80 (PREFIX:café:i), one 250 bytes long.
// Prints one JSON object: {"ini": [strategy, function], "keys": [[key, server, X], ...]}, X
// the set's outcome, or with `read` the value got (false on a miss).
$m = new Memcache();
foreach (explode(',', $argv[1]) as $s) {
    [$host, $port, $weight] = explode(':', $s);
    $m->addServer($host, (int)$port, false, (int)$weight);
}
$prefix = $argv[2];
$n = (int)$argv[3];
$read = ($argv[4] ?? '') === 'read';
$keys = [];
for ($i = 0; $i < $n; $i++) {
    $keys[] = $i % 5 == 0 ? "$prefix:café:$i" : "$prefix:$i";
}
$keys[] = str_pad("$prefix:long:", 250, 'x');
$out = ['ini' => [ini_get('memcache.hash_strategy'), ini_get('memcache.hash_function')], 'keys' => []];
foreach ($keys as $k) {
    $out['keys'][] = [$k, $m->findServer($k), $read ? $m->get($k) : $m->set($k, "v:$k")];
}
echo json_encode($out, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES), "\n";
