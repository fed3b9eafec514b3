"""Checking a configuration text: YAML, then the schema, each problem with its position.

Positions come from `yaml.compose` (node marks, 0-based, reported 1-based) looked up by the
JSON path jsonschema reports for each error.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

from ..storable import first_bad_text, text_problem
from .schema import DEPRECATED, SCHEMA, Deprecated

MAX_BYTES = 64 * 1024
# Aliases can make a small text expand exponentially; nothing real comes near this.
MAX_NODES = 20_000
# PyYAML composes and constructs recursively: a deep text would exhaust the stack. The
# schema needs 5 levels; this leaves room for any real file.
MAX_DEPTH = 32

Path = tuple[str | int, ...]



@dataclass(frozen=True)
class Problem:
    path: str
    line: int | None
    column: int | None
    message: str  # a whole sentence, position included

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "column": self.column,
                "message": self.message}


@dataclass(frozen=True)
class Checked:
    text: str
    digest: str
    document: dict[str, Any] | None = None
    problems: tuple[Problem, ...] = ()
    deprecations: tuple[Deprecated, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def message(self) -> str:
        return self.problems[0].message if self.problems else ""


def normalize(text: str) -> str:
    """One spelling per content: browsers send CRLF, editors add or drop the last newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").rstrip()
    return text + "\n" if text else ""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def check(raw: str) -> Checked:
    text = normalize(raw)
    sha = digest(text)
    try:
        too_deep = _too_deep(text)
        if too_deep is not None:
            return Checked(text, sha, problems=(too_deep,))
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        return Checked(text, sha, problems=(_yaml_problem(exc),))
    except yaml.YAMLError as exc:
        return Checked(text, sha, problems=(Problem("", None, None, f"invalid YAML: {exc}"),))

    nodes = _NodeMap()
    try:
        nodes.walk(root, ())
    except _TooLarge:
        return Checked(text, sha, problems=(Problem(
            "", None, None,
            f"the configuration is too large once its aliases are expanded "
            f"(over {MAX_NODES} values)"),))
    problems = list(nodes.duplicates)
    problems += _schema_problems(data, nodes)
    problems += _text_problems(data, nodes)
    if problems:
        return Checked(text, sha, problems=tuple(_ordered(problems)))
    document: dict[str, Any] = data or {}
    return Checked(text, sha, document=document, deprecations=tuple(deprecated_in(document)))


def characters_problem(text: str) -> str | None:
    """Why a text cannot even be checked (nor stored, nor recorded), or None."""
    why = text_problem(text)
    return f"The configuration {why}" if why else None


def deprecated_in(document: dict[str, Any]) -> Iterator[Deprecated]:
    for item in DEPRECATED:
        section = document.get(item.path[0])
        if isinstance(section, dict) and item.path[1] in section:
            yield item


