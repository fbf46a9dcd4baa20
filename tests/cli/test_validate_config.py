"""``migscope validate-config``: exit codes 0/1/2, one-line errors, text and JSON reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from migscope.cli.main import cli
from migscope.core._catalogue import all_models, model_for_pci

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE = FIXTURES / "mig-parted" / "config-default.yaml"
MIGSCOPE = str(Path(sys.executable).with_name("migscope"))
MODELS = len(all_models())
# all-balanced filters H20 (0x232910DE): a warning only while H20 is not catalogued.
H20_WARNINGS = (
    ["all-balanced: entry 11: 0x232910DE is not in the catalogue; not checked"]
    if model_for_pci(0x232910DE) is None
    else []
)
DEFAULT_OK = f"ok: 81 configs valid against {MODELS} catalogued GPU models"

MIXED = """\
version: v1
mig-configs:
  h200-balanced:
    - device-filter: ["0x233510DE", "0x233B10DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.18gb": 2
        "2g.35gb": 1
        "3g.71gb": 1
  custom-3:
    - device-filter: ["0x233510DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "3g.71gb": 2
        "1g.18gb": 1
  h100-only:
    - device-filter: "0x233010DE"
      devices: [0, 1]
      mig-enabled: true
      mig-devices:
        "7g.80gb": 1
"""


def invoke(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["validate-config", *args], input=stdin)


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it."""
    return subprocess.run(
        [MIGSCOPE, "validate-config", *args], capture_output=True, text=True, check=False
    )


def test_the_default_config_is_valid() -> None:
    result = invoke(str(FIXTURE))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [w for w in lines if w.startswith("warning: ")] == [
        f"warning: {w}" for w in H20_WARNINGS
    ]
    assert lines[-1].startswith(DEFAULT_OK)
    notes = [n for n in lines if n.startswith("note: ")]
    assert len(lines) == len(H20_WARNINGS) + len(notes) + 1
    assert result.stderr == ""


def test_invalid_configs_print_one_line_each_and_a_summary_on_stderr(tmp_path: Path) -> None:
    result = invoke(write(tmp_path, MIXED))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "custom-3: entry 0 on H200-141GB: 3g.71gb×2 + 1g.18gb: no memory slices left for 1g.18gb"
    ]
    assert result.stderr.splitlines() == [f"invalid: 1 of 3 configs in {tmp_path}/config.yaml"]


def test_gpu_checks_every_config_for_that_model(tmp_path: Path) -> None:
    path = write(tmp_path, MIXED)
    result = invoke(path, "--gpu", "h200")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "custom-3: entry 0 on H200-141GB: 3g.71gb×2 + 1g.18gb: no memory slices left for 1g.18gb",
    ]
    assert result.stderr.splitlines() == [f"invalid: 1 of 2 configs in {path}"]
    without_bad = MIXED.replace(MIXED[MIXED.index("  custom-3:") : MIXED.index("  h100-only:")], "")
    result = invoke(write(tmp_path, without_bad, "ok.yaml"), "--gpu", "0x233B10DE")
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok: 1 config valid on H200-141GB; 1 for other GPU models only\n"


def test_gpu_with_no_config_for_it_is_an_error(tmp_path: Path) -> None:
    h100_only = "version: v1\nmig-configs:\n" + MIXED[MIXED.index("  h100-only:") :]
    path = write(tmp_path, h100_only, "h100.yaml")
    result = invoke(path, "--gpu", "H200")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{path}: no config in the file applies to H200-141GB (1 config filters other GPUs only)"
    ]
    # not "invalid: 1 of 0 configs" (issue 25, item 7)
    assert result.stderr == f"invalid: no config in {path} is for H200-141GB\n"


