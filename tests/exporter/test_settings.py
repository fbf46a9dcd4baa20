"""Exporter settings: flags over environment over file over defaults, unknown keys refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from migscope.exporter._settings import SettingsError, load_settings


def test_zero_configuration_works() -> None:
    settings = load_settings(environ={})
    assert settings.backend == "nvml"
    assert settings.listen == ":9400"
    assert str(settings.kubelet_socket) == "/var/lib/kubelet/pod-resources/kubelet.sock"


def test_flags_beat_environment_beat_file(tmp_path: Path) -> None:
    config = tmp_path / "exporter.yaml"
    config.write_text("interval: 2\nlisten: ':9500'\ndcgm-compat: true\n")
    env = {"MIGSCOPE_EXPORTER_INTERVAL": "3", "MIGSCOPE_EXPORTER_GPM_INTERVAL": "20"}
    from_file = load_settings(config_file=config, environ={})
    assert (from_file.interval, from_file.listen, from_file.dcgm_compat) == (2.0, ":9500", True)
    with_env = load_settings(config_file=config, environ=env)
    assert (with_env.interval, with_env.gpm_interval, with_env.listen) == (3.0, 20.0, ":9500")
    with_flag = load_settings(config_file=config, environ=env, overrides={"interval": 5.0})
    assert with_flag.interval == 5.0
    unset_flag = load_settings(config_file=config, environ=env, overrides={"interval": None})
    assert unset_flag.interval == 3.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"overrides": {"interval": 0.01}}, "flag: interval: Input should be greater than or"),
        ({"overrides": {"bogus": 1}}, "flag: bogus: unknown setting"),
        ({"overrides": {"listen": "x"}}, "flag: listen: expected [host]:port"),
        (
            {"environ": {"MIGSCOPE_EXPORTER_INTREVAL": "2"}},
            "$MIGSCOPE_EXPORTER_INTREVAL: intreval: unknown setting",
        ),
        (
            {"environ": {"MIGSCOPE_EXPORTER_BACKEND": "cuda"}},
            "$MIGSCOPE_EXPORTER_BACKEND: backend: Input should be",
        ),
    ],
)
def test_bad_values_are_one_line_naming_the_source(kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    kwargs.setdefault("environ", {})
    with pytest.raises(SettingsError) as info:
        load_settings(**kwargs)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_config_file_errors_name_the_file_and_line(tmp_path: Path) -> None:
    bad_key = tmp_path / "a.yaml"
    bad_key.write_text("intervl: 2\n")
    with pytest.raises(SettingsError, match=r"^config .*a.yaml: intervl: unknown setting$"):
        load_settings(config_file=bad_key, environ={})
    broken = tmp_path / "b.yaml"
    broken.write_text("interval: [1,\n")
    with pytest.raises(SettingsError, match=r"^config .*b.yaml:2: "):
        load_settings(config_file=broken, environ={})
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(config_file=tmp_path / "missing.yaml", environ={})
    listed = tmp_path / "c.yaml"
    listed.write_text("- interval\n")
    with pytest.raises(SettingsError, match="expected a mapping"):
        load_settings(config_file=listed, environ={})


@pytest.mark.parametrize(
    ("given", "seconds"), [("500ms", 0.5), ("2s", 2.0), ("1.5", 1.5), (3, 3.0)]
)
def test_intervals_are_durations_from_flags_env_and_file(given: object, seconds: float) -> None:
    assert load_settings(overrides={"interval": given}).interval == seconds
    env = {"MIGSCOPE_EXPORTER_GPM_INTERVAL": str(given)}
    assert load_settings(environ=env).gpm_interval == seconds


def test_a_bad_interval_is_one_line_naming_the_flag() -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(overrides={"interval": "soon"})
    assert str(err.value) == (
        "flag: interval: not a duration: 'soon' (e.g. 90s, 15m, 36h, 7d or 1h30m)"
    )
