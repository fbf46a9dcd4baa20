"""The nvidia-smi parsers read what real pastes hold, not only clean terminal output.

Each case takes a real capture from tests/fixtures and changes only its wrapping the way a
paste changes it (markdown indentation, block quotes, fences, CRLF, a web page's blank lines
or dropped table borders, several GPUs, other commands around it); the rows parsed must be
exactly the rows of the untouched capture. The wrappers are the ones seen in the real corpus
(tests/fixtures/real/README.md: prompts, trailing double spaces, indentation removed by hand
in the Scaleway and OpenNebula copies) and in GitHub issue pastes (mig-parted#120 and #227:
multi-GPU tables, fenced blocks).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from migscope.core._nvidia_smi import parse_lgi, parse_lgip, parse_lgipp, parse_list

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200_LGIP = (FIXTURES / "h200" / "lgip.txt").read_text(encoding="utf-8")
H200_LGIPP = (FIXTURES / "h200" / "lgipp.txt").read_text(encoding="utf-8")
RTX_LGIP = (FIXTURES / "real" / "nvidia-smi" / "kubesimplify-rtx-pro-6000-lgip.txt").read_text(
    encoding="utf-8"
)
A100_LGI = (
    FIXTURES / "real" / "nvidia-smi" / "nvidia-docs-a100-pcie-40gb-lgi-7x1g.5gb.txt"
).read_text(encoding="utf-8")


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _quote(text: str) -> str:
    return "\n".join("> " + line for line in text.splitlines())


def _fenced(text: str) -> str:
    return f"Here is the output:\n\n```console\n$ nvidia-smi mig -lgip\n{text}\n```\nthanks\n"


def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def _blank_between(text: str) -> str:
    """A web page that renders each table line as its own paragraph."""
    return "\n\n".join(text.splitlines())


def _no_borders(text: str) -> str:
    """A renderer that dropped the | borders and squeezed the spaces."""
    return "\n".join(" ".join(line.strip("|").split()) for line in text.splitlines())


def _tabs(text: str) -> str:
    return "\n".join("\t".join(line.split("  ")) for line in text.splitlines())


WRAPPERS: dict[str, Callable[[str], str]] = {
    "markdown indentation": _indent,
    "block quote": _quote,
    "fenced with a prompt and prose": _fenced,
    "CRLF": _crlf,
    "blank lines between table lines": _blank_between,
    "no table borders, squeezed spaces": _no_borders,
    "tabs for runs of spaces": _tabs,
}


@pytest.mark.parametrize("wrap", WRAPPERS.values(), ids=WRAPPERS.keys())
@pytest.mark.parametrize(
    ("text", "parse"),
    [
        (H200_LGIP, parse_lgip),
        (RTX_LGIP, parse_lgip),
        (H200_LGIPP, parse_lgipp),
        (A100_LGI, parse_lgi),
    ],
    ids=["h200-lgip", "rtx-lgip", "h200-lgipp", "a100-lgi"],
)
def test_a_wrapped_paste_parses_like_the_capture(
    text: str, parse: Callable[[str], list[object]], wrap: Callable[[str], str]
) -> None:
    clean = parse(text)
    assert clean, "the capture itself parses"
    assert parse(wrap(text)) == clean


def test_several_gpus_and_both_listings_in_one_paste() -> None:
    """A node's -lgip and -lgipp for GPUs 0 and 1, with the commands between them."""
    gpu1_lgip = H200_LGIP.replace("|   0  MIG", "|   1  MIG")
    gpu1_lgipp = H200_LGIPP.replace("GPU  0 ", "GPU  1 ")
    paste = "\n".join(
        [
            "root@node:~# nvidia-smi mig -lgip",
            H200_LGIP,
            gpu1_lgip,
            "root@node:~# nvidia-smi mig -lgipp",
            H200_LGIPP,
            gpu1_lgipp,
        ]
    )
    rows = parse_lgip(paste)
    assert [r.gpu for r in rows] == [0] * 7 + [1] * 7
    assert [r.name for r in rows if r.gpu == 1] == [r.name for r in parse_lgip(H200_LGIP)]
    placed = parse_lgipp(paste)
    assert [(r.gpu, r.profile_id) for r in placed[7:]] == [
        (1, r.profile_id) for r in parse_lgipp(H200_LGIPP)
    ]


def test_lgipp_reads_both_spellings_and_spaced_colons() -> None:
    rows = parse_lgipp(
        "GPU  0 Profile ID  9 Placements: {0,4}:4\n"
        "GPU  0 Profile ID  0 Placement : {0}:8\n"
        "GPU 0 Profile ID 14 Placements : { 0, 2, 4 } : 2\n"
    )
    assert [(r.profile_id, r.starts, r.size) for r in rows] == [
        (9, (0, 4), 4),
        (0, (0,), 8),
        (14, (0, 2, 4), 2),
    ]


def test_lines_that_only_look_like_rows_are_ignored() -> None:
    """-lcip rows (GPU, GI id, CI profile) and prose with numbers are not -lgip rows."""
    lcip = (
        "|   0      1       MIG 1c.3g.20gb       0     0/3           14        2     0     0 |\n"
        "|                                                           3     0            |\n"
    )
    assert parse_lgip(lcip) == []
    assert parse_lgip("We saw 3 4 5 errors\n1 2 3\n") == []


def test_list_reads_indented_and_unindented_mig_lines() -> None:
    text = (
        "    GPU 0: NVIDIA H100 NVL (UUID: GPU-1)\n"
        "      MIG 3g.47gb     Device  0: (UUID: MIG-a)\n"
        "GPU 1: NVIDIA H100 NVL (UUID: GPU-2)\n"
        "MIG 7g.94gb Device 0: (UUID: MIG-b)\r\n"
    )
    devices = parse_list(text)
    assert [(d.index, d.mig_devices) for d in devices] == [
        (0, (("3g.47gb", "MIG-a"),)),
        (1, (("7g.94gb", "MIG-b"),)),
    ]