def test_json_report(tmp_path: Path) -> None:
    path = write(tmp_path, MIXED)
    result = invoke(path, "--output", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["file"] == path
    assert data["valid"] is False
    assert data["gpu"] is None
    assert data["driver"] is None
    assert data["table"] == "catalogue"
    assert [c["name"] for c in data["configs"]] == ["h200-balanced", "custom-3", "h100-only"]
    assert data["configs"][0] == {
        "name": "h200-balanced",
        "valid": True,
        "errors": [],
        "warnings": [],
        "models": ["H200-141GB"],
        "applies": True,
        "notes": [],
        "not_valid_on": {},
    }
    assert data["configs"][1]["valid"] is False
    assert data["configs"][1]["errors"] == [
        "custom-3: entry 0 on H200-141GB: 3g.71gb×2 + 1g.18gb: no memory slices left for 1g.18gb"
    ]
    assert data["configs"][2]["models"] == ["H100-80GB"]


def test_json_report_of_the_default_config_is_valid() -> None:
    result = invoke(str(FIXTURE), "-o", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["valid"] is True
    assert len(data["configs"]) == 81
    balanced = next(c for c in data["configs"] if c["name"] == "all-balanced")
    assert "H200-141GB" in balanced["models"]
    assert balanced["warnings"] == H20_WARNINGS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            MIXED.replace(
                '      mig-devices:\n        "1g.18gb": 2',
                '      mig-devces:\n        "1g.18gb": 2',
            ),
            ":7: unknown key 'mig-devces' in mig-configs.h200-balanced[0] "
            "(allowed: devices, device-filter, mig-enabled, mig-devices)",
        ),
        (
            MIXED.replace("devices: [0, 1]", "devices: 7"),
            ":20: mig-configs.h100-only[0].devices: a bare number (7) is not allowed; "
            "write devices: [7] (a list of GPU indices, mig-parted #44)",
        ),
        (
            MIXED.replace('"3g.71gb": 1\n', '"3g.71gb": 1\n   oops: [\n'),
            ":11: YAML syntax error:",
        ),
        (MIXED.replace("version: v1", "version: v2"), ':1: version: must be "v1"'),
    ],
    ids=["unknown-key", "bare-int-devices", "yaml-syntax", "version"],
)
def test_unreadable_configs_are_one_error_line(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    result = invoke(path)
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"migscope: error: {path}{expected}")


def test_a_missing_file_is_one_error_line(tmp_path: Path) -> None:
    result = invoke(str(tmp_path / "absent.yaml"))
    assert result.exit_code == 1
    assert result.stderr == (
        f"migscope: error: {tmp_path}/absent.yaml: cannot read: No such file or directory\n"
    )


def test_a_directory_or_binary_file_is_one_error_line(tmp_path: Path) -> None:
    assert invoke(str(tmp_path)).stderr.count("\n") == 1
    binary = tmp_path / "blob.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    result = invoke(str(binary))
    assert result.exit_code == 1
    assert result.stderr == f"migscope: error: {binary}: not UTF-8 text (byte 0)\n"


def test_an_unknown_gpu_is_one_error_line() -> None:
    result = invoke(str(FIXTURE), "--gpu", "Z9000")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("migscope: error: --gpu: unknown GPU model 'Z9000' (known: ")
    assert "H200-141GB" in line


def test_stdin(tmp_path: Path) -> None:
    result = invoke("-", stdin=FIXTURE.read_text(encoding="utf-8"))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1].startswith(DEFAULT_OK)
    result = invoke("-", stdin="version: v1\n")
    assert result.exit_code == 1
    assert (
        result.stderr
        == "migscope: error: -:1: missing required key 'mig-configs' in the top level\n"
    )


