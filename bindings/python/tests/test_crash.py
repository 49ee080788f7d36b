"""Kill -9 a writer process; every write it acknowledged as synced is there
after reopening."""

import os
import signal
import subprocess
import sys
import time

import strata_kv

WRITER = r"""
import sys, strata_kv
db = strata_kv.DB(sys.argv[1], write_buffer_size=256 << 10)
i = 0
while True:
    if i % 10 == 0:
        with db.write_batch(sync=True) as b:
            b.put(b"k%08d" % i, b"v%08d" % i)
            b.put(b"b%08d" % i, b"v%08d" % i)
    else:
        db.put(b"k%08d" % i, b"v%08d" % i, sync=True)
    print(i, flush=True)   # acknowledged: the synced write returned
    i += 1
"""


def test_kill_writer_keeps_acknowledged_writes(tmp_path):
    path = str(tmp_path / "db")
    for round_ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, path],
            stdout=subprocess.PIPE,
            text=True,
        )
        acked = -1
        deadline = time.time() + 0.5 + round_ * 0.3
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
        os.kill(proc.pid, signal.SIGKILL)
        # Lines printed before the kill are acknowledged writes too.
        for line in proc.stdout:
            acked = max(acked, int(line))
        proc.wait()
        assert acked > 0, "the writer made no progress"
        with strata_kv.DB(path) as db:
            for i in range(acked + 1):
                assert db.get(b"k%08d" % i) == b"v%08d" % i, (round_, i, acked)
                if i % 10 == 0:
                    assert db.get(b"b%08d" % i) == b"v%08d" % i
            # Each round starts over at 0, so the keys stay comparable.
