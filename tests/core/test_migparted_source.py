"""The forms a mig-parted config reaches ``validate-config`` in (issue 25, item 1).

The real ConfigMaps and manifests run in tests/real/test_real_corpus.py; these cases are
written for the test: a ``kubectl get cm -o yaml`` List, a data key other than config.yaml,
and error lines mapped into the file.
"""

from __future__ import annotations

import pytest

from migscope.core._migparted import PLAIN_FORM, ConfigError, read_config_sources

CONFIG = """version: v1
mig-configs:
  all-1g.18gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.18gb": 7
"""


def _indent(text: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" for line in text.splitlines())


def configmap(name: str, key: str = "config.yaml", body: str = CONFIG, indent: int = 0) -> str:
    text = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
        f"data:\n  {key}: |\n{_indent(body, 4)}"
    )
    return _indent(text, indent)


def test_a_plain_config_is_read_as_itself() -> None:
    (source,) = read_config_sources(CONFIG)
    assert source.form == PLAIN_FORM
    assert list(source.config.mig_configs) == ["all-1g.18gb"]


def test_a_configmap_names_its_key_whatever_it_is() -> None:
    (source,) = read_config_sources(configmap("nvidia-mig-mode", "nva100_mig-parted_config.yaml"))
    assert source.form == "ConfigMap nvidia-mig-mode, data key nva100_mig-parted_config.yaml"
    assert (source.configmap, source.key) == ("nvidia-mig-mode", "nva100_mig-parted_config.yaml")


def test_kubectl_get_cm_list_output() -> None:
    items = configmap("a", indent=2).replace("  apiVersion", "- apiVersion", 1)
    items += configmap("b", indent=2).replace("  apiVersion", "- apiVersion", 1)
    text = f"apiVersion: v1\nitems:\n{items}kind: List\nmetadata:\n  resourceVersion: ''\n"
    forms = [s.form for s in read_config_sources(text)]
    assert forms == ["ConfigMap a, data key config.yaml", "ConfigMap b, data key config.yaml"]


def test_an_error_in_a_configmap_names_it_and_the_line_in_the_file() -> None:
    bad = CONFIG.replace("mig-devices:", "mig-devces:")
    with pytest.raises(ConfigError) as caught:
        read_config_sources("---\n" + configmap("custom", body=bad))
    assert caught.value.message.startswith(
        "ConfigMap custom, data key config.yaml: unknown key 'mig-devces'"
    )
    # line 6 of the value; the value starts on line 8 of the file (after '---' and 6 lines)
    assert caught.value.line == 13


def test_a_manifest_without_a_config_says_what_it_holds() -> None:
    text = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\n"
    with pytest.raises(ConfigError, match=r"no ConfigMap with a mig-parted config .*DaemonSet"):
        read_config_sources(text)


def test_a_configmap_without_kind_is_read_as_plain_and_says_so() -> None:
    text = configmap("x").replace("kind: ConfigMap\n", "")
    with pytest.raises(
        ConfigError, match=r"^line 1: read as a plain mig-parted config \(no 'kind: "
    ):
        read_config_sources(text)
