"""The applier reads its plan through the report contract: its views keep the spec's types.

:mod:`migscope.applier._plan.contract` validates ``report.json`` and ``node-plan.json``
against views of :mod:`migscope.core._spec.v1`: the fields the applier reads, required only
where it needs them. A view must not drift from the spec: every field it declares exists in
the spec model with the same type (a view may add ``| None``), and a spec model a view nests
is read through that model's view.
"""

from __future__ import annotations

import functools
import operator
import types
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from migscope.applier._plan import PlanError, plan_from_report
from migscope.applier._plan.contract import VIEWS


def _as_spec(annotation: Any) -> Any:
    """``annotation`` with every view replaced by the spec model it reads."""
    if isinstance(annotation, type) and annotation in VIEWS:
        return VIEWS[annotation]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is None or not args:
        return annotation
    mapped = tuple(_as_spec(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return functools.reduce(operator.or_, mapped)
    return origin[mapped if len(mapped) > 1 else mapped[0]]


@pytest.mark.parametrize("view", list(VIEWS), ids=lambda v: v.__name__)
def test_a_view_has_the_specs_types(view: type[BaseModel]) -> None:
    spec = VIEWS[view]
    assert view.model_config == spec.model_config
    for name, info in view.model_fields.items():
        assert name in spec.model_fields, f"{view.__name__}.{name} is not in {spec.__name__}"
        theirs = spec.model_fields[name].annotation
        ours = _as_spec(info.annotation)
        assert ours in (theirs, theirs | None), f"{view.__name__}.{name}: {ours} vs {theirs}"


def _report(**rec: Any) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "recommendations": [{"node": "gpu-a", "mig_config": "off", **rec}],
        "mig_parted_config": {
            "version": "v1",
            "mig-configs": {"off": [{"devices": "all", "mig-enabled": False}]},
        },
    }


@pytest.mark.parametrize(
    ("report", "message"),
    [
        (
            _report(node=3),
            "report.json: recommendations[0].node: must be a string, got the number 3",
        ),
        ({**_report(), "recommendations": [{"mig_config": "off"}]}, "missing required key 'node'"),
        (_report(disruptive="yes"), "recommendations[0].disruptive: must be true or false"),
        (_report(current=[{"gpu": 0, "layout": {}}]), "missing required key 'mig_enabled'"),
        (
            _report(mig_config="on"),
            "recommendations[0]: mig_config 'on' is not in mig_parted_config",
        ),
        ({**_report(), "schema_version": 2}, "report.json: schema_version 2, expected 1"),
        (
            {
                **_report(),
                "mig_parted_config": {
                    "version": "v1",
                    "mig-configs": {"off": [{"devices": 7, "mig-enabled": False}]},
                },
            },
            "report.json: mig_parted_config.mig-configs.off[0].devices: a bare number (7) "
            "is not allowed",
        ),
        (
            {**_report(), "provenance": {"source": {"kind": "file", "path": 5}}},
            "report.json: provenance.source.path: must be a string, got the number 5",
        ),
    ],
)
def test_a_bad_field_is_one_line_naming_it(report: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanError) as err:
        plan_from_report(report, "report.json")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_fields_the_applier_does_not_read_are_not_required() -> None:
    (change,) = plan_from_report(_report(), "report.json").nodes
    assert (change.node, change.config, change.gpus, change.disruptive) == (
        "gpu-a",
        "off",
        (),
        False,
    )
    assert change.unsafe  # no layouts or slices: the safety re-check flags it, the plan reads
