<?php
// php-memcached with setSaslAuthData against a server started with -S.
// Usage: php sasl.php PORT USER PASSWORD. Prints one JSON object of results and result codes.
$m = new Memcached();
$m->setOption(Memcached::OPT_BINARY_PROTOCOL, true);  // SASL exists only in binary
$m->setOption(Memcached::OPT_CONNECT_TIMEOUT, 3000);
$m->setOption(Memcached::OPT_POLL_TIMEOUT, 3000);
$m->addServer('127.0.0.1', (int)$argv[1]);
$m->setSaslAuthData($argv[2], $argv[3]);
$out = [];
$out['set'] = [$m->set('sasl_key', 'sasl_value'), $m->getResultCode()];
$out['get'] = [$m->get('sasl_key'), $m->getResultCode()];
$out['increment'] = [$m->increment('sasl_ctr', 1, 5), $m->getResultCode()];
echo json_encode($out), "\n";
