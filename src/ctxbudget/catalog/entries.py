"""A catalog's models, each built from its entry when it is first read.

The bundled catalog lists about 1,500 models; a process usually reads one or two. Building every
:class:`~.values.ModelSpec` (a frozen dataclass with its prices, cache rules and sources) took
about 7 ms of each process's first fit or count, as long as encoding a 30,000-token text: the
resolution rules only need each entry's ``(provider, id)``, which :attr:`ModelEntries.keys` gives
without building anything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar, overload

from .values import ModelSpec

__all__ = ["Deferred", "ModelEntries", "SpecsById"]

Key = tuple[str, str]  # (provider, id) as the entry spells them
# One lock for every catalog's first builds (one a position, a few microseconds each): reentrant,
# as a merged catalog's entry is built by its part's, and an override's by reading its base; held
# by no instance, so a catalog still copies (copy.deepcopy).
_BUILDING = threading.RLock()
K = TypeVar("K")
V = TypeVar("V")


class Deferred(Mapping[K, V]):
    """A mapping made by ``make`` when it is first read: a catalog's aliases and match rules,
    which resolving an id the catalog lists never reads (the bundled catalog's 633 alias lists
    and 251 rules were most of what its index held)."""

    def __init__(self, make: Callable[[], Mapping[K, V]]) -> None:
        self._make = make
        self._made: Mapping[K, V] | None = None

    def _mapping(self) -> Mapping[K, V]:
        made = self._made
        if made is None:  # two threads may both make it: equal values
            made = self._made = self._make()
        return made

    def __getitem__(self, key: K) -> V:
        return self._mapping()[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())

    def __contains__(self, key: object) -> bool:
        return key in self._mapping()

    def __eq__(self, other: object) -> bool:
        return dict(self._mapping()) == (dict(other) if isinstance(other, Mapping) else other)

    __hash__ = None  # type: ignore[assignment]  # a mapping: unhashable, as dict is

    def __repr__(self) -> str:
        return repr(dict(self._mapping()))


class ModelEntries(Sequence[ModelSpec]):
    """Models in priority order; ``build(i)`` makes the ``i``-th spec, once, when it is read."""

    def __init__(self, keys: Iterable[Key], build: Callable[[int], ModelSpec]) -> None:
        self._keys = tuple(keys)
        self._build = build
        self._specs: list[ModelSpec | None] = [None] * len(self._keys)

    @classmethod
    def of(cls, specs: Iterable[ModelSpec]) -> ModelEntries:
        """Specs already built."""
        built = tuple(specs)
        entries = cls(((s.provider, s.id) for s in built), built.__getitem__)
        entries._specs = list(built)
        return entries

    @classmethod
    def joined(cls, parts: Iterable[tuple[ModelEntries, Iterable[int]]]) -> ModelEntries:
        """The chosen positions of each part, in order (nothing is built)."""
        picks = [(part, i) for part, positions in parts for i in positions]
        return cls((part.keys[i] for part, i in picks), lambda n: picks[n][0][picks[n][1]])

    @property
    def keys(self) -> tuple[Key, ...]:
        """Each model's ``(provider, id)``, in order."""
        return self._keys

    def __len__(self) -> int:
        return len(self._keys)

    @overload
    def __getitem__(self, index: int) -> ModelSpec: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[ModelSpec]: ...

    def __getitem__(self, index: int | slice) -> ModelSpec | Sequence[ModelSpec]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError(f"model position {index} is out of range")
        spec = self._specs[position]
        if spec is None:
            # built once, under a lock: two threads that each built one held equal specs that are
            # not the same object, and resolution tells an id's readings apart by identity (an
            # alias read as 'scoped' by its provider rule when first resolved from many threads)
            with _BUILDING:
                spec = self._specs[position]
                if spec is None:
                    spec = self._specs[position] = self._build(position)
        return spec

    def __iter__(self) -> Iterator[ModelSpec]:
        return (self[i] for i in range(len(self)))


class SpecsById(Mapping[str, Sequence[ModelSpec]]):
    """The models by lower-cased id, in priority order, built only when an id is looked up."""

    def __init__(self, models: ModelEntries) -> None:
        self._models = models
        self._positions: dict[str, list[int]] = {}
        for position, (_, model_id) in enumerate(models.keys):
            self._positions.setdefault(model_id.lower(), []).append(position)

    def __getitem__(self, name: str) -> Sequence[ModelSpec]:
        return [self._models[i] for i in self._positions[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._positions)

    def __len__(self) -> int:
        return len(self._positions)

    def __contains__(self, name: object) -> bool:
        return name in self._positions
