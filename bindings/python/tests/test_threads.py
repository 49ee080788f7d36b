"""Threads share one DB: writers and readers at once, the GIL released."""

import threading

import strata_kv


def test_threads_write_and_read_at_once(tmp_path):
    with strata_kv.DB(tmp_path / "db", write_buffer_size=512 << 10) as db:
        errors = []
        writers_done = threading.Event()

        def writer(t):
            try:
                for i in range(3000):
                    db.put(b"t%d-%05d" % (t, i), b"%d" % i)
                    if i % 100 == 0:
                        with db.write_batch() as b:
                            b.put(b"batch-t%d-%05d" % (t, i), b"x")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        def reader():
            try:
                while not writers_done.is_set():
                    # A key once written is always readable, with its value.
                    for t in range(4):
                        v = db.get(b"t%d-%05d" % (t, 0))
                        assert v in (None, b"0")
                    keys = list(db.keys(start=b"t0-", stop=b"t0-~"))
                    assert keys == sorted(keys)
                    # Each thread writes its keys in order: what a scan sees is a prefix.
                    assert keys == [b"t0-%05d" % i for i in range(len(keys))]
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        writers = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        readers = [threading.Thread(target=reader) for _ in range(2)]
        for th in writers + readers:
            th.start()
        for th in writers:
            th.join()
        writers_done.set()
        for th in readers:
            th.join()
        assert not errors, errors
        for t in range(4):
            assert len(list(db.keys(start=b"t%d-" % t, stop=b"t%d-~" % t))) == 3000
        assert db[b"t3-02999"] == b"2999"
