"""The code of one experiment stage, identified by what it computes rather than by where its text lies.

A kept result (:mod:`kept`) is valid while the code of ITS stage is unchanged: the trainer and its rewards
for a training run, the evaluator and the system's generation for an evaluation. Each stage names its
modules (:mod:`steps`); their identity is the set of their functions and classes, each one's identity:

- its syntax tree without docstrings (comments, blank lines, formatting and line numbers never reach the
  tree);
- the values of the module-level constants it reads (a string, a number, a tuple, a compiled pattern, ...:
  by value, however they are spelled or built: ``"[A-Z]"`` or a character class built from
  ``OPTION_LETTERS``; imported ones too), the syntax of any other module-level assignment it reads, and
  what an imported name it reads is bound to, where the name says something else (an alias).

Top-level objects that are not plain constants (a registration such as ``TASK = QuestionTask(NAME,
TEMPLATE, generate, solve)``, a table of functions) count by their syntax whether or not a definition reads
them.

Imports count for nothing (a lazy one in a function's body neither): what they bring is counted in the module
that defines it, when that module is part of the stage, or by value, when it is a constant. Nor does an ``if
__name__ == "__main__":`` block, which never runs when a stage imports the module, or a constant nothing
reads. Definitions are compared by name, not by file, so a module that moves or a function that moves between
two of the stage's modules leaves the identity as it was; a changed body, constant, signature or name changes
it, and :func:`code_changes` names the functions and classes that differ. Top-level statements other than
definitions, assignments and imports count under ``<top-level of MODULE>``.

The syntax trees are Python's (``ast.dump``): another Python version may spell them differently, and a
result is then recomputed, never wrongly restored.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterable, Mapping
from typing import Any

# A definition name -> the identities of the definitions of that name in the stage (a sorted list: the
# same name, ``logger`` say, stands in many modules).
CodeIdentity = dict[str, list[str]]

_PLAIN = (str, bytes, int, float, bool, type(None))


def _plain_value(value: Any) -> str | None:
    """A canonical text of a constant's value, or None when the value is not a plain constant."""
    if isinstance(value, _PLAIN):
        return repr(value)
    if isinstance(value, re.Pattern):
        return f"re.compile({value.pattern!r}, {int(value.flags)})"
    if isinstance(value, (tuple, list)):
        parts = [_plain_value(v) for v in value]
        return None if None in parts else f"{type(value).__name__}({', '.join(parts)})"  # type: ignore[arg-type]
    if isinstance(value, (set, frozenset)):
        parts = [_plain_value(v) for v in value]
        return None if None in parts else f"set({', '.join(sorted(parts))})"  # type: ignore[arg-type]
    if isinstance(value, dict):
        items = [(_plain_value(k), _plain_value(v)) for k, v in value.items()]
        if any(k is None or v is None for k, v in items):
            return None
        return "dict(" + ", ".join(sorted(f"{k}: {v}" for k, v in items)) + ")"
    return None


