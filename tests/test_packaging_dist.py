"""The wheels `make dist` builds install and run as the roles install them.

One wheelhouse is built per session (scripts/build-dist, the code behind `make dist`) and
installed into two fresh venvs: the exporter's three wheels alone (as deploy/Dockerfile's
exporter image installs them) and the full set. migscope's wheels are named by path, so no
`migscope-*` requirement can come from an index; third-party requirements come from pip's
configured index, as on CI. Measured here (2 cores, pip cache warm): 33 s to build the 16
files, 19 s for the exporter venv, 38 s for the full one, 4 s of commands: about 95 s.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
BUILD_DIST = ROOT / "scripts" / "build-dist"
FOLDERS = {
    "core": "migscope-core",
    "sim": "migscope-sim",
    "kube": "migscope-kube",
    "exporter": "migscope-exporter",
    "analyzer": "migscope-analyzer",
    "applier": "migscope-applier",
    "scheduler": "migscope-scheduler",
    ".": "migscope",
}
EXPORTER_ROLE = ("migscope-core", "migscope-sim", "migscope-exporter")

pytestmark = pytest.mark.dist


def _version(folder: str) -> str:
    version: str = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"][
        "version"
    ]
    return version


def _wheel(wheelhouse: Path, dist: str) -> Path:
    folder = next(f for f, d in FOLDERS.items() if d == dist)
    return wheelhouse / f"{dist.replace('-', '_')}-{_version(folder)}-py3-none-any.whl"


@dataclass(frozen=True)
class Venv:
    path: Path

    def bin(self, name: str) -> Path:
        return self.path / "bin" / name

    def run(self, *args: str | Path, cwd: Path | None = None) -> str:
        proc = subprocess.run(
            [str(a) for a in args], capture_output=True, text=True, check=False, cwd=cwd
        )
        assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
        return proc.stdout

    def migscope_dists(self) -> dict[str, tuple[str, str]]:
        """Installed migscope-* distributions: name -> (version, the file pip installed)."""
        script = (
            "import json\nfrom importlib import metadata\nout = {}\n"
            "for d in metadata.distributions():\n"
            "    name = d.metadata['Name']\n"
            "    if name == 'migscope' or name.startswith('migscope-'):\n"
            "        out[name] = (d.version, d.read_text('direct_url.json') or '')\n"
            "print(json.dumps(out))\n"
        )
        found = json.loads(self.run(self.bin("python"), "-c", script))
        return {
            name: (version, unquote(urlparse(json.loads(url)["url"]).path) if url else "")
            for name, (version, url) in found.items()
        }


def _install(path: Path, wheels: list[Path]) -> Venv:
    venv.create(path, with_pip=True)
    env = Venv(path)
    env.run(env.bin("python"), "-m", "pip", "install", "--disable-pip-version-check", *wheels)
    return env


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, str(BUILD_DIST), "--outdir", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def exporter_venv(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Venv:
    return _install(
        tmp_path_factory.mktemp("venv-exporter"), [_wheel(wheelhouse, d) for d in EXPORTER_ROLE]
    )


@pytest.fixture(scope="module")
def full_venv(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Venv:
    wheels = [_wheel(wheelhouse, d) for d in FOLDERS.values()]
    return _install(tmp_path_factory.mktemp("venv-full"), wheels)


def test_make_dist_builds_a_wheel_and_an_sdist_of_every_distribution(wheelhouse: Path) -> None:
    built = sorted(p.name for p in wheelhouse.iterdir())
    expected = []
    for folder, dist in FOLDERS.items():
        stem = f"{dist.replace('-', '_')}-{_version(folder)}"
        expected += [f"{stem}-py3-none-any.whl", f"{stem}.tar.gz"]
    assert built == sorted(expected)


def test_the_root_sdist_carries_the_command_only(wheelhouse: Path) -> None:
    import tarfile

    with tarfile.open(wheelhouse / f"migscope-{_version('.')}.tar.gz") as tar:
        tops = {Path(m.name).parts[1] for m in tar.getmembers() if len(Path(m.name).parts) > 1}
    assert {"src", "pyproject.toml", "README.md", "PKG-INFO"} <= tops
    assert not tops & {"tests", "core", "exporter", "analyzer", "fixtures", "deploy", "docs"}


def test_exporter_wheels_install_alone_from_the_wheelhouse(
    exporter_venv: Venv, wheelhouse: Path
) -> None:
    installed = exporter_venv.migscope_dists()
    assert set(installed) == set(EXPORTER_ROLE)
    for dist, (version, source) in installed.items():
        assert (version, Path(source)) == (
            _version(next(f for f, d in FOLDERS.items() if d == dist)),
            _wheel(wheelhouse, dist),
        )
    heavy = exporter_venv.run(exporter_venv.bin("python"), "-m", "pip", "list", "--format=json")
    names = {p["name"].lower() for p in json.loads(heavy)}
    assert not names & {"pandas", "numpy", "highspy", "kubernetes", "httpx", "apscheduler"}
    assert not exporter_venv.bin("migscope").exists()  # the CLI distribution is not there


def _build_info_version(exposition: str) -> str:
    match = re.search(r'^migscope_exporter_build_info\{version="([^"]*)"', exposition, re.M)
    assert match, exposition[:2000]
    return match.group(1)


def test_exporter_runs_from_its_wheels(exporter_venv: Venv) -> None:
    out = exporter_venv.run(exporter_venv.bin("migscope-exporter"), "--backend", "sim", "--once")
    assert "migscope_slice_" in out or "migscope_gpu_" in out
    _build_info_version(out)


def test_exporter_build_info_is_its_own_distributions_version(exporter_venv: Venv) -> None:
    """An exporter-only install published 0+unknown: it asked for the CLI's version."""
    out = exporter_venv.run(exporter_venv.bin("migscope-exporter"), "--backend", "sim", "--once")
    assert _build_info_version(out) == _version("exporter")
    version = exporter_venv.run(exporter_venv.bin("migscope-exporter"), "--version")
    assert version.strip() == f"migscope-exporter, version {_version('exporter')}"


def test_full_set_installs_and_every_distribution_runs(
    full_venv: Venv, wheelhouse: Path, tmp_path: Path
) -> None:
    installed = full_venv.migscope_dists()
    assert {d: Path(s) for d, (_, s) in installed.items()} == {
        d: _wheel(wheelhouse, d) for d in FOLDERS.values()
    }
    migscope = full_venv.bin("migscope")
    assert full_venv.run(migscope, "--version").strip() == f"migscope, version {_version('.')}"
    # analyzer, sim and core: the demo end to end, outside the checkout
    full_venv.run(migscope, "demo", "--out", tmp_path / "demo", cwd=tmp_path)
    assert json.loads((tmp_path / "demo" / "report.json").read_text())
    # applier, kube, scheduler and the exporter's own command load their modules
    for command in (["apply", "--help"], ["schedule", "--help"], ["exporter", "--help"]):
        assert "Usage:" in full_venv.run(migscope, *command)
    out = full_venv.run(full_venv.bin("migscope-exporter"), "--backend", "sim", "--once")
    assert _build_info_version(out) == _version("exporter")
