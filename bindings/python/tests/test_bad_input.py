"""Bad input gets a clear Python exception, and nothing stored is lost."""

import pytest

import strata_kv


def test_str_instead_of_bytes(tmp_path):
    with strata_kv.DB(tmp_path / "db") as db:
        with pytest.raises(TypeError):
            db.put("text", b"v")
        with pytest.raises(TypeError):
            db.put(b"k", "text")
        with pytest.raises(TypeError):
            db.get("text")
        with pytest.raises(TypeError):
            db["text"] = b"v"
        with pytest.raises(TypeError):
            strata_kv.WriteBatch().put("k", b"v")
        with pytest.raises(TypeError):
            db.multi_get(["k"])


def test_unknown_and_bad_options(tmp_path):
    with pytest.raises(TypeError, match="write_buffer_sise"):
        strata_kv.DB(tmp_path / "a", write_buffer_sise=1)
    with pytest.raises(TypeError):
        strata_kv.DB(tmp_path / "b", write_buffer_size=[1])
    with pytest.raises(strata_kv.InvalidArgumentError):
        strata_kv.DB(tmp_path / "c", compression_type="gzip9")
    with pytest.raises(strata_kv.InvalidArgumentError, match="wal_recovery_mode"):
        strata_kv.DB(tmp_path / "d", wal_recovery_mode="sometimes")
    with pytest.raises(strata_kv.InvalidArgumentError, match="target_file_size_base"):
        strata_kv.DB(tmp_path / "e", target_file_size_base=-5)
    assert not (tmp_path / "d").exists() and not (tmp_path / "e").exists()


def test_closed_db(tmp_path):
    db = strata_kv.DB(tmp_path / "db")
    db[b"k"] = b"v"
    db.close()
    for call in (
        lambda: db.get(b"k"),
        lambda: db.put(b"k", b"v"),
        lambda: db.items(),
        lambda: db.snapshot(),
        lambda: db.flush(),
        lambda: b"k" in db,
    ):
        with pytest.raises(strata_kv.InvalidArgumentError, match="closed"):
            call()
    db.close()  # twice is fine
    with strata_kv.DB(tmp_path / "db") as again:
        assert again[b"k"] == b"v"


def test_path_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_bytes(b"not a database")
    with pytest.raises(strata_kv.Error):
        strata_kv.DB(f)
    assert f.read_bytes() == b"not a database"


def test_missing_without_create(tmp_path):
    with pytest.raises(strata_kv.Error):
        strata_kv.DB(tmp_path / "none", create_if_missing=False)


def test_locked_by_another_handle(tmp_path):
    with strata_kv.DB(tmp_path / "db") as db:
        db[b"k"] = b"v"
        with pytest.raises(strata_kv.BusyError):
            strata_kv.DB(tmp_path / "db")
        assert db[b"k"] == b"v"


def test_oversized_key(tmp_path):
    with strata_kv.DB(tmp_path / "db") as db:
        with pytest.raises(strata_kv.InvalidArgumentError):
            db.put(b"k" * ((1 << 20) + 1), b"v")
        db[b"ok"] = b"v"
        assert db[b"ok"] == b"v"


def test_destroy_refuses_non_database(tmp_path):
    d = tmp_path / "plain"
    d.mkdir()
    (d / "000001.log").write_bytes(b"precious")
    with pytest.raises(strata_kv.Error):
        strata_kv.destroy(d)
    assert (d / "000001.log").read_bytes() == b"precious"


def test_corruption_is_reported(tmp_path):
    path = tmp_path / "db"
    with strata_kv.DB(path, compression_type="none") as db:
        for i in range(1000):
            db.put(b"%06d" % i, b"value-%06d" % i)
        db.flush()
    tables = sorted(path.glob("*.sst"))
    assert tables
    data = bytearray(tables[0].read_bytes())
    data[100] ^= 0xFF
    tables[0].write_bytes(bytes(data))
    with strata_kv.DB(path) as db:
        with pytest.raises(strata_kv.CorruptionError, match="sst"):
            list(db.items())
