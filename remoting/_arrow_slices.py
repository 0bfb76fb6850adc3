"""`slices`: values cut out of one buffer of received bytes into one Arrow array, copied once,
with no Python object per value (the RocketMQ codec's bodies, topics and properties, and the
queue service's bodies, as the Spark sources read them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["slices"]


def slices(buffer: pa.Buffer, begins: npt.NDArray[np.int64], ends: npt.NDArray[np.int64],
           kind: pa.DataType) -> pa.Array:
    """Return the values ``buffer[begins[i]:ends[i]]`` (in increasing, disjoint order) as
    one array of ``kind`` (binary or string), copied once.

    An array over the buffer whose offsets alternate between a value's start and end (a
    value, then the bytes up to the next value) is taken at its even entries.
    """
    count = len(begins)
    if count == 0:
        return pa.array([], kind)
    large = ends[-1] >= 2**31 - 1
    bounds = np.empty(2 * count, dtype=np.int64 if large else np.int32)
    bounds[0::2] = begins
    bounds[1::2] = ends
    wide = pa.large_binary() if kind == pa.binary() else pa.large_string()
    raw = pa.Array.from_buffers(wide if large else kind, 2 * count - 1,
                                [None, pa.py_buffer(bounds), buffer])
    taken = raw.take(pa.array(np.arange(0, 2 * count - 1, 2, dtype=np.int64)))
    return taken.cast(kind) if large else taken
