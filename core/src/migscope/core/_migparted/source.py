"""Where a mig-parted config lives in the file a user hands over: bare, or in a ConfigMap.

People keep their mig-parted config as the GPU Operator reads it: a ConfigMap whose
``data.config.yaml`` holds the config (the operator's own ``default-mig-parted-config``), a
manifest with the MIG Manager DaemonSet beside it, or what ``kubectl get cm -o yaml`` prints
(one ConfigMap, or a ``List`` of them). :func:`read_config_sources` accepts all of these and
says which form it read, so an error names the ConfigMap and the data key, and a line number
points into the file the user has open.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import yaml

from migscope.core._migparted.config import ConfigError, MigPartedConfig
from migscope.core._migparted.parse import parse_config
from migscope.core._yaml_messages import YamlProblem, compose_documents

PLAIN_FORM = "a plain mig-parted config"
"""The form of a file that is the config itself (``version: v1`` and ``mig-configs``)."""

_CONFIG_KEYS = ("version", "mig-configs")
_OBJECT_KEYS = ("apiVersion", "metadata", "data")


@dataclass(frozen=True)
class ConfigSource:
    """One mig-parted config found in a file, and where.

    Attributes:
        config: The config, read strictly (:func:`~migscope.core._migparted.parse_config`).
        form: How the file held it: :data:`PLAIN_FORM`, or ``ConfigMap NAME, data key KEY``.
        configmap: The ConfigMap's name, None for a plain config.
        key: The ``data`` key that held it, None for a plain config.
    """

    config: MigPartedConfig
    form: str = PLAIN_FORM
    configmap: str | None = None
    key: str | None = None


def read_config_sources(text: str) -> tuple[ConfigSource, ...]:
    """Every mig-parted config in ``text``: a bare config, or those its ConfigMaps hold.

    Accepted: a plain mig-parted config; a ConfigMap (any ``data`` key whose value is a
    mig-parted config, ``config.yaml`` being the GPU Operator's); a multi-document manifest
    (objects other than ConfigMaps are passed over); ``kubectl get cm -o yaml`` output, one
    ConfigMap or a ``List`` of them.

    Raises:
        ConfigError: YAML syntax, no config anywhere, or a config's schema problem. Its message
            names the form (``ConfigMap default-mig-parted-config, data key config.yaml: ...``)
            and its line is the line in ``text`` where one can be given.
    """
    try:
        documents = compose_documents(text)
    except YamlProblem as exc:
        raise ConfigError(exc.message, line=exc.line) from exc
    if not documents:
        raise ConfigError("empty document (expected version: v1 and mig-configs)", line=1)
    objects = [doc for doc in documents if _kind(doc) is not None]
    if len(documents) == 1 and not objects:
        return (ConfigSource(_parse_plain(text, documents[0])),)
    if not objects:
        raise ConfigError(
            f"{len(documents)} YAML documents, none a Kubernetes object; a mig-parted config "
            "is one document (version: v1 and mig-configs)",
            line=documents[1].start_mark.line + 1,
        )
    found: list[ConfigSource] = []
    kinds: list[str] = []
    for node in _objects(objects):
        kind = _kind(node) or "?"
        kinds.append(kind)
        if kind == "ConfigMap":
            found.extend(_from_configmap(node, text))
    if not found:
        seen = ", ".join(dict.fromkeys(kinds))
        raise ConfigError(
            f"no ConfigMap with a mig-parted config in the file (it holds: {seen}); MIG "
            "Manager reads the config from a ConfigMap's data.config.yaml",
            line=objects[0].start_mark.line + 1,
        )
    return tuple(found)


def _parse_plain(text: str, root: yaml.Node) -> MigPartedConfig:
    """The file as the config itself; where it looks like a Kubernetes object, say so."""
    try:
        return parse_config(text)
    except ConfigError as exc:
        if not any(_get(root, key) is not None for key in _OBJECT_KEYS):
            raise
        form = f"read as {PLAIN_FORM} (no 'kind: ConfigMap')"
        raise _with_form(exc, form, 0) from exc


def _objects(nodes: list[yaml.Node]) -> Iterator[yaml.Node]:
    """The objects of a manifest, the items of a ``List`` (kubectl's output) included."""
    for node in nodes:
        if _kind(node) == "List" or (_kind(node) or "").endswith("List"):
            items = _get(node, "items")
            if isinstance(items, yaml.SequenceNode):
                yield from (item for item in items.value if _kind(item) is not None)
        else:
            yield node


def _from_configmap(node: yaml.Node, text: str) -> list[ConfigSource]:
    """The data keys of one ConfigMap that hold a mig-parted config, each read strictly."""
    name = _scalar(_get(_get(node, "metadata"), "name")) or "(unnamed)"
    data = _get(node, "data")
    if not isinstance(data, yaml.MappingNode):
        return []
    found = []
    for key_node, value in data.value:
        key = _scalar(key_node) or "?"
        if not isinstance(value, yaml.ScalarNode) or not _looks_like_config(value.value):
            continue
        form = f"ConfigMap {name}, data key {key}"
        offset = _line_offset(value)
        try:
            config = parse_config(value.value)
        except ConfigError as exc:
            raise _with_form(exc, form, offset) from exc
        found.append(ConfigSource(config, form, name, key))
    return found


def _looks_like_config(value: str) -> bool:
    """Whether a data value is meant as a mig-parted config (it has its top-level keys)."""
    try:
        documents = compose_documents(value)
    except YamlProblem:
        return any(line.startswith(_CONFIG_KEYS) for line in value.splitlines())
    return any(
        isinstance(doc, yaml.MappingNode) and any(_scalar(k) in _CONFIG_KEYS for k, _ in doc.value)
        for doc in documents
    )


def _line_offset(value: yaml.ScalarNode) -> int | None:
    """Add this to a line of a literal block (``|``) to get the line in the file.

    A literal block keeps its lines as they are, starting on the line after the indicator;
    folded and quoted values do not, so their lines cannot be mapped back (None).
    """
    if value.style != "|":
        return None
    return int(value.start_mark.line) + 1


def _with_form(exc: ConfigError, form: str, offset: int | None) -> ConfigError:
    """The same problems, said to be in ``form``, with lines in the file where known."""

    def place(line: int | None) -> tuple[int | None, str]:
        if line is None or offset is None:
            return None, "" if line is None else f" (line {line} of the value)"
        return line + offset, ""

    problems = []
    for line, message in exc.problems:
        where, note = place(line)
        problems.append((where, f"{form}{note}: {message}"))
    first_line, first = problems[0]
    return ConfigError(first, line=first_line, problems=problems)


def _kind(node: yaml.Node) -> str | None:
    return _scalar(_get(node, "kind"))


def _get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value in node.value:
        if _scalar(key_node) == key:
            return value  # type: ignore[no-any-return]
    return None


def _scalar(node: yaml.Node | None) -> str | None:
    if isinstance(node, yaml.ScalarNode) and isinstance(node.value, str):
        return node.value
    return None
