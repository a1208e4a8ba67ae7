"""Optional libraries read only when the process has loaded them already.

numpy answers some vectorisable steps 10-100x faster than Python (the token lengths gathered
from 100,000 token ids: 0.13 ms against 3.3 ms), but importing it takes about 60 ms: more than
a whole cold history fit. So the library never imports it for this; where a process has (an
application using numpy, quicktok, a gateway, which loads it as it starts: :func:`load_numpy`),
the step is read with it, with the same result.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["load_numpy", "loaded_numpy"]


def load_numpy() -> bool:
    """Import numpy now when it is installed (a server starting: its 60 ms once, where each request
    would gain): whether it is loaded."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def loaded_numpy() -> Any:
    """numpy if this process has imported it (quicktok does), else None: a process that has not
    does not load it for this. Imported again by name, which waits for another thread's import
    of it to finish."""
    if sys.modules.get("numpy") is None:  # not imported (or its import blocked)
        return None
    import numpy

    return numpy
