"""Strata from Python against rocksdict (RocksDB) and lmdb (a B-tree):
batched puts, random gets, a full scan. Prints calls (keys) per second.

    python3 bench.py [--num 1000000] [--dir /dev/shm] [--engines strata,rocksdict,lmdb]
"""

import argparse
import os
import random
import shutil
import time


def keys_values(num, value_size):
    rng = random.Random(1)
    keys = [b"%016d" % i for i in range(num)]
    rng.shuffle(keys)
    value = bytes(rng.getrandbits(8) for _ in range(value_size))
    return keys, value


class Strata:
    name = "strata"

    def __init__(self, path):
        import strata_kv

        self.mod = strata_kv
        self.db = strata_kv.DB(path, compression_type="none")

    def put_batch(self, pairs):
        b = self.mod.WriteBatch()
        for k, v in pairs:
            b.put(k, v)
        self.db.write(b)

    def get(self, k):
        return self.db.get(k)

    def multi_get(self, ks):
        return self.db.multi_get(ks)

    def scan(self):
        n = 0
        for _ in self.db.items():
            n += 1
        return n

    def close(self):
        self.db.close()


class RocksDict(Strata):
    """rocksdict in raw mode; get, scan and close as Strata's."""

    name = "rocksdict"

    def __init__(self, path):
        import rocksdict

        self.mod = rocksdict
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_compression_type(rocksdict.DBCompressionType.none())
        self.db = rocksdict.Rdict(path, opts)

    def put_batch(self, pairs):
        b = self.mod.WriteBatch(raw_mode=True)
        for k, v in pairs:
            b.put(k, v)
        self.db.write(b)

    def multi_get(self, ks):
        return self.db.get(ks)


class Lmdb:
    name = "lmdb"

    def __init__(self, path):
        import lmdb

        self.env = lmdb.open(path, map_size=8 << 30, sync=False, metasync=False)

    def put_batch(self, pairs):
        with self.env.begin(write=True) as txn:
            for k, v in pairs:
                txn.put(k, v)

    def get(self, k):
        with self.env.begin() as txn:
            return txn.get(k)

    def multi_get(self, ks):
        with self.env.begin() as txn:
            return [txn.get(k) for k in ks]

    def scan(self):
        n = 0
        with self.env.begin() as txn:
            for _ in txn.cursor():
                n += 1
        return n

    def close(self):
        self.env.close()


ENGINES = {"strata": Strata, "rocksdict": RocksDict, "lmdb": Lmdb}


def run(engine, path, keys, value, gets):
    shutil.rmtree(path, ignore_errors=True)
    db = engine(path)
    out = {}
    t = time.perf_counter()
    for i in range(0, len(keys), 1000):
        db.put_batch((k, value) for k in keys[i : i + 1000])
    out["put (batches of 1000)"] = len(keys) / (time.perf_counter() - t)
    probe = random.Random(2).choices(keys, k=gets)
    t = time.perf_counter()
    for k in probe:
        assert db.get(k) is not None
    out["get"] = gets / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(0, gets, 100):
        db.multi_get(probe[i : i + 100])
    out["multi_get (100 keys)"] = gets / (time.perf_counter() - t)
    t = time.perf_counter()
    n = db.scan()
    assert n == len(keys), (engine.name, n)
    out["scan"] = n / (time.perf_counter() - t)
    db.close()
    shutil.rmtree(path, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num", type=int, default=1_000_000)
    ap.add_argument("--gets", type=int, default=500_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--engines", default="strata,rocksdict,lmdb")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    keys, value = keys_values(a.num, a.value_size)
    for r in range(a.rounds):
        for name in a.engines.split(","):
            path = os.path.join(a.dir, "pybench-" + name)
            res = run(ENGINES[name], path, keys, value, a.gets)
            print(f"round {r + 1} {name:10} " + "  ".join(f"{k}: {v:,.0f}/s" for k, v in res.items()), flush=True)


if __name__ == "__main__":
    main()
