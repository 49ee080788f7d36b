"""Strata: an embedded, persistent, ordered key-value store.

    import strata_kv

    with strata_kv.DB("/tmp/example-db", write_buffer_size=8 << 20) as db:
        db[b"apple"] = b"red"
        with db.write_batch() as batch:      # written atomically at the end of the block
            batch.put(b"banana", b"yellow")
            batch.delete(b"apple")
        for key, value in db.items(start=b"a", stop=b"c"):
            print(key, value)

Keys and values are ``bytes``. Every call that may touch the disk releases
the GIL, and a ``DB`` may be shared by threads.
"""

from ._strata_kv import (
    DB,
    BusyError,
    CorruptionError,
    Error,
    InvalidArgumentError,
    IOError,
    NotFoundError,
    NotSupportedError,
    RangeIterator,
    RawIterator,
    Snapshot,
    WriteBatch,
    destroy,
)

__all__ = [
    "DB",
    "WriteBatch",
    "Snapshot",
    "RawIterator",
    "RangeIterator",
    "destroy",
    "Error",
    "CorruptionError",
    "InvalidArgumentError",
    "BusyError",
    "IOError",
    "NotFoundError",
    "NotSupportedError",
]
