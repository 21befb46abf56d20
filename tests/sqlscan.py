"""A static check that sqlq never builds SQL out of values: every parameter is bound.

The rule, precisely, for every ``.py`` file under ``sqlq/``:

1. The first argument of every ``.execute(...)`` / ``.executemany(...)`` call
   is *static*: a string literal; a statement from ``queries.sql`` (``Q[...]``,
   ``self.Q[...]``, ``self._store.Q[...]``); psycopg's composition of literal SQL with
   ``sql.Identifier``/``sql.Literal`` (which quote what they are given);
   a migration's ``.sql`` (files shipped in the package); a function parameter
   (SQL handed through, e.g. the application's own statement in
   ``Transaction.execute``, whose values the caller binds); a name whose every
   assignment in the function (or module) is static; or one of the two allowed
   formatted forms below.
2. Any formatted string whose literal text looks like SQL (an upper-case
   statement keyword at its start, or FROM, WHERE, AND, LIMIT... inside) is one
   of the allowed forms, wherever it appears:

   * ``f"PRAGMA name = {X}"`` where X is a constant: a literal, a module-level
     name bound only to a constant expression, or a local bound only to a
     choice between literals (``"FULL" if durable else "NORMAL"``);
   * ``f"SAVEPOINT {n}"``, ``f"ROLLBACK TO {n}"``, ``f"RELEASE {n}"`` where n is a
     local bound only to an f-string of literals and ``secrets.token_hex(...)``.

   ``%`` formatting, ``.format()`` and ``+`` concatenation of SQL are never allowed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

_SQL_START = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|SAVEPOINT|ROLLBACK|RELEASE|"
    r"BEGIN|COMMIT|END|WITH|REPLACE|ATTACH|DETACH|VACUUM|ANALYZE|REINDEX)\b")
_SQL_INSIDE = re.compile(
    r"\b(FROM|WHERE|VALUES|SET|INTO|JOIN|AND|OR|LIMIT|LIKE|ORDER BY|GROUP BY)\b")
_TRANSACTION_NAMES = ("SAVEPOINT ", "ROLLBACK TO ", "RELEASE ")


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def _literal_text(node: ast.AST) -> str | None:
    """The constant text of a formatted string (f-string parts, % or .format template)."""
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values
                       if isinstance(v, ast.Constant) and isinstance(v.value, str))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        for side in (node.left, node.right):
            if isinstance(side, ast.Constant) and isinstance(side.value, str):
                return side.value
            inner = _literal_text(side)
            if inner is not None:
                return inner
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "format" and isinstance(node.func.value, ast.Constant) \
            and isinstance(node.func.value.value, str):
        return node.func.value.value
    return None


def looks_like_sql(text: str) -> bool:
    return bool(_SQL_START.match(text) or _SQL_INSIDE.search(text))


class _Scope:
    """Assignments and parameters of one function (or of the module)."""

    def __init__(self, node: ast.AST, parent: _Scope | None) -> None:
        self.parent = parent
        self.params: set[str] = set()
        self.assigned: dict[str, list[ast.AST]] = {}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                self.params.add(a.arg)
            for a in (args.vararg, args.kwarg):
                if a is not None:
                    self.params.add(a.arg)
        body = node.body if isinstance(node.body, list) else [node.body]  # type: ignore[attr-defined]
        for stmt in body:
            for sub in _walk_same_scope(stmt):
                if isinstance(sub, ast.Assign):
                    for target in sub.targets:
                        if isinstance(target, ast.Name):
                            self.assigned.setdefault(target.id, []).append(sub.value)
                elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name) \
                        and sub.value is not None:
                    self.assigned.setdefault(sub.target.id, []).append(sub.value)
                elif isinstance(sub, (ast.For, ast.AsyncFor, ast.comprehension)) \
                        and isinstance(sub.target, ast.Name):
                    self.assigned.setdefault(sub.target.id, []).append(ast.Constant(None))

    def lookup(self, name: str) -> tuple[str, list[ast.AST]] | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.params:
                return "param", []
            if name in scope.assigned:
                return "assigned", scope.assigned[name]
            scope = scope.parent
        return None


def _walk_same_scope(node: ast.AST) -> list[ast.AST]:
    """node and its descendants, not entering nested functions or classes."""
    out = [node]
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        out.extend(_walk_same_scope(child))
    return out


def _names(node: ast.AST) -> bool:
    """A name or a chain of attributes of one (``self._store``)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


