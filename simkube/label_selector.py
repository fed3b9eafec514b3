"""Label selectors parsed as the API server parses them (apimachinery's labels.Parse): the same
lexer and grammar, so the same selectors are accepted (``a in ()``, ``a==``) or refused
(``x=y,``), with the same messages, which reach people as they are.

Grammar: requirements separated by commas; each is ``key``, ``!key``, ``key op value`` with
op one of ``= == != > <``, or ``key in (v, ...)`` / ``key notin (v, ...)``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .errors import ApiError
from .util import JSON

_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),><")
_SYMBOLS = {")": "CLOSE", ",": "COMMA", "!": "NOT", "==": "==", "=": "=", ">": ">", "<": "<",
            "!=": "!=", "(": "OPEN"}
_KEYWORDS = ("in", "notin")
_OPERATORS = {"in": "in", "notin": "notin", "=": "=", "==": "=", "!=": "!=", ">": "gt",
              "<": "lt"}
_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(f"^{_NAME}$")
_VALUE = f"({_NAME})?"
_VALUE_RE = re.compile(f"^{_VALUE}$")
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN}$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        has = self.key in labels
        val = labels.get(self.key)
        if self.op == "=":
            return has and val == self.values[0]
        if self.op == "!=":
            return not has or val != self.values[0]
        if self.op == "in":
            return has and val in self.values
        if self.op == "notin":
            return not has or val not in self.values
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        try:
            num = int(val or "")
        except ValueError:
            return False
        return num > int(self.values[0]) if self.op == "gt" else num < int(self.values[0])


class _Refused(Exception):
    """One requirement cannot be parsed (the message says why, as the server does)."""


# --- lexing -------------------------------------------------------------------------------

def _lex(text: str) -> list[tuple[str, str]]:
    """(token, literal) pairs, ending with ("END", "")."""
    items: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            items.append(("END", ""))
            return items
        if text[i] in _SPECIAL:
            # The longest symbol: "!=" and "==" are one token; "=(" is "=" then "(".
            buffer, found = "", None
            while i < n and text[i] in _SPECIAL:
                if buffer + text[i] in _SYMBOLS:
                    buffer += text[i]
                    found = (_SYMBOLS[buffer], buffer)
                elif found is not None:
                    break
                else:
                    buffer += text[i]
                i += 1
            items.append(found or ("ERROR", f"error expected: keyword found '{buffer}'"))
            continue
        start = i
        while i < n and text[i] not in _WHITESPACE and text[i] not in _SPECIAL:
            i += 1
        word = text[start:i]
        items.append((word if word in _KEYWORDS else "IDENT", word))


# --- validation -----------------------------------------------------------------------------

def _regex_error(message: str, regex: str, *examples: str) -> str:
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{regex}')"


def _key_problems(key: str) -> list[str]:
    """validation.IsQualifiedName."""
    name_error = _regex_error("must consist of alphanumeric characters, '-', '_' or '.', and "
                              "must start and end with an alphanumeric character", _NAME,
                              "MyName", "my.name", "123-abc")
    parts = key.split("/")
    problems: list[str] = []
    if len(parts) > 2:
        return [f"a qualified name {name_error} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                problems.append("prefix part must be no more than 253 characters")
            if not _SUBDOMAIN_RE.match(prefix):
                problems.append("prefix part " + _regex_error(
                    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                    "characters, '-' or '.', and must start and end with an alphanumeric "
                    "character", _SUBDOMAIN, "example.com"))
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _NAME_RE.match(name):
        problems.append(f"name part {name_error}")
    return problems


def _value_problems(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _VALUE_RE.match(value):
        problems.append(_regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character", _VALUE,
            "MyValue", "my_value", "12345"))
    return problems


def _invalid(path: str, value: str, detail: str) -> str:
    """field.Invalid(...).Error(); the server's parse has no field path: "<nil>"."""
    return f"{path}: Invalid value: {json.dumps(value)}: {detail}"


def _aggregate(errors: list[str]) -> str:
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# --- parsing --------------------------------------------------------------------------------

