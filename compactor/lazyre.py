"""Patterns compiled on first use.

Ground floor: no imports from the rest of the package. A module-level pattern written as
``NAME = lazy_regex(r"...", flags)`` (or ``lazy_re`` for the standard ``re`` module) costs nothing
when the module is imported; it is compiled the first time one of its methods is called, and from
then on its methods are the compiled pattern's own bound methods (no extra call on the way). A
process that never uses a pattern (a short input, a command that needs another stage) never pays
for compiling it: with the ``regex`` module that is about a millisecond per pattern.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LazyPattern", "lazy_re", "lazy_regex", "use_compiler"]

_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "splititer",
            "scanner")


_COMPILERS: dict[str, Any] = {}  # module name -> compile(pattern, flags) used instead of module.compile


def use_compiler(module: str, compile: Any) -> None:
    """Compile the lazy patterns of ``module`` ("regex" or "re") with ``compile(pattern, flags)``,
    which must return what ``module.compile`` would (e.g. rebuilt from a cached program)."""
    _COMPILERS[module] = compile


class LazyPattern:
    """Stands for ``module.compile(pattern, flags)``; ``compiled()`` is the real pattern. Every
    other attribute (``groups``, ``groupindex``, ``flags``) is the compiled pattern's."""

    def __init__(self, module: str, pattern: Any, flags: int = 0):
        self.pattern = pattern
        self._module = module
        self._flags = flags

    def compiled(self) -> Any:
        d = self.__dict__
        p = d.get("_compiled")
        if p is None:
            make = _COMPILERS.get(self._module)
            if make is None:
                make = importlib.import_module(self._module).compile
            p = make(self.pattern, self._flags)
            # bound methods in the instance shadow the class's compiling stand-ins below
            for name in _METHODS:
                method = getattr(p, name, None)
                if method is not None:
                    d[name] = method
            d["_compiled"] = p
        return p

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_compiled", "_module", "_flags", "pattern"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"lazy_{self._module}({self.pattern!r}, {self._flags!r})"

    def __reduce__(self):
        return (LazyPattern, (self._module, self.pattern, self._flags))


def _first_use(name: str):
    def call(self: LazyPattern, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.compiled(), name)(*args, **kwargs)

    call.__name__ = name
    return call


for _name in _METHODS:
    setattr(LazyPattern, _name, _first_use(_name))
del _name


def lazy_regex(pattern: Any, flags: int = 0) -> LazyPattern:
    """``regex.compile(pattern, flags)``, on first use."""
    return LazyPattern("regex", pattern, flags)


def lazy_re(pattern: Any, flags: int = 0) -> LazyPattern:
    """``re.compile(pattern, flags)``, on first use."""
    return LazyPattern("re", pattern, flags)
