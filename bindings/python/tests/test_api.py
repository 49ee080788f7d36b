"""The Python API against a real database in a temporary directory."""

import os

import pytest

import strata_kv


@pytest.fixture
def db(tmp_path):
    with strata_kv.DB(tmp_path / "db") as db:
        yield db


def test_get_put_delete_and_mapping(db):
    assert db.get(b"a") is None
    assert db.get(b"a", b"dflt") == b"dflt"
    db.put(b"a", b"1")
    db[b"b"] = b"2"
    assert db.get(b"a") == b"1"
    assert db[b"b"] == b"2"
    assert b"a" in db and b"zz" not in db
    with pytest.raises(KeyError):
        db[b"zz"]
    db.delete(b"a")
    del db[b"b"]
    assert db.get(b"a") is None and b"b" not in db
    db.put(b"k", b"", sync=True)
    assert db[b"k"] == b""
    db.put(b"n", b"v", disable_wal=True)
    assert db[b"n"] == b"v"


def test_write_batch_standalone_and_context(db):
    batch = strata_kv.WriteBatch()
    batch.put(b"x", b"1")
    batch.put(b"y", b"2")
    batch.delete(b"x")
    assert len(batch) == 3
    db.write(batch, sync=True)
    assert db.get(b"x") is None and db[b"y"] == b"2"

    with db.write_batch() as b:
        b.put(b"c1", b"v1")
        b.put(b"c2", b"v2")
        assert db.get(b"c1") is None, "nothing written before the block ends"
    assert db[b"c1"] == b"v1" and db[b"c2"] == b"v2"

    with pytest.raises(RuntimeError):
        with db.write_batch() as b:
            b.put(b"lost", b"v")
            raise RuntimeError("abort")
    assert db.get(b"lost") is None, "an exception discards the batch"


def test_delete_range(db):
    for i in range(100):
        db.put(b"k%03d" % i, b"v")
    db.delete_range(b"k010", b"k020")
    assert [k for k in db.keys(b"k005", b"k025")] == [
        b"k%03d" % i for i in list(range(5, 10)) + list(range(20, 25))
    ]
    db.delete_range(b"k050", b"k050")  # empty: deletes nothing
    assert b"k050" in db
    with pytest.raises(strata_kv.InvalidArgumentError):
        db.delete_range(b"k090", b"k080")
    with db.write_batch() as b:
        b.delete_range(b"k000", b"k005")
        b.put(b"k001", b"back")
    assert db.get(b"k000") is None and db[b"k001"] == b"back"
    db.flush()
    db.compact_range()
    assert len(list(db.keys())) == 100 - 10 - 5 + 1


def test_merge_operators(tmp_path):
    with strata_kv.DB(tmp_path / "counters", merge_operator="uint64add") as db:
        for _ in range(3):
            db.merge(b"c", (5).to_bytes(8, "little"))
        db.flush()
        b = strata_kv.WriteBatch()
        b.merge(b"c", (1).to_bytes(8, "little"))
        db.write(b)
        assert int.from_bytes(db[b"c"], "little") == 16
    with strata_kv.DB(tmp_path / "lists", merge_operator="stringappend") as db:
        db.put(b"l", b"a")
        db.merge(b"l", b"b")
        db.merge(b"l", b"c")
        assert db[b"l"] == b"a,b,c"
    with strata_kv.DB(tmp_path / "none") as db:
        with pytest.raises(strata_kv.NotSupportedError):
            db.merge(b"k", b"v")
    with pytest.raises(strata_kv.InvalidArgumentError):
        strata_kv.DB(tmp_path / "bad", merge_operator="max")


def test_multi_get_order_and_duplicates(db):
    for i in range(100):
        db.put(b"k%03d" % i, b"v%d" % i)
    keys = [b"k050", b"nope", b"k001", b"k050", b"k099"]
    assert db.multi_get(keys) == [b"v50", None, b"v1", b"v50", b"v99"]
    db.flush()
    assert db.multi_get(keys) == [b"v50", None, b"v1", b"v50", b"v99"]


