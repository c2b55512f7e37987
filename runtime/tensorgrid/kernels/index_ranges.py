"""The range check of the integer indices that gathers, segment sums and sparse updates receive.

It runs on every sparse step, once per table, so it costs one reduction: signed indices read
as unsigned turn every negative index into one larger than any valid limit, so a single
``max`` finds both kinds of bad index; the bad value itself is looked for only then.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

_UNSIGNED_OF = {np.dtype(np.int32): np.uint32, np.dtype(np.int64): np.uint64}


def first_bad_index(indices: Any, limit: int) -> Optional[int]:
    """None when every value of ``indices`` (an int32/int64 array of numpy or cupy) lies in
    ``[0, limit)``; else a bad one: the smallest when some are negative, else the largest."""
    if indices.size == 0:
        return None
    unsigned = _UNSIGNED_OF.get(np.dtype(indices.dtype))
    if unsigned is not None and limit >= 0 and int(indices.view(unsigned).max()) < limit:
        return None
    low, high = int(indices.min()), int(indices.max())
    if low < 0:
        return low
    return high if high >= limit else None
