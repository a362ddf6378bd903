"""CI must not pass vacuously: the memkitd binary under test has to exist."""

import mkinterop as mk


def test_memkitd_binary_exists():
    p = mk.memkitd_path()
    assert p.exists(), f"memkitd binary not found at {p}; set MEMKITD or build memkit-server"
