"""Build PromQL selectors from untrusted values, so that no name can change a query's meaning.

Node names, namespaces and pool selectors reach the analyzer from users and from the cluster.
Pasted into a query as they are, a value such as ``x"} or vector(1) #`` would turn a selector
into a different query (PromQL injection), and an innocent ``gpu-node.1`` used in a regex
matcher would also match ``gpu-nodeX1``. Everything here is pure string building:

* :func:`quote` / :func:`escape_label_value` write a value as a PromQL string literal that the
  parser reads back byte for byte (backslash, double quote and newline escaped as the PromQL
  string grammar requires; other control characters too, so the query stays one line);
* :func:`regex_escape` / :func:`regex_alternation` turn exact values into an RE2 regex that
  matches exactly those values and nothing else (Prometheus and VictoriaMetrics anchor regex
  matchers at both ends; the alternation is grouped so that anchoring covers every branch);
* :func:`selector` assembles ``metric{label="value", ...}`` from keyword arguments, checking
  metric and label names against the Prometheus data model instead of escaping them (a name
  cannot be escaped, only rejected);
* :func:`duration` writes a time span as a PromQL duration (``[7d]``, ``offset 90s``).

The escaping is checked against a real Prometheus and a real VictoriaMetrics in
``tests/analyzer/test_promql.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

#: Valid label names (Prometheus data model). Names cannot be escaped inside a selector, so an
#: invalid one is rejected rather than quoted.
LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: Valid metric names (colons are reserved for recording rules but accepted by every engine).
METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")

MatchOp = Literal["=", "!=", "=~", "!~"]

# The escapes of Go's double-quoted strings (strconv.Unquote), which the PromQL lexer and
# MetricsQL both use. Backslash, double quote and newline are required (a raw newline ends the
# string with "unterminated quoted string"); the others keep the query on one line and readable.
_SIMPLE_ESCAPES = {
    "\\": "\\\\",
    '"': '\\"',
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\v": "\\v",
}
_NEEDS_ESCAPE = re.compile(r'[\\"\x00-\x1f\x7f]')

# Exactly the characters Go's regexp.QuoteMeta escapes: the RE2 metacharacters. Escaping
# anything else (as Python's re.escape does for "-", "#", " ", ...) is accepted by RE2 for
# punctuation but would be a needless dialect risk.
_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


def _check_text(value: str, *, what: str) -> None:
    # Lone surrogates (from os.fsdecode of bad bytes, for example) cannot be sent as UTF-8;
    # failing here names the value instead of failing deep inside the HTTP client.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} {value!r} is not valid Unicode text: {exc.reason}") from exc


def _escape_char(match: re.Match[str]) -> str:
    char = match.group(0)
    return _SIMPLE_ESCAPES.get(char) or f"\\x{ord(char):02x}"


def escape_label_value(value: str) -> str:
    r"""Escape ``value`` for use between double quotes in PromQL.

    Why not ``json.dumps`` or ``repr``: PromQL strings follow Go's quoting, where ``\u2028``
    style escapes of non-ASCII text are valid but noisy, and Python's ``repr`` may choose
    single quotes. This escapes only what the grammar needs (backslash, double quote, newline)
    plus the other ASCII control characters, and keeps all other Unicode as is.

    Args:
        value: Any text, typically a label value taken from a user or from the cluster.

    Returns:
        The escaped text, without the surrounding quotes.

    Raises:
        ValueError: ``value`` contains lone surrogates and cannot be encoded as UTF-8.
    """
    _check_text(value, what="label value")
    return _NEEDS_ESCAPE.sub(_escape_char, value)


def quote(value: str) -> str:
    """Return ``value`` as a double-quoted PromQL string literal (see :func:`escape_label_value`).

    Args:
        value: Any text.

    Returns:
        ``"..."`` that the PromQL parser reads back as exactly ``value``.
    """
    return f'"{escape_label_value(value)}"'


def regex_escape(value: str) -> str:
    r"""Escape ``value`` so that, as an RE2 regex, it matches exactly itself.

    Mirrors Go's ``regexp.QuoteMeta`` (the metacharacters ``\.+*?()|[]{}^$``), which is what
    Prometheus itself uses for the same purpose; control characters and Unicode pass through
    because RE2 matches them literally (quoting the regex as a PromQL string escapes them).

    Args:
        value: The exact text to match.

    Returns:
        An unquoted RE2 regex.
    """
    _check_text(value, what="label value")
    return _RE2_SPECIAL.sub(r"\\\1", value)


def regex_alternation(values: Iterable[str]) -> str:
    r"""Build an RE2 regex that matches exactly one of ``values`` (a set membership test).

    Why grouped: ``a|b`` is anchored by the engines as ``^(?:a|b)$``; grouping here keeps
    the meaning the same if a caller ever adds a prefix or suffix. Values are de-duplicated
    and sorted so the same set always gives the same query (stable for caches and tests).

    Args:
        values: The exact values; at least one. An empty string matches series *without* the
            label, as ``label=""`` does in PromQL.

    Returns:
        An unquoted RE2 regex such as ``(?:gpu-a|gpu\.b)`` (RE2 form, see
        :func:`regex_escape`).

    Raises:
        ValueError: ``values`` is empty (a regex matching nothing cannot be written portably,
            and ``=~""`` would silently match every series without the label), or is a
            single ``str`` (a common mistake that would match its characters one by one).
    """
    if isinstance(values, str):
        raise ValueError(f"expected a collection of values, got the string {values!r}")
    unique = sorted(set(values))
    if not unique:
        raise ValueError("cannot build a regex matcher from an empty set of values")
    return "(?:" + "|".join(regex_escape(v) for v in unique) + ")"


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher, for the cases a plain keyword argument to :func:`selector` can't say.

    Attributes:
        op: ``=``, ``!=``, ``=~`` or ``!~``.
        value: For ``=``/``!=``, the exact value. For ``=~``/``!~``, a regex that the caller
            vouches for (build it with :func:`regex_alternation` from untrusted values).
    """

    op: MatchOp
    value: str

    @classmethod
    def one_of(cls, values: Iterable[str]) -> Matcher:
        """Match any of the exact ``values`` (``=~`` with an escaped alternation)."""
        return cls("=~", regex_alternation(values))

    @classmethod
    def none_of(cls, values: Iterable[str]) -> Matcher:
        """Match none of the exact ``values`` (``!~`` with an escaped alternation)."""
        return cls("!~", regex_alternation(values))


