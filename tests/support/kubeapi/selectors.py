"""Label and field selectors with kube-apiserver's grammar and matching rules (test fake).

What is reproduced (``k8s.io/apimachinery/pkg/labels`` and ``.../fields``):

* label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``,
  ``!k``, ``k>1``, ``k<1``, joined by commas (AND). ``!=`` and ``notin`` also match objects
  that lack the key, exactly as upstream. Malformed selectors raise a 400 ``BadRequest``.
* field selectors: ``f=v``, ``f==v``, ``f!=v`` joined by commas, with ``\\,``/``\\=``
  escapes; only the fields a type supports (see :mod:`.resources`); an unsupported field is a
  400 ``field label not supported: <f>``. Booleans compare as ``"true"``/``"false"``, and a
  missing field as ``""``.
* ``metav1.LabelSelector`` objects (``matchLabels``/``matchExpressions``) as PDBs use them.

Not reproduced: label key/value syntax checks inside selectors (a selector naming an
impossible key simply matches nothing here, where upstream would refuse it with a 400).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import bad_request
from .resources import ResourceType

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "field_value",
    "match_label_selector_object",
    "parse_field_selector",
    "parse_label_selector",
]

_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|>|<|[^\s!=(),<>]+)")


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # "exists", "!exists", "=", "!=", "in", "notin", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if not present or value is None:
            return False
        try:
            number = int(value)
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.op == ">" else number < bound


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[_Requirement, ...] = ()
    text: str = ""

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` is selected."""
        found = labels or {}
        return all(r.matches(found) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """True for the selector that selects everything."""
        return not self.requirements


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse the ``labelSelector`` query parameter.

    Raises:
        ApiError: 400 ``BadRequest`` when the text is not a selector.
    """
    if text is None or not text.strip():
        return LabelSelector()
    tokens = _tokens(text)
    pos = 0
    requirements: list[_Requirement] = []

    def fail(why: str) -> None:
        raise bad_request(f"unable to parse requirement: {why}")

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            fail(f"unexpected end of selector {text!r}")
        pos += 1
        return tokens[pos - 1]

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    while True:
        first = take()
        if first == "!":
            key = take()
            _check_identifier(key, fail)
            requirements.append(_Requirement(key, "!exists"))
        else:
            _check_identifier(first, fail)
            op = peek()
            if op is None or op == ",":
                requirements.append(_Requirement(first, "exists"))
            elif op in ("=", "==", "!="):
                take()
                nxt = peek()
                value = "" if nxt is None or nxt == "," else take()
                if value in ("(", ")", "!", "=", "==", "!=", "<", ">"):
                    fail(f"found '{value}', expected: identifier")
                requirements.append(_Requirement(first, "!=" if op == "!=" else "=", (value,)))
            elif op in ("in", "notin"):
                take()
                if take() != "(":
                    fail(f"found '{tokens[pos - 1]}', expected: '(' after '{op}'")
                values: list[str] = []
                while True:
                    item = take()
                    if item == ")":
                        break
                    if item == ",":
                        continue
                    values.append(item)
                if not values:
                    fail(f"for '{op}', 'notin' operators, values set can't be empty")
                requirements.append(_Requirement(first, op, tuple(values)))
            elif op in (">", "<"):
                take()
                bound = take()
                if not re.fullmatch(r"-?\d+", bound):
                    fail(f"for 'Gt', 'Lt' operators, the value must be an integer: {bound!r}")
                requirements.append(_Requirement(first, op, (bound,)))
            else:
                fail(f"found '{op}', expected: ',', '!=', '==', '=', 'in', 'notin', '<', '>'")
        nxt = peek()
        if nxt is None:
            break
        if take() != ",":
            fail(f"found '{tokens[pos - 1]}', expected: ','")
    return LabelSelector(tuple(requirements), text)


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        match = _TOKEN.match(text, pos) if pos < len(text) else None
        if match is None:
            return tokens
        tokens.append(match.group(1))
        pos = match.end()


def _check_identifier(token: str, fail: Callable[[str], None]) -> None:
    if token in ("(", ")", ",", "=", "==", "!=", "!", "<", ">"):
        fail(f"found '{token}', expected: identifier")


def match_label_selector_object(
    selector: Mapping[str, Any] | None, labels: Mapping[str, str]
) -> bool:
    """Match a ``metav1.LabelSelector`` object; ``None`` matches nothing, ``{}`` everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


@dataclass(frozen=True)
class _FieldTerm:
    field: str
    value: str
    negate: bool


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector; the empty selector matches everything."""

    terms: tuple[_FieldTerm, ...] = ()

    def matches(self, rtype: ResourceType, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` (of type ``rtype``) is selected."""
        for term in self.terms:
            equal = field_value(rtype, obj, term.field) == term.value
            if equal == term.negate:
                return False
        return True

    @property
    def empty(self) -> bool:
        """True for the selector that selects everything."""
        return not self.terms


def parse_field_selector(text: str | None, rtype: ResourceType) -> FieldSelector:
    """Parse the ``fieldSelector`` query parameter for ``rtype``.

    Raises:
        ApiError: 400 for a malformed term or a field the type does not support.
    """
    if text is None or not text.strip():
        return FieldSelector()
    terms: list[_FieldTerm] = []
    for raw in _split_unescaped(text, ","):
        if not raw:
            continue
        for op in ("!=", "==", "="):
            index = _find_unescaped(raw, op)
            if index >= 0:
                field, value = raw[:index], _unescape(raw[index + len(op) :])
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{raw}'")
        field = field.strip()
        supported = ("metadata.name", "metadata.namespace", *rtype.field_labels)
        if field not in supported:
            raise bad_request(f"field label not supported: {field}")
        terms.append(_FieldTerm(field, value, op == "!="))
    return FieldSelector(tuple(terms))


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _find_unescaped(text: str, op: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(op, i):
            return i
        i += 1
    return -1


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def field_value(rtype: ResourceType, obj: Mapping[str, Any], field: str) -> str:
    """The string a field selector compares for ``field`` of ``obj``, as upstream's GetAttrs.

    Booleans are ``"true"``/``"false"`` (an absent ``spec.unschedulable`` is ``"false"``);
    absent strings are ``""``; an event's ``source`` is ``source.component``.
    """
    if rtype.kind == "Event" and rtype.group == "" and field == "source":
        field = "source.component"
    current: Any = obj
    for part in field.split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    if field in ("spec.unschedulable", "spec.hostNetwork"):
        return "true" if current is True else "false"
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)
