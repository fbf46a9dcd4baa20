"""How migscope names a place in a YAML file and a wrong value in one-line error messages.

mig-parted configs and analyzer policy files are both read strictly, and their errors should
read the same way: ``mig-configs.custom[0]``, ``idle.activity_p95_below``, "got the string
'yes'" — what YAML made of the text matters more than Python's repr of it.

Every YAML text the product reads (policy, schedule, mig-parted configs and the ConfigMap
``migscope apply`` reads from the cluster, scenarios, exporter settings and web config) goes
through :func:`compose_node`, the one composer with limits: a text size, a nesting depth, a
number of alias uses and a number of values after aliases are expanded. So an alias bomb
("billion laughs") or ``[[[[...]]]]`` ten thousand deep is refused in one line, in bounded
memory and without ``RecursionError``, before anything is built from it. The three readers on
top of it (:func:`compose_with_lines`, :func:`load_strict`, or the node tree itself) all refuse
duplicate keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import yaml
from yaml.constructor import SafeConstructor

from migscope.core._errors import UserError

MAX_YAML_CHARS = 4 * 1024 * 1024
"""The longest YAML text read (4 MiB). Real configs are a few KiB; a ConfigMap holds 1 MiB."""

MAX_YAML_DEPTH = 64
"""The deepest nesting of lists and mappings; real configs nest fewer than 10 levels."""

MAX_YAML_ALIASES = 100
"""The most alias uses (``*name``, ``<<: *name``) in one text."""

MAX_YAML_NODES = 100_000
"""The most values (keys, items, scalars) in one text, counting each alias as its expansion."""

Loc: TypeAlias = tuple[str | int, ...]
"""A path into a YAML document: mapping keys and list positions."""

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def yaml_quote(text: str) -> str:
    """A YAML double-quoted scalar; everything outside printable ASCII is escaped."""
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def describe_location(loc: Loc) -> str:
    """``mig-configs.custom[0]``: keys with dots or odd characters quoted, positions in brackets."""
    if not loc:
        return "the top level"
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{yaml_quote(part)}]"
    return text


def describe_value(value: object) -> str:
    """A wrong value as YAML read it: "the boolean true", "the string 'x'", "a list"."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def line_for(loc: Loc, lines: Mapping[Loc, int]) -> int | None:
    """The line of ``loc``, or of its nearest ancestor that appears in the text."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


class FileProblemError(UserError, ValueError):
    """A file that cannot be used; the message is ``FILE:LINE: what``.

    The one shape of user-facing file errors (policy, schedule, exposition files), so that
    every one reads the same and editors can jump to the line.

    Attributes:
        source: The file (or the name given to a text).
        line: 1-based line of the problem, or None when it belongs to no line.
        reason: What is wrong, without the place.
    """

    def __init__(self, reason: str, *, source: str, line: int | None = None) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")


class YamlProblem(UserError, ValueError):
    """A YAML document that cannot be read as plain data: the problem and its line.

    Callers turn it into their own error type (``PolicyError``, ``ScheduleError``), which
    adds the file name, so that every strict YAML reader reports the same way.

    Attributes:
        message: The problem in one line, e.g. ``YAML syntax error: expected ','``.
        line: 1-based line of the problem, or None when it belongs to no line.
        problem: The problem without the ``YAML syntax error:`` prefix, for readers that
            word syntax errors their own way (``invalid YAML: ...``).
    """

    def __init__(self, message: str, line: int | None = None, *, problem: str | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.problem = problem if problem is not None else message


def yaml_problem(exc: yaml.YAMLError, text: str) -> YamlProblem:
    """PyYAML's multi-line error text as one line with its line number."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        context = ""
        if exc.context and exc.problem:
            at = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
            context = f" ({exc.context}{at})"
        line = mark.line + 1 if mark is not None else None
        return YamlProblem(f"YAML syntax error: {what}{context}", line, problem=what)
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        what = f"{exc.reason} (character {exc.character!r})"
        return YamlProblem(f"YAML syntax error: {what}", line, problem=what)
    what = " ".join(str(exc).split())  # pragma: no cover - PyYAML marks its errors
    return YamlProblem(f"YAML syntax error: {what}", problem=what)  # pragma: no cover


