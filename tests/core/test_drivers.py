"""Driver versions and branch ranges: parsing, order, membership and how they print."""

from __future__ import annotations

import pytest

from migscope.core._drivers import DriverRange, DriverVersion, DriverVersionError
from migscope.core._errors import UserError


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("535", (535,)),
        ("R535", (535,)),
        ("r535", (535,)),
        (" 535.129.03 ", (535, 129, 3)),
        ("560.35.03", (560, 35, 3)),
        ("610.43.02", (610, 43, 2)),
        ("550.54", (550, 54)),
    ],
)
def test_parse_accepts_branches_and_full_versions(text: str, parts: tuple[int, ...]) -> None:
    version = DriverVersion.parse(text)
    assert version.parts == parts
    assert version.branch == parts[0]


@pytest.mark.parametrize(
    ("text", "shown"),
    [("535", "R535"), ("r550", "R550"), ("535.129.03", "535.129.03"), ("580.159.4", "580.159.04")],
)
def test_str_gives_the_dotted_text(text: str, shown: str) -> None:
    assert str(DriverVersion.parse(text)) == shown


@pytest.mark.parametrize(
    "text", ["", "R", "abc", "535.", "535..1", "-535", "0", "535.129.03.1.2", "R 535", "5355555"]
)
def test_parse_refuses_junk_in_one_line(text: str) -> None:
    with pytest.raises(DriverVersionError) as caught:
        DriverVersion.parse(text)
    message = str(caught.value)
    assert "\n" not in message
    assert repr(text) in message
    assert isinstance(caught.value, UserError)


def test_versions_order_by_their_numbers() -> None:
    texts = ["550.54.15", "R535", "535.129.03", "470.57.02", "535.104.05", "1000"]
    ordered = sorted(DriverVersion.parse(t) for t in texts)
    assert [str(v) for v in ordered] == [
        "470.57.02",
        "R535",
        "535.104.05",
        "535.129.03",
        "550.54.15",
        "R1000",
    ]


@pytest.mark.parametrize(
    ("drivers", "inside", "outside", "shown"),
    [
        (DriverRange(535, 545), ["535", "545.23.08", "540"], ["530.30.02", "550"], "R535-R545"),
        (DriverRange(560), ["560.35.03", "610.43.02"], ["555.42"], "R560+"),
        (DriverRange(last=550), ["450.51", "550.127.05"], ["555", "560"], "up to R550"),
        (DriverRange(), ["450", "610.43.02"], [], "any driver"),
        (DriverRange(560, 560), ["560.35.03"], ["555", "565"], "R560"),
    ],
)
def test_range_contains_its_branches_and_prints_them(
    drivers: DriverRange, inside: list[str], outside: list[str], shown: str
) -> None:
    assert all(drivers.contains(DriverVersion.parse(t)) for t in inside)
    assert not any(drivers.contains(DriverVersion.parse(t)) for t in outside)
    assert str(drivers) == shown
    assert drivers.is_any == (shown == "any driver")


@pytest.mark.parametrize(("first", "last"), [(550, 535), (0, None), (None, -1)])
def test_an_empty_or_negative_range_is_a_bug(first: int | None, last: int | None) -> None:
    with pytest.raises(ValueError, match="driver"):
        DriverRange(first, last)