class _Checker:
    def __init__(self, file: str, tree: ast.Module) -> None:
        self.file = file
        self.findings: list[Finding] = []
        self.module = _Scope(tree, None)
        self._visit(tree, self.module)

    def _visit(self, node: ast.AST, scope: _Scope) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                self._visit(child, _Scope(child, scope))
                continue
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                    and child.func.attr in ("execute", "executemany") and child.args \
                    and not self._static(child.args[0], scope, depth=0):
                self._report(child, f"{child.func.attr}() of SQL that is not static: "
                                        f"{ast.unparse(child.args[0])[:80]}")
            text = _literal_text(child)
            if text is not None and looks_like_sql(text) and not self._allowed_format(child,
                                                                                      scope):
                self._report(child, f"SQL built by formatting: {ast.unparse(child)[:80]}")
            self._visit(child, scope)

    def _report(self, node: ast.AST, what: str) -> None:
        finding = Finding(self.file, getattr(node, "lineno", 0), what)
        if finding not in self.findings:
            self.findings.append(finding)

    # -- what counts as static --

    def _static(self, node: ast.AST, scope: _Scope, depth: int) -> bool:
        if depth > 10:
            return False
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (str, type(None)))
        if isinstance(node, ast.Subscript) and (
                (isinstance(node.value, ast.Name) and node.value.id == "Q")
                or (isinstance(node.value, ast.Attribute) and node.value.attr == "Q"
                    and _names(node.value.value))):
            return True  # a statement from queries.sql (a store's Q: Q, self.Q, self._store.Q)
        if self._composed(node, depth):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "sql" \
                and isinstance(node.value, ast.Name) and node.value.id == "migration":
            return True  # migrations/NNNN_*.sql, shipped in the package
        if isinstance(node, ast.JoinedStr):
            return self._allowed_format(node, scope)
        if isinstance(node, ast.Name):
            found = scope.lookup(node.id)
            if found is None:
                return False
            kind, values = found
            return kind == "param" or all(self._static(v, scope, depth + 1) for v in values)
        return False

    def _composed(self, node: ast.AST, depth: int) -> bool:
        """psycopg's SQL composition, which quotes what it is given (PostgreSQL's SET takes no
        bound parameters): ``sql.SQL(<literal>)``, ``sql.Identifier(...)``,
        ``sql.Literal(...)``, and ``.format(...)``/``.join(...)`` of a composed SQL whose
        every argument is composed too (a comprehension's element is what is checked)."""
        if depth > 10 or not isinstance(node, ast.Call) \
                or not isinstance(node.func, ast.Attribute):
            return False
        func = node.func
        if isinstance(func.value, ast.Name) and func.value.id == "sql":
            if func.attr == "SQL":
                return len(node.args) == 1 and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str)
            return func.attr in ("Identifier", "Literal")
        if func.attr not in ("format", "join") or not self._composed(func.value, depth + 1):
            return False
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(arg, (ast.GeneratorExp, ast.ListComp)):
                arg = arg.elt
            if not self._composed(arg, depth + 1):
                return False
        return True

    def _constant(self, node: ast.AST, scope: _Scope, depth: int = 0) -> bool:
        """A value fixed in the source: literals, arithmetic on them, a choice of literals."""
        if depth > 10:
            return False
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float, str)) and not isinstance(node.value, bool)
        if isinstance(node, ast.BinOp):
            return self._constant(node.left, scope, depth + 1) and \
                self._constant(node.right, scope, depth + 1)
        if isinstance(node, ast.IfExp):
            return self._constant(node.body, scope, depth + 1) and \
                self._constant(node.orelse, scope, depth + 1)
        if isinstance(node, ast.Name):
            found = scope.lookup(node.id)
            if found is None or found[0] == "param":
                return False
            return all(self._constant(v, scope, depth + 1) for v in found[1])
        return False

    def _internal_name(self, node: ast.AST, scope: _Scope) -> bool:
        """A local bound only to f"<literal>{secrets.token_hex(n)}"."""
        if not isinstance(node, ast.Name):
            return False
        found = scope.lookup(node.id)
        if found is None or found[0] == "param" or not found[1]:
            return False
        for value in found[1]:
            if not isinstance(value, ast.JoinedStr):
                return False
            for part in value.values:
                if isinstance(part, ast.Constant):
                    continue
                call = part.value if isinstance(part, ast.FormattedValue) else None
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "token_hex"
                        and isinstance(call.func.value, ast.Name)
                        and call.func.value.id == "secrets"):
                    return False
        return True

    def _allowed_format(self, node: ast.AST, scope: _Scope) -> bool:
        if not isinstance(node, ast.JoinedStr):
            return False  # % formatting, .format() and + never build SQL
        text = _literal_text(node) or ""
        values = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
        if text.startswith("PRAGMA "):
            return all(self._constant(v, scope) for v in values)
        if text.startswith(_TRANSACTION_NAMES) and len(values) == 1:
            return self._internal_name(values[0], scope)
        return False


def scan_source(source: str, file: str = "<source>") -> list[Finding]:
    return _Checker(file, ast.parse(source)).findings


def scan_package(directory: Path) -> list[Finding]:
    findings: list[Finding] = []
    for path in sorted(directory.rglob("*.py")):
        findings += scan_source(path.read_text(), path.name)
    return findings