def format_path(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


# --- positions ---------------------------------------------------------------------------

class _TooLarge(Exception):
    pass


@dataclass
class _NodeMap:
    """Each value's node and each key's node, by JSON path."""

    values: dict[Path, yaml.Node] = field(default_factory=dict)
    keys: dict[Path, yaml.Node] = field(default_factory=dict)
    duplicates: list[Problem] = field(default_factory=list)
    visited: int = 0

    def walk(self, node: yaml.Node | None, path: Path) -> None:
        if node is None:
            return
        self.visited += 1
        if self.visited > MAX_NODES:
            raise _TooLarge
        self.values.setdefault(path, node)
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                if key is None or key == "<<":  # complex keys and merges: no own position
                    self.walk(value_node, path)
                    continue
                child = (*path, key)
                if key in seen:
                    line, column = _position(key_node)
                    self.duplicates.append(Problem(
                        format_path(child), line, column,
                        f"field {format_path(child)} is given twice"
                        f"{_where(line, column)}"))
                seen.add(key)
                self.keys.setdefault(child, key_node)
                self.walk(value_node, child)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self.walk(item, (*path, index))

    def value_position(self, path: Path) -> tuple[int | None, int | None]:
        # A path the text does not spell out (merged keys) takes its nearest parent's place.
        for end in range(len(path), -1, -1):
            node = self.values.get(path[:end])
            if node is not None:
                return _position(node)
        return None, None

    def key_position(self, path: Path) -> tuple[int | None, int | None]:
        node = self.keys.get(path)
        return _position(node) if node is not None else self.value_position(path[:-1])


def _too_deep(text: str) -> Problem | None:
    """The first collection nested deeper than MAX_DEPTH, found from the event stream
    (which PyYAML produces without recursion) before anything is composed."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
                return Problem("", line, column,
                               f"the configuration nests deeper than {MAX_DEPTH} levels"
                               f"{_where(line, column)}")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def _text_problems(data: Any, nodes: _NodeMap) -> list[Problem]:
    # Escapes ("\0", "\ud800") spell characters the text itself may not hold.
    found = first_bad_text(data)
    if found is None:
        return []
    path, why = found
    line, column = nodes.value_position(path)
    subject = f"field {format_path(path)}" if path else "the configuration"
    return [Problem(format_path(path), line, column,
                    f"{subject} {why}{_where(line, column)}")]


def _position(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _where(line: int | None, column: int | None) -> str:
    return f" (line {line} column {column})" if line is not None else ""


def _yaml_problem(exc: yaml.MarkedYAMLError) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "unreadable"
    if mark is None:
        return Problem("", None, None, f"invalid YAML: {problem}")
    line, column = mark.line + 1, mark.column + 1
    return Problem("", line, column, f"invalid YAML at line {line} column {column}: {problem}")


def _ordered(problems: list[Problem]) -> Iterator[Problem]:
    seen: set[str] = set()
    for problem in sorted(problems, key=lambda p: (p.line or 0, p.column or 0, p.path)):
        if problem.message not in seen:
            seen.add(problem.message)
            yield problem


# --- schema errors in words --------------------------------------------------------------

@functools.cache
def _validator() -> Any:
    # Imported when first needed: the app starts even where jsonschema is missing.
    from jsonschema import Draft202012Validator
    return Draft202012Validator(SCHEMA)


def _schema_problems(data: Any, nodes: _NodeMap) -> list[Problem]:
    problems: list[Problem] = []
    for error in _validator().iter_errors(data):
        problems.extend(_explain(error, nodes))
    return problems


def _explain(error: ValidationError, nodes: _NodeMap) -> Iterator[Problem]:
    path: Path = tuple(error.absolute_path)
    kind = error.validator
    if kind == "additionalProperties":
        known = sorted((error.schema.get("properties") or {}).keys())
        for extra in sorted(set(error.instance) - set(known), key=str):
            child = (*path, extra)
            line, column = nodes.key_position(child)
            close = difflib.get_close_matches(str(extra), known, n=1, cutoff=0.6)
            hint = f", did you mean {format_path((*path, close[0]))}?" if close else (
                f"; allowed: {', '.join(known)}" if known else "")
            yield Problem(format_path(child), line, column,
                          f"field {format_path(child)} is unknown{hint}{_where(line, column)}")
        return
    if kind == "required":
        line, column = nodes.value_position(path)
        for name in error.validator_value:
            if isinstance(error.instance, dict) and name not in error.instance:
                child = (*path, name)
                yield Problem(format_path(child), line, column,
                              f"field {format_path(child)} is required{_where(line, column)}")
        return
    line, column = nodes.value_position(path)
    subject = f"field {format_path(path)}" if path else "the configuration"
    yield Problem(format_path(path), line, column,
                  f"{subject} {_requirement(error)}{_where(line, column)}")


_TYPE_NAMES = {"object": "a mapping", "array": "a list", "string": "a string",
               "integer": "an integer", "number": "a number", "boolean": "true or false",
               "null": "empty"}


def _requirement(error: ValidationError) -> str:
    kind, expected, value = error.validator, error.validator_value, error.instance
    if kind == "type":
        wanted = [expected] if isinstance(expected, str) else [t for t in expected if t != "null"]
        names = " or ".join(_TYPE_NAMES.get(t, t) for t in wanted)
        return f"must be {names}, not {_describe(value)}"
    if kind == "enum":
        choices = ", ".join("null" if c is None else str(c) for c in expected)
        return f"must be one of {choices}, not {_show(value)}"
    if kind == "pattern":
        what = error.schema.get("description", f"match {expected}")
        return f"must be {what}, not {_show(value)}"
    if kind == "maxLength":
        return f"must be at most {expected} characters long"
    if kind == "uniqueItems":
        return "lists the same item twice"
    return f"is invalid: {error.message}"


def _describe(value: Any) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, date):
        return f"{value.isoformat()} (a date)"
    if isinstance(value, int | float):
        return f"{value} (a number)"
    return f"{_show(value)} (a string)" if isinstance(value, str) else type(value).__name__


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict | list):
        return _describe(value)
    return repr(value) if isinstance(value, str) else str(value)
