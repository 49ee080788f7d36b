"""Random operations against a dict model, with flushes, compactions,
snapshots and reopens; every read compared with the model."""

import random

import pytest

import strata_kv


@pytest.mark.parametrize("seed", range(4))
def test_random_operations_match_dict(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "db"
    opts = dict(write_buffer_size=256 << 10, compression_type=rng.choice(["none", "snappy", "zstd"]))
    model = {}
    db = strata_kv.DB(path, **opts)
    snaps = []
    try:
        for step in range(4000):
            key = b"k%04d" % rng.randrange(600)
            op = rng.random()
            if op < 0.45:
                value = rng.randbytes(rng.randrange(0, 200))
                db[key] = value
                model[key] = value
            elif op < 0.6:
                db.delete(key)
                model.pop(key, None)
            elif op < 0.7:
                with db.write_batch() as batch:
                    for _ in range(rng.randrange(1, 8)):
                        k = b"k%04d" % rng.randrange(600)
                        if rng.random() < 0.7:
                            v = rng.randbytes(rng.randrange(0, 50))
                            batch.put(k, v)
                            model[k] = v
                        else:
                            batch.delete(k)
                            model.pop(k, None)
            elif op < 0.85:
                assert db.get(key) == model.get(key)
            elif op < 0.9:
                keys = [b"k%04d" % rng.randrange(600) for _ in range(rng.randrange(1, 20))]
                assert db.multi_get(keys) == [model.get(k) for k in keys]
            elif op < 0.93:
                lo, hi = sorted(b"k%04d" % rng.randrange(600) for _ in range(2))
                reverse = rng.random() < 0.5
                want = sorted(((k, v) for k, v in model.items() if lo <= k < hi), reverse=reverse)
                assert list(db.items(start=lo, stop=hi, reverse=reverse)) == want
            elif op < 0.95:
                snaps.append((db.snapshot(), dict(model)))
                if len(snaps) > 3:
                    old, _ = snaps.pop(0)
                    old.close()
            elif op < 0.97:
                for snap, frozen in snaps:
                    assert list(snap.items()) == sorted(frozen.items())
            elif op < 0.985:
                rng.choice([db.flush, db.compact_range])()
            else:
                for snap, _ in snaps:
                    snap.close()
                snaps = []
                db.close()
                db = strata_kv.DB(path, **opts)
        assert list(db.items()) == sorted(model.items())
    finally:
        for snap, _ in snaps:
            snap.close()
        db.close()
    with strata_kv.DB(path, **opts) as db:
        assert list(db.items()) == sorted(model.items())