def test_items_keys_values_ranges(db):
    data = {b"k%02d" % i: b"v%d" % i for i in range(50)}
    for k, v in data.items():
        db[k] = v
    db.flush()
    db[b"k10"] = b"newer"  # memtable over a table
    data[b"k10"] = b"newer"
    want = sorted(data.items())
    assert list(db.items()) == want
    assert list(db.keys()) == [k for k, _ in want]
    assert list(db.values()) == [v for _, v in want]
    assert list(db) == [k for k, _ in want]
    assert list(db.items(start=b"k10", stop=b"k15")) == [kv for kv in want if b"k10" <= kv[0] < b"k15"]
    assert list(db.items(start=b"k10", stop=b"k15", reverse=True)) == [
        kv for kv in reversed(want) if b"k10" <= kv[0] < b"k15"
    ]
    assert list(db.keys(reverse=True)) == [k for k, _ in reversed(want)]
    assert list(db.items(start=b"zz")) == []


def test_long_scan_crosses_chunks(db):
    with db.write_batch() as b:
        for i in range(5000):
            b.put(b"%06d" % i, b"x" * (i % 300))
    got = list(db.items())
    assert len(got) == 5000
    assert got[4321] == (b"%06d" % 4321, b"x" * (4321 % 300))
    assert [k for k, _ in db.items(reverse=True)][:3] == [b"004999", b"004998", b"004997"]


def test_raw_iterator(db):
    for k in [b"a", b"c", b"e"]:
        db[k] = k.upper()
    it = db.iterator()
    assert not it.valid() and it.key() is None
    it.seek(b"b")
    assert it.valid() and it.key() == b"c" and it.value() == b"C"
    it.next()
    assert it.key() == b"e"
    it.next()
    assert not it.valid()
    it.seek_for_prev(b"d")
    assert it.key() == b"c"
    it.prev()
    assert it.key() == b"a"
    it.seek_to_last()
    assert it.key() == b"e"
    it.seek_to_first()
    assert it.key() == b"a"
    bounded = db.iterator(lower_bound=b"b", upper_bound=b"e")
    bounded.seek_to_first()
    seen = []
    while bounded.valid():
        seen.append(bounded.key())
        bounded.next()
    assert seen == [b"c"]
    with pytest.raises(strata_kv.InvalidArgumentError):
        bounded.next()


def test_next_prefix_skips_versions(tmp_path):
    with strata_kv.DB(tmp_path / "mvcc", prefix_extractor="rocksdb.FixedPrefix.4") as db:
        for row in range(10):
            for version in range(20):
                db.put(b"r%03d" % row + b"%04d" % version, b"v")
        db.flush()
        it = db.iterator()
        it.seek_to_first()
        rows = []
        while it.valid():
            rows.append(it.key()[:4])
            it.next_prefix()
        assert rows == [b"r%03d" % r for r in range(10)]
        it.seek_to_last()
        back = []
        while it.valid():
            back.append(it.key()[:4])
            it.prev_prefix()
        assert back == [b"r%03d" % r for r in reversed(range(10))]


def test_snapshot_view(db):
    db[b"a"] = b"old"
    db[b"gone"] = b"here"
    with db.snapshot() as snap:
        db[b"a"] = b"new"
        db[b"b"] = b"added"
        del db[b"gone"]
        db.flush()
        assert snap.get(b"a") == b"old"
        assert snap[b"gone"] == b"here"
        assert b"b" not in snap
        assert snap.multi_get([b"a", b"b"]) == [b"old", None]
        assert list(snap.items()) == [(b"a", b"old"), (b"gone", b"here")]
        assert list(snap.keys(reverse=True)) == [b"gone", b"a"]
        it = snap.iterator()
        it.seek_to_first()
        assert it.key() == b"a" and it.value() == b"old"
        assert snap.sequence > 0
        scan = snap.items()
    with pytest.raises(strata_kv.InvalidArgumentError):
        snap.get(b"a")
    # An iterator made before close keeps its view.
    assert list(scan) == [(b"a", b"old"), (b"gone", b"here")]
    assert db[b"a"] == b"new"


