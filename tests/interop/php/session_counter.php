<?php
// One request of a PHP application keeping a counter in its session, with the session handler
// and its options from the ini (php -d session.save_handler=memcached -d session.save_path=...).
// Usage: php session_counter.php SESSION_ID [HOLD_SECONDS]
// Prints {"start": bool, "locked_after": seconds, "n": counter}; with HOLD_SECONDS it prints
// "locked" once the session is open, then keeps it (and its lock) for that long.
session_id($argv[1]);
$hold = (float)($argv[2] ?? 0);
$t0 = microtime(true);
$ok = session_start();
$waited = microtime(true) - $t0;
if ($hold > 0) {
    fwrite(STDOUT, "locked\n");
    fflush(STDOUT);
    usleep((int)($hold * 1e6));
}
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
$n = $_SESSION['n'];
$closed = session_write_close();
echo json_encode(['start' => $ok, 'waited' => $waited, 'n' => $n, 'closed' => $closed]), "\n";