class _NoDocstrings(ast.NodeTransformer):
    """Removes the docstring of every function, class and module in a tree, and every import (a lazy one in
    a function's body too: what it brings is counted where it is defined)."""

    def _strip(self, node: Any) -> Any:
        self.generic_visit(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        return node

    def _drop(self, node: ast.AST) -> None:
        return None

    visit_Module = visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _strip  # noqa: N815
    visit_Import = visit_ImportFrom = _drop  # noqa: N815


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _target_names(node: ast.stmt) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
    names: list[str] = []
    for target in targets:
        names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return names


def _bound_name(value: Any) -> str | None:
    """What an imported name is bound to, without the module path (a module moves, its contents stay):
    a function's or class's qualified name, a module's last name; None for anything else."""
    if inspect.ismodule(value):
        return "module " + value.__name__.rsplit(".", 1)[-1]
    qualified = getattr(value, "__qualname__", None)
    return f"{type(value).__name__} {qualified}" if isinstance(qualified, str) else None


def _read_globals(node: ast.AST, module: Any, assigned: Mapping[str, list[str]]) -> list[str]:
    """What a definition reads from its module's globals, as text: plain constants by value (also one
    attribute down a module: ``prompts.ROLE``), other module-level assignments of this module by syntax,
    and what an imported name is bound to (``parse = answer_from_completion`` is not ``parse =
    parse_completion``)."""
    found: set[str] = set()
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    for name in names:
        if name not in vars(module):
            continue  # a local, an argument, a builtin
        value = vars(module)[name]
        plain = _plain_value(value)
        if plain is not None:
            found.add(f"{name} = {plain}")
        elif name in assigned:
            found.update(assigned[name])
        elif (bound := _bound_name(value)) is not None and bound.split()[-1].split(".")[-1] != name:
            found.add(f"{name} -> {bound}")  # an alias: the name says something else than the object
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            owner = vars(module).get(n.value.id)
            if inspect.ismodule(owner) and (plain := _plain_value(getattr(owner, n.attr, None))) is not None:
                found.add(f"{n.value.id}.{n.attr} = {plain}")
    return sorted(found)


def module_definitions(module_name: str) -> dict[str, str]:
    """The identities of one module's functions and classes, and of its top-level objects that are not
    plain constants (a registration ``TASK = QuestionTask(...)``, a table of functions), by syntax (module
    docstring): name -> identity. Plain constants count where a definition reads them.

    The module is imported (the constants a definition reads are read from it).
    """
    module = importlib.import_module(module_name)
    tree = _NoDocstrings().visit(ast.parse(inspect.getsource(module)))
    assigned: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for name in _target_names(node):
                assigned.setdefault(name, []).append(ast.dump(node))
    found: dict[str, str] = {}
    loose: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = _digest("\n".join([ast.dump(node), *_read_globals(node, module, assigned)]))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for name in _target_names(node):
                if _plain_value(vars(module).get(name)) is None:
                    found[name] = _digest("\n".join([*assigned[name], *_read_globals(node, module, {})]))
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)):
            continue
        elif isinstance(node, ast.If) and (_only_imports(node) or _is_main_guard(node)):
            continue  # `if TYPE_CHECKING: import ...`; `if __name__ == "__main__":` never runs on import
        else:
            loose.append(ast.dump(node))
    if loose:
        found[f"<top-level of {module_name}>"] = _digest("\n".join(loose))
    return found


def _is_main_guard(node: ast.If) -> bool:
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _only_imports(node: ast.If) -> bool:
    return all(isinstance(n, (ast.Import, ast.ImportFrom, ast.Pass)) for n in (*node.body, *node.orelse))


def expand(modules: Iterable[str]) -> list[str]:
    """Module names, with each ``PACKAGE.*`` replaced by the package and every module below it."""
    found: set[str] = set()
    for name in modules:
        if not name.endswith(".*"):
            found.add(name)
            continue
        package = importlib.import_module(name[:-2])
        found.add(package.__name__)
        prefix = package.__name__ + "."
        found.update(m.name for m in pkgutil.walk_packages(package.__path__, prefix))
    return sorted(found)


def code_identity(modules: Iterable[str]) -> tuple[CodeIdentity, dict[str, str]]:
    """The identity of a stage's code (its modules by importable name, ``PACKAGE.*`` for a package and all
    below it) and where each name is defined now (name -> the modules, for messages)."""
    identity: dict[str, list[str]] = {}
    where: dict[str, list[str]] = {}
    for module_name in expand(modules):
        for name, digest in module_definitions(module_name).items():
            identity.setdefault(name, []).append(digest)
            where.setdefault(name, []).append(module_name)
    return {n: sorted(d) for n, d in sorted(identity.items())}, {n: ", ".join(m) for n, m in where.items()}


def code_changes(recorded: Mapping[str, list[str]], current: Mapping[str, list[str]]) -> list[str]:
    """The definition names whose identities differ between a recorded and the current code (either side
    missing one included), sorted."""
    return sorted(
        n for n in set(recorded) | set(current) if list(recorded.get(n, [])) != list(current.get(n, []))
    )
