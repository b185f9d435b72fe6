"""The public API, checked the way httpx checks its own.

``__all__`` is exactly the sorted public names (the lazy re-exports
included), and every type of this package that a public signature takes or
returns can be imported from the package root.
"""

from __future__ import annotations
import __future__

import ast
import importlib
import inspect
import pkgutil
import re
import types
from typing import Any

import agentscope_mem0

# Names __init__ needs for itself, not part of the API.
_PLUMBING = {"TYPE_CHECKING", "Any", "importlib"}
# Public modules whose names users import from them rather than the root.
_PUBLIC_MODULES = ("agentscope_mem0.service", "agentscope_mem0.backends", "agentscope_mem0.testing")


def _public_names(module: types.ModuleType) -> list[str]:
    return [
        name
        for name, value in vars(module).items()
        if (not name.startswith("_") or name == "__version__")
        and name not in _PLUMBING
        and not isinstance(value, types.ModuleType | __future__._Feature)
    ]


def test_all_is_the_sorted_public_names() -> None:
    names = agentscope_mem0.__all__
    for name in names:  # resolve every lazy re-export
        getattr(agentscope_mem0, name)
    assert names == sorted(names)
    assert names == sorted(_public_names(agentscope_mem0))


def test_dir_lists_the_api_before_anything_is_imported() -> None:
    assert set(agentscope_mem0.__all__) <= set(dir(agentscope_mem0))


def _package_types() -> dict[str, Any]:
    """Every class and type alias defined in a module of the package, by name."""
    found: dict[str, Any] = {}
    prefix = agentscope_mem0.__name__ + "."
    for info in pkgutil.walk_packages(agentscope_mem0.__path__, prefix):
        if ".cli" in info.name:
            continue  # the command line is an entry point, not an API
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            defined_here = getattr(value, "__module__", None) == module.__name__
            is_alias = name[:1].isupper() and type(value).__module__ == "typing"
            if (inspect.isclass(value) and defined_here) or (
                is_alias and name in module.__dict__.get("__all__", ())
            ):
                found.setdefault(name, value)
    return found


def _annotation_names(annotation: Any) -> set[str]:
    if annotation is inspect.Parameter.empty:
        return set()
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    try:
        tree = ast.parse(str(text), mode="eval")
    except SyntaxError:
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} | {
        node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
    }


def _signatures(obj: Any) -> list[inspect.Signature]:
    """``obj``'s own signature, and for a class its public methods' and properties'."""
    members = [obj]
    if inspect.isclass(obj):
        members = [obj.__init__]
        for name, member in vars(obj).items():
            if name.startswith("_"):
                continue
            if isinstance(member, property):
                members.append(member.fget)
            elif isinstance(member, classmethod | staticmethod):
                members.append(member.__func__)
            elif inspect.isfunction(member):
                members.append(member)
    signatures = []
    for member in members:
        try:
            signatures.append(inspect.signature(member))
        except (TypeError, ValueError):
            continue
    return signatures


def _unexported_types(module: types.ModuleType, names: list[str]) -> dict[str, set[str]]:
    ours = _package_types()
    exported = set(agentscope_mem0.__all__) | set(names)
    missing: dict[str, set[str]] = {}
    for name in names:
        for signature in _signatures(getattr(module, name)):
            used = _annotation_names(signature.return_annotation)
            for parameter in signature.parameters.values():
                used |= _annotation_names(parameter.annotation)
            lacking = {n for n in used if n in ours and n not in exported}
            if lacking:
                missing.setdefault(name, set()).update(lacking)
    return missing


def test_every_type_a_public_signature_takes_is_exported() -> None:
    assert _unexported_types(agentscope_mem0, list(agentscope_mem0.__all__)) == {}
    for module_name in _PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        assert _unexported_types(module, list(module.__all__)) == {}, module_name


def test_the_checker_sees_a_signature_type() -> None:
    # Mem0Middleware's constructor takes a WorkingStore; were it not exported, it would show.
    middleware = agentscope_mem0.Mem0Middleware
    used = set()
    for signature in _signatures(middleware):
        for parameter in signature.parameters.values():
            used |= _annotation_names(parameter.annotation)
    assert {"WorkingStore", "ClientState", "Mem0MiddlewareParameters"} <= used
    assert {"Mem0MiddlewareKeywords", "Unpack"} <= used  # .local(**keywords)
    assert "WorkingStore" in _package_types()


def test_the_constructor_keeps_every_keyword_of_agentscopes_builtin() -> None:
    from agentscope.middleware import Mem0Middleware as BuiltIn

    theirs = inspect.signature(BuiltIn.__init__).parameters
    ours = inspect.signature(agentscope_mem0.Mem0Middleware.__init__).parameters
    for name, parameter in theirs.items():
        if name == "self":
            continue
        assert name in ours, name
        assert ours[name].kind is parameter.kind, name
    # The defaults that differ on purpose: writes in the background, and our tool text.
    differing = {
        name
        for name, parameter in theirs.items()
        if name != "self" and ours[name].default != parameter.default
    }
    assert differing <= {"await_write", "tool_instructions"}
    # Its keywords come first, in its order; this package's own options come
    # after them as one model.
    assert tuple(ours)[: len(theirs)] == tuple(theirs)
    assert "parameters" in ours


def test_every_library_exception_is_in_the_one_tree_and_exported() -> None:
    from agentscope_mem0 import _exceptions

    raised = {
        name: value
        for name, value in _package_types().items()
        if inspect.isclass(value) and issubclass(value, BaseException)
    }
    assert set(raised) == set(_exceptions.__all__)
    tree = _exceptions.__doc__ or ""
    for name, error in raised.items():
        assert error.__module__ == _exceptions.__name__, name
        assert issubclass(error, _exceptions.Mem0MiddlewareError), name
        assert getattr(agentscope_mem0, name) is error, name
        assert re.search(rf"(── |^    ){name}\b", tree, re.MULTILINE), f"{name} not in the tree"
