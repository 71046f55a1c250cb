"""torch.export.load without asking typing the same question a million times.

torch's deserializer (torch/_export/serde/serialize.py, `_dict_to_dataclass`) calls
`typing.get_type_hints(cls, globalns=vars(schema))` for every dataclass it rebuilds: 277k
calls for the model zoo's 29 archives, 29 s of the 41 s `torch.export.load` took on them
(cProfile, test/Inputs/make_references.py). The hints of a schema class never change, so
`install()` gives that module a `typing` whose `get_type_hints` remembers them per class;
every other name is typing's own. Nothing else in torch or in the caller's process changes,
and the archives load to the same ExportedProgram.

This file imports nothing from graph_opt, so that scripts which run before the package is
built (the test fixtures under test/Inputs) can load it by path.
"""
import types
import typing

_MARK = "_graph_opt_cached_type_hints"


class _TypingWithCachedHints(types.ModuleType):
    """typing, except that get_type_hints of a class with no local namespace is remembered."""

    def __init__(self):
        super().__init__("typing")
        # typing's names as attributes of this module (no __getattr__ on each of the
        # deserializer's millions of lookups), get_type_hints replaced
        for name, value in vars(typing).items():
            if not name.startswith("__"):
                setattr(self, name, value)
        setattr(self, _MARK, True)
        self._hints = {}
        self.get_type_hints = self._cached_type_hints

    def __getattr__(self, name):  # a name typing gains later
        return getattr(typing, name)

    def _cached_type_hints(self, obj, globalns=None, localns=None, include_extras=False):
        if localns is not None or not isinstance(obj, type):
            return typing.get_type_hints(obj, globalns, localns, include_extras)
        key = (obj, id(globalns), include_extras)
        hit = self._hints.get(key)
        if hit is None:
            # the namespace is kept with the answer, so that its id is never reused
            hit = (typing.get_type_hints(obj, globalns, localns, include_extras), globalns)
            self._hints[key] = hit
        return dict(hit[0])


def install() -> bool:
    """Makes torch.export.load's deserializer cache its type hints. Returns whether it did (a
    torch whose serializer has no module-level `typing` is left as it is)."""
    try:
        from torch._export.serde import serialize
    except ImportError:
        return False
    current = getattr(serialize, "typing", None)
    if current is None:
        return False
    if getattr(current, _MARK, False):
        return True
    if current is not typing:
        return False
    serialize.typing = _TypingWithCachedHints()
    return True
