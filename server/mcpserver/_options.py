"""Frozen sets of keyword options, as the lab's plans are (matrix/model.py): each option named once, as a field with
its type and default, made with keywords only, checked when made, never changed.

    @frozen_options(frozen=True, kw_only=True)
    class ServeOptions:
        port: int = 3000

Type checkers see a frozen keyword-only dataclass, which is what these behave as: an unknown or mistyped option
is an error where it is given. At run time they are made without the dataclasses module, which builds classes
with exec and costs a server's start-up (tests/unit/test_startup.py): every field has a default, __init__ takes
keywords only (TypeError for an option the class does not have), `__post_init__` checks them, and setting one
afterwards raises FrozenOptionsError. replace() makes a changed copy.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dataclasses import FrozenInstanceError as FrozenOptionsError
    from dataclasses import dataclass as frozen_options
    from dataclasses import fields, replace
else:
    class FrozenOptionsError(AttributeError):
        """An option set after its options were made."""

    def frozen_options(*, frozen=True, kw_only=True):
        """The class, with __init__, __repr__ and __eq__ made from its annotated fields, and frozen."""
        def made(cls):
            defaults = {}
            for klass in reversed(cls.__mro__):
                for name in vars(klass).get("__annotations__", {}):
                    defaults[name] = getattr(klass, name)
            cls.__init__ = _init(cls.__name__, defaults)
            cls.__dataclass_fields__ = defaults  # what fields() and replace() read
            cls.__setattr__ = cls.__delattr__ = _frozen
            cls.__repr__ = _repr
            cls.__eq__ = _eq
            cls.__hash__ = None
            return cls
        return made

    def _init(name, defaults):
        def __init__(self, **given):
            unknown = given.keys() - defaults.keys()
            if unknown:
                raise TypeError(f"{name} has no option {sorted(unknown)[0]!r}")
            for option, default in defaults.items():
                object.__setattr__(self, option, given.get(option, default))
            check = getattr(self, "__post_init__", None)
            if check is not None:
                check()
        return __init__

    def _frozen(self, name, *value):
        raise FrozenOptionsError(f"cannot set {name!r}: {type(self).__name__} is frozen (replace() makes a copy)")

    def _repr(self):
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__dataclass_fields__)
        return f"{type(self).__name__}({shown})"

    def _eq(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__dataclass_fields__)

    def fields(options):
        """The options' field names (what dataclasses.fields gives, by name)."""
        return tuple(_Field(name) for name in options.__dataclass_fields__)

    def replace(options, **changes):
        """A copy of `options` with `changes`, checked as any is."""
        kept = {name: getattr(options, name) for name in options.__dataclass_fields__}
        return type(options)(**{**kept, **changes})

    class _Field:
        __slots__ = ("name",)

        def __init__(self, name):
            self.name = name

__all__ = ["FrozenOptionsError", "fields", "frozen_options", "replace"]