def matcher(label: str, value: str | Iterable[str] | Matcher) -> str:
    """Render one matcher ``label<op>"value"``.

    Args:
        label: A label name; checked, not escaped.
        value: A ``str`` for equality, any other iterable of ``str`` for membership (see
            :func:`regex_alternation`), or a :class:`Matcher`.

    Returns:
        The matcher text, e.g. ``node=~"(?:a|b)"``.

    Raises:
        ValueError: Invalid label name, empty value set, or an unknown operator.
    """
    if not LABEL_NAME_RE.fullmatch(label):
        raise ValueError(f"invalid label name {label!r}: must match {LABEL_NAME_RE.pattern}")
    if isinstance(value, Matcher):
        if value.op not in ("=", "!=", "=~", "!~"):
            raise ValueError(f"invalid matcher operator {value.op!r} for label {label!r}")
        return f"{label}{value.op}{quote(value.value)}"
    if isinstance(value, str):
        return f"{label}={quote(value)}"
    return f"{label}=~{quote(regex_alternation(value))}"


def selector(metric: str | None = None, /, **matchers: str | Iterable[str] | Matcher) -> str:
    r"""Build an instant-vector selector from a metric name and label matchers.

    Keyword arguments are label names; their values are matched *literally*: a ``str`` with
    ``=``, a list/set/tuple of ``str`` with an anchored, escaped alternation (``=~``), and a
    :class:`Matcher` for ``!=``/``!~`` or a trusted regex. Label names that are not Python
    identifiers can be passed with ``**{"name": value}``; they are validated either way.

    Example (``MIG_INFO`` is migscope's ``migscope_mig_info``, from
    :mod:`migscope.analyzer._intake.dialect`)::

        selector(MIG_INFO, node=["gpu-a", "gpu.b"], namespace="ml")
        # migscope_mig_info{namespace="ml",node=~"(?:gpu-a|gpu\\.b)"}

    Args:
        metric: The metric name, or ``None`` for a selector of labels only (then at least one
            matcher is required, as PromQL demands).
        **matchers: Label name to value(s), rendered in sorted label order.

    Returns:
        The selector text.

    Raises:
        ValueError: An invalid metric or label name, an empty value set, or no metric and no
            matchers.
    """
    if metric is not None and not METRIC_NAME_RE.fullmatch(metric):
        raise ValueError(f"invalid metric name {metric!r}: must match {METRIC_NAME_RE.pattern}")
    parts = [matcher(label, matchers[label]) for label in sorted(matchers)]
    if metric is None:
        if not parts:
            raise ValueError("a selector needs a metric name or at least one label matcher")
        return "{" + ",".join(parts) + "}"
    return metric + ("{" + ",".join(parts) + "}" if parts else "")


_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1))


def duration(span: float | timedelta) -> str:
    """Write a time span as a PromQL duration (``7d``, ``90s``, ``1500ms``).

    Why the largest exact unit and never ``w``/``y``: ``7d`` reads better than ``604800s``
    and every engine (Prometheus 2.x, VictoriaMetrics, Thanos, Mimir) parses single-unit
    ``ms``/``s``/``m``/``h``/``d`` durations, while compound durations came later to some.

    Args:
        span: Seconds (float) or a :class:`datetime.timedelta`; positive, whole milliseconds.

    Returns:
        The duration text.

    Raises:
        ValueError: ``span`` is not positive, not finite, or not a whole number of ms.
    """
    seconds = span.total_seconds() if isinstance(span, timedelta) else float(span)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a PromQL duration must be positive and finite, got {seconds!r} s")
    millis = round(seconds * 1000)
    if abs(millis - seconds * 1000) > 1e-6 * max(1.0, seconds * 1000):
        raise ValueError(f"a PromQL duration is whole milliseconds, got {seconds!r} s")
    for unit, size in _UNITS:
        if millis % size == 0:
            return f"{millis // size}{unit}"
    raise AssertionError("unreachable: every whole number of ms is a multiple of 1 ms")
