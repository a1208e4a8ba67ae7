import inspect

import ctxbudget


def test_all_lists_exactly_the_public_names() -> None:
    public = {
        name
        for name in dir(ctxbudget)
        if not name.startswith("_") and not inspect.ismodule(getattr(ctxbudget, name))
    }
    assert set(ctxbudget.__all__) - {"__version__"} == public
    for name in ctxbudget.__all__:
        assert hasattr(ctxbudget, name)
