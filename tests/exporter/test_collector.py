"""The collector renders a snapshot faithfully: every reading, nothing invented, nothing stale."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.exporter_snapshot import GIB, GPU, OWNERS, SLICE_A, SLICE_B, SNAP, PodOwner

from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._dcgm_compat import DcgmExposition
from migscope.exporter._snapshot import Snapshot


def scrape(collector: SnapshotCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: dict, name: str, **labels: str) -> float | None:  # type: ignore[type-arg]
    for (sample_name, sample_labels), v in samples.items():
        if sample_name == name and labels.items() <= dict(sample_labels).items():
            return v
    return None


def make(snapshot: Snapshot | None = SNAP, **kw: object) -> SnapshotCollector:
    return SnapshotCollector(
        snapshot=lambda: snapshot,
        owners=lambda: OWNERS,
        backend="sim",
        version="0.1.0",
        **kw,  # type: ignore[arg-type]
    )


def test_every_reading_is_published_with_its_labels() -> None:
    s = scrape(make())
    a = {"gpu_instance_id": "1", "mig_uuid": SLICE_A.mig_uuid}
    assert value(s, "migscope_mig_graphics_active_ratio", **a) == 0.9
    assert value(s, "migscope_mig_sm_occupancy_ratio", **a) == 0.3
    assert value(s, "migscope_mig_memory_used_bytes", **a) == 12 * GIB
    assert value(s, "migscope_mig_processes", **a) == 2
    assert value(s, "migscope_mig_power_estimated_watts", **a) == 400.0
    assert value(s, "migscope_mig_energy_estimated_joules_total", **a) == 1200.0
    assert value(s, "migscope_gpu_power_watts", gpu="0") == 500.0
    assert value(s, "migscope_gpu_energy_joules_total", gpu="0") == 2_845_127.0
    assert value(s, "migscope_gpu_compute_slices_free", gpu="0") == 0
    assert value(s, "migscope_gpu_memory_slices_free", gpu="0") == 0
    info = value(
        s,
        "migscope_mig_info",
        gpu_instance_id="2",
        profile="3g.71gb",
        profile_id="9",
        placement_start="4",
        placement_size="4",
    )
    assert info == 1
    assert value(s, "migscope_gpu_mig_layout_info", layout="4g.71gb,3g.71gb") == 1
    assert value(s, "migscope_gpu_info", model="H200-141GB", mig_mode="enabled") == 1
    assert value(s, "migscope_collector_success", collector="nvml") == 1


def test_unknown_values_are_absent_not_zero() -> None:
    s = scrape(make())
    b = {"gpu_instance_id": "2"}
    assert value(s, "migscope_mig_graphics_active_ratio", **b) is None
    assert value(s, "migscope_mig_energy_estimated_joules_total", **b) is None
    assert value(s, "migscope_mig_memory_used_bytes", **b) == 0


def test_pod_owner_is_an_info_series_on_the_slice_it_holds() -> None:
    s = scrape(make())
    assert (
        value(
            s,
            "migscope_mig_pod_info",
            mig_uuid=SLICE_A.mig_uuid,
            namespace="team-a",
            pod="trainer-0",
            container="main",
            resource="nvidia.com/mig-4g.71gb",
        )
        == 1
    )
    assert value(s, "migscope_mig_pod_info", mig_uuid=SLICE_B.mig_uuid) is None


def test_a_vanished_slice_vanishes_from_the_next_scrape() -> None:
    current = [SNAP]
    collector = SnapshotCollector(snapshot=lambda: current[0], backend="sim", version="0")
    assert value(scrape(collector), "migscope_mig_info", gpu_instance_id="2") == 1
    current[0] = replace(SNAP, gpus=(replace(GPU, instances=(SLICE_A,)),))
    after = scrape(collector)
    assert value(after, "migscope_mig_info", gpu_instance_id="2") is None
    assert value(after, "migscope_gpu_compute_slices_free", gpu="0") == 3


def test_before_the_first_cycle_only_build_info_is_served() -> None:
    s = scrape(make(snapshot=None))
    assert {name for name, _ in s} == {"migscope_exporter_build_info"}


def _parsed(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    """Every sample, by name (as the family names it: prometheus_client's parser renames a
    ``counter``'s samples to ``<family>_total``, Prometheus does not), labels and value."""
    return {
        (
            family.name if sample.name == f"{family.name}_total" else sample.name,
            tuple(sorted(sample.labels.items())),
            sample.value,
        )
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_fast_text_rendering_equals_the_registry_rendering() -> None:
    """/metrics uses render_text(); it must say exactly what prometheus_client would."""
    tricky = PodOwner('team "q"', "pod\\x", "line\nbreak", "nvidia.com/mig-4g.71gb")
    for collector in (
        make(),
        make(dcgm=DcgmExposition(hostname="n")),
        SnapshotCollector(
            snapshot=lambda: SNAP,
            owners=lambda: {SLICE_B.mig_uuid: (tricky,)},
            backend="sim",
            version="0",
        ),
        make(snapshot=None),
    ):
        registry = CollectorRegistry()
        registry.register(collector)
        reference = generate_latest(registry).decode()
        fast = collector.render_text().decode()
        assert _parsed(fast) == _parsed(reference)
        # dcgm-exporter's energy counter has no "_total", which the registry's renderers
        # (and OpenMetrics) require of a counter: that path types it "untyped". Nothing else
        # may differ.
        energy = "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
        assert [
            line.replace(f"{energy} counter", f"{energy} untyped")
            for line in fast.splitlines()
            if line.startswith("# TYPE")
        ] == [line for line in reference.splitlines() if line.startswith("# TYPE")]


def test_with_estimates_is_replace_without_the_cost() -> None:
    from dataclasses import replace

    copy = SLICE_B.with_estimates(12.5, 99.0)
    expected = replace(SLICE_B, power_estimated_watts=12.5, energy_estimated_joules=99.0)
    assert copy == expected
    assert hash(copy) == hash(expected)
    assert SLICE_B.power_estimated_watts == 100.0, "the original is untouched"