class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def lookahead(self, values: bool) -> tuple[str, str]:
        """In a value position "in" and "notin" are plain identifiers."""
        token, literal = self.items[min(self.position, len(self.items) - 1)]
        if values and token in _KEYWORDS:
            token = "IDENT"
        return token, literal

    def consume(self, values: bool) -> tuple[str, str]:
        item = self.lookahead(values)
        self.position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self.lookahead(True)
            if token == "END":
                return requirements
            if token not in ("IDENT", "NOT"):
                raise _Refused(f"found '{literal}', expected: !, identifier, or "
                               "'end of string'")
            try:
                requirements.append(self.requirement())
            except _Refused as exc:
                raise _Refused(f"unable to parse requirement: {exc}") from None
            token, literal = self.consume(True)
            if token == "END":
                return requirements
            if token != "COMMA":
                raise _Refused(f"found '{literal}', expected: ',' or 'end of string'")
            following, literal = self.lookahead(True)
            if following not in ("IDENT", "NOT"):
                raise _Refused(f"found '{literal}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        op = None
        token, key = self.consume(True)
        if token == "NOT":
            op = "!"
            token, key = self.consume(True)
        if token != "IDENT":
            raise _Refused(f"found '{key}', expected: identifier")
        problems = _key_problems(key)
        if problems:
            raise _Refused(_invalid("<nil>", key, "; ".join(problems)))
        if self.lookahead(True)[0] in ("END", "COMMA") and op is None:
            op = "exists"
        if op is not None:
            return Requirement(key, op)
        token, literal = self.consume(False)
        if token not in _OPERATORS:
            raise _Refused(f"found '{literal}', expected: in, notin, =, ==, !=, gt, lt")
        op = _OPERATORS[token]
        values = self.value_set() if op in ("in", "notin") else self.exact_value()
        errors = []
        if op in ("gt", "lt"):
            errors += [_invalid(f"values[{i}]", v, "for 'Gt', 'Lt' operators, the value must "
                                "be an integer") for i, v in enumerate(values)
                       if not re.fullmatch(r"[+-]?[0-9]+", v)]
        for i, value in enumerate(values):
            problems = _value_problems(value)
            if problems:
                errors.append(_invalid(f"values[{i}][{key}]", value, "; ".join(problems)))
        if errors:
            raise _Refused(_aggregate(errors))
        return Requirement(key, op, values)

    def value_set(self) -> tuple[str, ...]:
        token, literal = self.consume(True)
        if token != "OPEN":
            raise _Refused(f"found '{literal}' expected: '('")
        token, literal = self.lookahead(True)
        if token == "CLOSE":  # "()"
            self.consume(True)
            return ("",)
        if token not in ("IDENT", "COMMA"):
            raise _Refused(f"found '{literal}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.consume(True)[0] != "CLOSE":
            raise _Refused(f"found '{literal}', expected: ')'")
        return values

    def identifiers(self) -> tuple[str, ...]:
        """What is between the parentheses; empty entries ("(,a)", "(a,,b)") are ""."""
        found: list[str] = []
        while True:
            token, literal = self.consume(True)
            if token == "IDENT":
                found.append(literal)
                following, literal = self.lookahead(True)
                if following == "CLOSE":
                    return tuple(sorted(set(found)))
                if following != "COMMA":
                    raise _Refused(f"found '{literal}', expected: ',' or ')'")
            elif token == "COMMA":
                if not found:
                    found.append("")
                following, _ = self.lookahead(True)
                if following == "CLOSE":
                    found.append("")
                    return tuple(sorted(set(found)))
                if following == "COMMA":
                    self.consume(True)
                    found.append("")
            else:
                raise _Refused(f"found '{literal}', expected: ',', or identifier")

    def exact_value(self) -> tuple[str, ...]:
        token, _ = self.lookahead(True)
        if token in ("END", "COMMA"):  # "a=": the empty value
            return ("",)
        token, literal = self.consume(True)
        if token != "IDENT":
            raise _Refused(f"found '{literal}', expected: identifier")
        return (literal,)


def parse_labels(selector: str | None) -> list[Requirement]:
    """The requirements of a label selector, or the API server's 400 for one it refuses."""
    if not selector:
        return []
    try:
        return _Parser(selector).parse()
    except _Refused as exc:
        raise ApiError(400, str(exc), reason="BadRequest") from None


def labels_match(reqs: list[Requirement], obj: JSON) -> bool:
    if not reqs:
        return True
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)