class _LimitedLoader(yaml.SafeLoader):
    """A safe loader whose composer counts depth, nodes and alias uses as it goes.

    PyYAML's composer recurses once per nesting level, and an alias is one node however much
    it stands for: the counts stop both kinds of bomb while the text is being read, before
    the tree (or anything built from it) grows.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self._aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise YamlProblem(
                    f"YAML has more than {MAX_YAML_ALIASES} aliases (*name); write the values out",
                    line,
                )
            return super().compose_node(parent, index)
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise YamlProblem(f"YAML has more than {MAX_YAML_NODES:,} values", line)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise YamlProblem(f"YAML nests deeper than {MAX_YAML_DEPTH} levels", line)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def compose_node(text: str) -> yaml.Node | None:
    """YAML text as a node tree, within the limits; ``None`` for an empty document.

    The one way the product reads YAML: text over :data:`MAX_YAML_CHARS`, nesting over
    :data:`MAX_YAML_DEPTH`, more than :data:`MAX_YAML_ALIASES` alias uses, more than
    :data:`MAX_YAML_NODES` values once aliases are expanded, or an alias inside its own
    anchor are refused. Safe tags only (no Python objects).

    Raises:
        YamlProblem: a syntax error or a limit passed, with its line.
    """
    if len(text) > MAX_YAML_CHARS:
        raise YamlProblem(
            f"YAML text of {len(text):,} characters is over the limit of {MAX_YAML_CHARS:,}"
        )
    loader = _LimitedLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as exc:
        raise yaml_problem(exc, text) from exc
    except RecursionError:  # pragma: no cover - the depth limit comes first
        raise YamlProblem(f"YAML nests deeper than {MAX_YAML_DEPTH} levels") from None
    finally:
        loader.dispose()
    if root is not None:
        _check_expansion(root)
    return root


def compose_documents(text: str) -> list[yaml.Node]:
    """Every document of a YAML stream (``---`` between them) as node trees, within the limits.

    Kubernetes manifests put several objects in one file; the limits of :func:`compose_node`
    hold for the whole stream (the counts run across documents). Empty documents are left out.

    Raises:
        YamlProblem: a syntax error or a limit passed, with its line.
    """
    if len(text) > MAX_YAML_CHARS:
        raise YamlProblem(
            f"YAML text of {len(text):,} characters is over the limit of {MAX_YAML_CHARS:,}"
        )
    loader = _LimitedLoader(text)
    documents: list[yaml.Node] = []
    try:
        while loader.check_node():
            root = loader.get_node()
            if root is not None:
                documents.append(root)
    except yaml.YAMLError as exc:
        raise yaml_problem(exc, text) from exc
    except RecursionError:  # pragma: no cover - the depth limit comes first
        raise YamlProblem(f"YAML nests deeper than {MAX_YAML_DEPTH} levels") from None
    finally:
        loader.dispose()
    for root in documents:
        _check_expansion(root)
    return documents


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a tree whose aliases expand past :data:`MAX_YAML_NODES` values, or loop.

    Iterative, and each shared node is sized once, so checking costs the size of the text,
    not of the expansion.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # the ancestors of the node being looked at
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        key = id(node)
        if closing:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_YAML_NODES:
                raise YamlProblem(
                    f"YAML aliases expand to more than {MAX_YAML_NODES:,} values",
                    node.start_mark.line + 1,
                )
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise YamlProblem("recursive YAML alias", node.start_mark.line + 1)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))


def compose_with_lines(text: str) -> tuple[object, dict[Loc, int]]:
    """YAML text as plain data, and the line of every key and item (``{loc: line}``).

    Composing instead of ``yaml.safe_load`` keeps line numbers for error messages and
    catches duplicate keys, which ``safe_load`` resolves silently by keeping the last one.
    Keys are the text as written. An empty document is ``None``. The limits of
    :func:`compose_node` apply.

    Raises:
        YamlProblem: a syntax error, a limit passed, a duplicate key or a non-scalar key,
            with its line.
    """
    root = compose_node(text)
    lines: dict[Loc, int] = {}
    if root is None:
        return None, lines
    constructor = SafeConstructor()
    try:
        return _plain(root, (), lines, constructor), lines
    except yaml.YAMLError as exc:
        raise yaml_problem(exc, text) from exc


def _plain(
    node: yaml.Node, path: Loc, lines: dict[Loc, int], constructor: SafeConstructor
) -> object:
    # Recursion is bounded by MAX_YAML_DEPTH, the work by MAX_YAML_NODES (compose_node).
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[str, object] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlProblem(f"{describe_location(path)}: keys must be plain names", line)
            key = str(key_node.value)
            child = (*path, key)
            if key in result:
                raise YamlProblem(
                    f"{describe_location(child)}: duplicate key (first at line {lines[child]})",
                    line,
                )
            lines[child] = line
            result[key] = _plain(value_node, child, lines, constructor)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_plain(item, (*path, i), lines, constructor) for i, item in enumerate(node.value)]
    return constructor.construct_object(node, deep=True)


class _UniqueKeyConstructor(SafeConstructor):
    """``safe_load``'s constructor, refusing duplicate keys (plain YAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # merged keys may be overridden: that is what merging is for
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:
                continue  # unhashable key: SafeConstructor reports it
            seen.setdefault(key, line)
            if first is not None:
                raise YamlProblem(
                    f"duplicate key {key!r} (first at line {first})",
                    line,
                    problem=f"duplicate key {key!r}",
                )
        return super().construct_mapping(node, deep=deep)


def load_strict(text: str) -> Any:
    """YAML text as ``yaml.safe_load`` reads it, within the limits and refusing duplicate keys.

    For readers that want YAML's own types for keys (``on`` is the boolean true); readers
    that report problems by line use :func:`compose_with_lines`.

    Raises:
        YamlProblem: a syntax error, a limit passed or a duplicate key, with its line.
    """
    root = compose_node(text)
    if root is None:
        return None
    return construct_strict(root, text)


def construct_strict(root: yaml.Node, text: str = "") -> Any:
    """The data of a tree from :func:`compose_node`, refusing duplicate keys.

    Raises:
        YamlProblem: a duplicate key or a value the safe tags cannot build, with its line.
    """
    try:
        return _UniqueKeyConstructor().construct_document(root)
    except yaml.YAMLError as exc:
        raise yaml_problem(exc, text) from exc


def first_problem(problems: Iterable[tuple[int | None, str]]) -> tuple[int | None, str]:
    """The problem nearest the top of the file, saying how many more there are.

    One line per error keeps messages readable; the count tells the user the file has more
    to fix than the line shown.
    """
    ordered = sorted(problems, key=lambda p: (p[0] is None, p[0] or 0))
    line, message = ordered[0]
    more = len(ordered) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return line, message
