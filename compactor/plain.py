"""Small records without :mod:`dataclasses`.

Ground floor: no imports from the rest of the package. ``compactor trim`` runs on every tool call
of an agent; importing :mod:`dataclasses` (which imports :mod:`inspect`) and generating each
class's methods costs more than a short trim does. A :class:`Plain` subclass declares its fields
once, in ``__slots__``, with defaults in ``_defaults`` (a :class:`Factory` makes a fresh value per
instance), and gets what the dataclass gave: keyword or positional construction, ``repr``,
equality by fields, ``replace`` and ``as_dict``; a :class:`FrozenPlain` is read-only and
hashable.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

__all__ = ["Factory", "FrozenPlain", "Plain"]


class Factory:
    """A default made fresh for every instance (``Factory(list)``)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]):
        self.make = make


class Plain:
    __slots__ = ()
    _defaults: ClassVar[dict[str, Any]] = {}
    _norepr: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *args: Any, **kwargs: Any):
        names = self.__slots__
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes at most {len(names)} positional arguments")
        put = object.__setattr__
        for name, value in zip(names, args):
            put(self, name, value)
        defaults = self._defaults
        for name in names[len(args):]:
            if name in kwargs:
                value = kwargs.pop(name)
            elif name in defaults:
                value = defaults[name]
                if type(value) is Factory:
                    value = value.make()
            else:
                raise TypeError(f"{type(self).__name__}() missing argument {name!r}")
            put(self, name, value)
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected arguments {', '.join(sorted(kwargs))}")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def replace(self, **changes: Any):
        return type(self)(**{**self.as_dict(), **changes})

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__ if n not in self._norepr)
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment] - mutable: compared by value, so not hashable

    def __getstate__(self):
        return self._values()

    def __setstate__(self, state) -> None:
        for name, value in zip(self.__slots__, state):
            object.__setattr__(self, name, value)


class FrozenPlain(Plain):
    """A read-only :class:`Plain`, hashable by its fields."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")