def test_flush_compact_property_options(tmp_path):
    with strata_kv.DB(
        tmp_path / "o",
        write_buffer_size=1 << 20,
        compression_type="zstd",
        bloom_filter=10.0,
        block_size=8192,
        set_max_open_files=-1,
    ) as db:
        for i in range(20000):
            db.put(b"%08d" % i, b"v" * 50)
        db.flush()
        db.compact_range()
        db.compact_range(b"00000100", b"00000200")
        assert int(db.property("rocksdb.num-files-at-level0")) == 0
        assert int(db.property("rocksdb.estimate-num-keys")) == 20000
        assert int(db.property("strata.total-sst-files-size")) > 0
        assert db.property("no.such.property") is None
        assert db[b"00012345"] == b"v" * 50
    options_text = (tmp_path / "o" / "OPTIONS").read_text()
    assert 'compression_type = "zstd"' in options_text
    assert "block_size = 8192" in options_text


def test_reopen_keeps_data_and_read_only(tmp_path):
    path = tmp_path / "r"
    with strata_kv.DB(path) as db:
        db[b"k"] = b"v"
        assert not db.closed
    assert db.closed
    with strata_kv.DB(path, read_only=True) as ro:
        assert ro[b"k"] == b"v"
        with pytest.raises(strata_kv.Error):
            ro[b"k2"] = b"x"
    strata_kv.destroy(path)
    assert not os.path.exists(path / "CURRENT")


def test_repr_and_path(tmp_path):
    db = strata_kv.DB(str(tmp_path / "p"))
    assert db.path.endswith("p") and "open" in repr(db)
    db.close()
    assert "closed" in repr(db)


def test_close_with_live_iterator(tmp_path):
    import gc

    path = tmp_path / "db"
    db = strata_kv.DB(path)
    for i in range(10):
        db[b"%d" % i] = b"v"
    it = db.items()
    db.close()
    with pytest.raises(strata_kv.InvalidArgumentError):
        db.get(b"1")
    # The iterator still reads; it keeps the files open until it is gone.
    assert len(list(it)) == 10
    with pytest.raises(strata_kv.BusyError):
        strata_kv.DB(path)
    del it
    gc.collect()
    with strata_kv.DB(path) as again:
        assert again[b"3"] == b"v"


def test_packed_tables_by_table_option(tmp_path):
    path = tmp_path / "packed"
    with strata_kv.DB(path, packed_table_factory={"from_level": 0}) as db:
        for i in range(1000):
            db.put(i.to_bytes(8, "big"), b"v%d" % i)
        db.flush()
        assert db[(500).to_bytes(8, "big")] == b"v500"
    assert "[packed_table_factory]" in (path / "OPTIONS").read_text()
    with pytest.raises(TypeError, match="from_levle"):
        strata_kv.DB(tmp_path / "bad", packed_table_factory={"from_levle": 1})


def test_every_option_of_the_options_file_is_a_keyword(tmp_path):
    """Every key the engine writes to OPTIONS (the block-based table's
    included) is accepted as a keyword and gives back the same file."""
    import tomllib

    with strata_kv.DB(tmp_path / "a"):
        pass
    written = tomllib.loads((tmp_path / "a" / "OPTIONS").read_text())
    kwargs = {}
    for key, value in written.items():
        if key == "block_based_table_factory":
            kwargs.update(value)  # flat, by setter name
        else:
            kwargs[key] = value
    assert "block_size" in kwargs and "write_buffer_size" in kwargs
    kwargs.pop("create_if_missing")
    with strata_kv.DB(tmp_path / "b", **kwargs):
        pass
    assert tomllib.loads((tmp_path / "b" / "OPTIONS").read_text()) == written