@pytest.mark.parametrize(
    "args",
    [[], ["--output", "yaml", str(FIXTURE)], ["--frobnicate", str(FIXTURE)], ["a", "b"]],
    ids=["no-file", "bad-output", "unknown-option", "two-files"],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert "Usage: " in result.stderr


def test_the_console_script_exit_codes_and_streams(tmp_path: Path) -> None:
    ok = run(str(FIXTURE))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[-1].startswith(DEFAULT_OK)
    assert ok.stderr == ""

    invalid = run(write(tmp_path, MIXED))
    assert invalid.returncode == 1
    assert invalid.stdout.count("\n") == 1
    assert invalid.stderr.count("\n") == 1

    broken = run(
        write(tmp_path, MIXED.replace("mig-enabled: true\n", "mig-enabled: true\n  x\n", 1))
    )
    assert broken.returncode == 1
    assert broken.stdout == ""
    (line,) = broken.stderr.splitlines()
    assert line.startswith(f"migscope: error: {tmp_path}/config.yaml:")
    assert "Traceback" not in broken.stderr

    usage = run("--no-such-option")
    assert usage.returncode == 2


# ---------------------------------------------------------------------------------------------
# --driver: names that exist only on some drivers

SEVEN_79 = """\
version: v1
mig-configs:
  a100-80gb-whole:
    - device-filter: ["0x20B510DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "7g.79gb": 1
"""
"""A100 80GB's R535-R545 name for 7g.80gb (dcgm-exporter#713; catalogue name facts)."""


def test_a_name_of_other_drivers_is_a_warning_for_the_given_driver(tmp_path: Path) -> None:
    path = write(tmp_path, SEVEN_79)
    result = invoke(path, "--driver", "550.54.15")
    assert result.exit_code == 0, result.output
    warning, verdict = result.stdout.splitlines()
    assert warning.startswith(
        "warning: a100-80gb-whole: entry 0 on A100-80GB: A100-80GB: MIG 7g.79gb does not "
        "exist on driver 550.54.15: known on R535-R545"
    )
    assert warning.endswith("driver 550.54.15 calls it 7g.80gb")
    assert verdict == (
        f"ok: 1 config valid against {MODELS} catalogued GPU models with driver 550.54.15 "
        "(1 warning)"
    )


def test_the_same_name_on_its_own_driver_is_fine(tmp_path: Path) -> None:
    result = invoke(write(tmp_path, SEVEN_79), "--driver", "R535", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["driver"] == "R535"
    (config,) = data["configs"]
    assert (config["warnings"], config["notes"], config["models"]) == ([], [], ["A100-80GB"])


def test_without_a_driver_driver_dependent_names_are_notes(tmp_path: Path) -> None:
    result = invoke(write(tmp_path, SEVEN_79))
    assert result.exit_code == 0, result.output
    note, evidence, verdict = result.stdout.splitlines()
    assert note == (
        "note: a100-80gb-whole: entry 0 on A100-80GB: 7g.79gb exists only on R535-R545; "
        "elsewhere 7g.80gb on any driver"
    )
    # the evidence of a driver-dependent name is printed once, not in every note (issue 25)
    assert evidence.startswith("note: A100-80GB 7g.79gb: gpu-operator#687")
    assert verdict.endswith("(1 note)")


def test_a_bad_driver_is_one_error_line(tmp_path: Path) -> None:
    result = invoke(write(tmp_path, SEVEN_79), "--driver", "5.x")
    assert result.exit_code == 1
    assert result.stderr.startswith("migscope: error: --driver: not a driver version: '5.x'")


# ---------------------------------------------------------------------------------------------
# --gpu-table: the GPU's own table instead of the built-in one

H200_TABLE = (FIXTURES / "h200" / "lgip.txt").read_text(encoding="utf-8") + (
    FIXTURES / "h200" / "lgipp.txt"
).read_text(encoding="utf-8")


def test_the_gpus_own_table_is_used_and_named(tmp_path: Path) -> None:
    table = write(tmp_path, H200_TABLE, "h200-table.txt")
    result = invoke(str(FIXTURE), "--gpu-table", table)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"ok: 10 configs valid on H200-141GB per the GPU's own table (nvidia-smi output in "
        f"{table}, GPU 0); 71 for other GPU models only\n"
    )
    data = json.loads(invoke(str(FIXTURE), "--gpu-table", table, "-o", "json").stdout)
    assert (data["gpu"], data["table"]) == (
        "H200-141GB",
        f"observed from nvidia-smi output in {table}, GPU 0",
    )


def test_the_gpus_own_table_wins_over_the_catalogue(tmp_path: Path) -> None:
    """A table allowing one 3g.71gb (one field changed for the test) refuses 3g.71gb×2."""
    one_3g = H200_TABLE.replace(
        "|   0  MIG 3g.71gb          9     2/2", "|   0  MIG 3g.71gb          9     1/1"
    )
    assert one_3g != H200_TABLE
    config = write(tmp_path, MIXED.replace('"3g.71gb": 2\n        "1g.18gb": 1', '"3g.71gb": 2'))
    assert invoke(config, "--gpu", "H200").exit_code == 0
    result = invoke(config, "--gpu-table", write(tmp_path, one_3g, "table.txt"))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "custom-3: entry 0 on H200-141GB: 3g.71gb×2: at most 1 × 3g.71gb per H200-141GB GPU, "
        "asked for 2"
    ]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            (FIXTURES / "h200" / "lgip.txt").read_text(encoding="utf-8"),
            "--gpu-table: {path}: GPU 0's table cannot describe a GPU model: it has no "
            "placements (add `nvidia-smi mig -lgipp` output)",
        ),
        ("no table here\n", "{path}: no `nvidia-smi mig -lgip` or `-lgipp` table found"),
        (
            H200_TABLE
            + H200_TABLE.replace("|   0  MIG", "|   1  MIG")
            .replace("GPU  0 ", "GPU  1 ")
            .replace("9     2/2", "9     1/1"),
            "--gpu-table: {path} holds different tables for GPU 0, GPU 1; keep one GPU's",
        ),
    ],
    ids=["no-placements", "no-table", "two-different-gpus"],
)
def test_an_unusable_gpu_table_is_one_error_line(tmp_path: Path, table: str, message: str) -> None:
    path = write(tmp_path, table, "table.txt")
    result = invoke(str(FIXTURE), "--gpu-table", path)
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("migscope: error: " + message.format(path=path))


def test_a_gpu_table_of_another_model_than_gpu_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, H200_TABLE, "table.txt")
    result = invoke(str(FIXTURE), "--gpu-table", path, "--gpu", "A100-40GB")
    assert result.exit_code == 1
    assert result.stderr == (
        f"migscope: error: --gpu-table: {path} is the table of a H200-141GB, not of --gpu "
        "A100-40GB\n"
    )
    assert invoke(str(FIXTURE), "--gpu-table", path, "--gpu", "h200").exit_code == 0
