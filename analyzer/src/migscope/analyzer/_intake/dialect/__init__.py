"""Tell migscope's series from dcgm-exporter's, and turn either into per-slice records.

A team that only runs dcgm-exporter should get a report on day one, so the analyzer reads
both dialects and hands the rest of the pipeline the same :class:`SliceSeries` for each:

============== ========================================== ==========================================
               migscope                                   dcgm-exporter (up to 4.8.x; 4.9.0+)
============== ========================================== ==========================================
slice          ``migscope_mig_info`` (profile, MIG UUID,  ``GPU_I_ID`` and ``GPU_I_PROFILE`` labels
               placement)                                 on every per-GI series
GPU model      ``migscope_gpu_info{model}`` (catalogue)   ``modelName`` (NVML name → catalogue)
activity       ``migscope_mig_graphics_active_ratio``     ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``;
                                                          ``..._GR_ENGINE_UTIL_RATIO`` (both 0..1)
memory used    ``migscope_mig_memory_used_bytes``         ``DCGM_FI_DEV_FB_USED`` (MiB × 2^20);
                                                          ``DCGM_FI_DEV_FB_USED_BYTES``
memory total   ``migscope_mig_memory_total_bytes``        ``FB_USED + FB_FREE`` (either
                                                          generation), else
                                                          ``DCGM_FI_DEV_FB_CAPACITY_BYTES``, else
                                                          catalogue
pod            ``migscope_mig_pod_info{namespace,pod}``   ``namespace``/``pod`` labels, when set
DRA claim      ``migscope_mig_pod_info{claim,             ``dra_claim_name``/``dra_claim_namespace``
               claim_namespace}``                         (4.6.0-4.8.3+, ``KUBERNETES_ENABLE_DRA``)
energy         ``migscope_mig_energy_estimated_joules``   none: DCGM repeats the *whole GPU's*
                                                          energy on every GI; it is not the slice's
============== ========================================== ==========================================

dcgm-exporter 4.9.0 renamed its default fields to DCGM 4.7's names and wrote the framebuffer in
bytes; :data:`.names.DCGM_FIELDS` lists every name read, its unit and the evidence for it.
Each series is converted to bytes or a ratio before anything else, so either generation, or
both during a rollout (the newer one read where both hold the same slice and time), gives
the same slices.

The node comes from the ``node`` label (what migscope's ServiceMonitor sets), else
``kubernetes_node`` (Prometheus' Kubernetes discovery), else ``Hostname``/``hostname``
(dcgm-exporter's ``NODE_NAME``; ``hostname`` from 4.8.3), else ``instance``. A node name that
is a dcgm-exporter pod's (an exporter without ``NODE_NAME``, :func:`.identity.exporter_pod_name`)
is reported, never planned. Pod labels are
read from ``exported_namespace``/``exported_pod`` first: when Prometheus scrapes without
``honor_labels`` the exporter's own ``pod`` label is renamed so, and ``pod`` is then the
exporter's pod (dcgm-exporter #85). Empty label values mean "no pod", as Prometheus drops them.
A series that names a DRA ResourceClaim is held, with or without a pod
(:func:`.identity.holder_of`): the holder is the pod and its claim, or the claim alone.

Detection: a file with any ``migscope_mig_info`` is migscope's (an exporter run with
``--dcgm-compat`` writes both, and migscope's is richer); otherwise one in which *any*
dcgm-exporter family carries ``GPU_I_ID`` is dcgm-exporter's: the clocks, temperatures and
power are copied onto every GPU instance, so they show the instances even where the
profiling fields or the framebuffer fields are missing (dcgm-exporter #507, #380).

What makes one slice (why: a re-partition by MIG Manager may destroy GPU instance N and
create another N, at another placement or with another profile, and the two must not be
merged into one slice with the statistics of both):

- migscope: node, GPU UUID, GPU-instance id *and* ``mig_uuid``, which every per-slice series
  carries (``core._metrics.MIG_LABELS``) and which is new for every new instance. Series
  without it fall back to node, GPU and GPU-instance id.
- dcgm-exporter: node, GPU UUID, ``GPU_I_ID`` *and* ``GPU_I_PROFILE``: there is no MIG UUID
  outside DRA mode (and DRA's ``dra_mig_device_uuid`` is a pod attribute, present only while
  a claim holds the device, so it cannot split a slice's history). An instance re-created
  with the same id *and* profile sits at the same placement and is one slice here.

Slices of the same key are yielded oldest first (by their first sample).

dcgm-exporter's families are matched case-insensitively (``dcgm_fi_prof_gr_engine_active``
after a lower-casing ``metric_relabel_configs``); a scrape renamed otherwise (a prefix) finds
nothing, and the error names the families that come closest, so that the mismatch shows.
Slices known only from a family that the analyzer does not read (the *presence* family:
the GPU instance exists, but neither activity nor framebuffer series do) are kept, with no
samples: they are classified ``unknown`` and pin their GPU, instead of leaving a hole in
the layout where an instance still is.

The package, one job a module: :mod:`.names` (the series each dialect is read from),
:mod:`.identity` (what labels say about a slice), :mod:`.detect` (which dialect, or why
none), :mod:`.from_migscope` and :mod:`.from_dcgm` (each dialect's reader), :mod:`.grouping`
(the steps both readers share), :mod:`.checks` (the data-quality pass both run, with its
notes) and :mod:`.reader` (the entry point of the file path, with what its series say of each GPU).
"""

from __future__ import annotations

from migscope.analyzer._intake.dialect.detect import (
    Dialect,
    NoMigSeriesError,
    closest_names,
    detect_dialect,
    explain_no_mig,
)
from migscope.analyzer._intake.dialect.identity import (
    CLAIM_LABELS,
    DEFAULT_NODE,
    HOLDER_LABELS,
    NODE_LABELS,
    POD_LABELS,
    SliceId,
    catalogue_model,
    exporter_pod_name,
    gpu_uuid_of,
    holder_of,
    migscope_slice_info,
    node_of,
    pod_of,
    profile_bytes,
)
from migscope.analyzer._intake.dialect.names import (
    DCGM_ACTIVITY,
    DCGM_FB_CAPACITY,
    DCGM_FB_FREE,
    DCGM_FB_USED,
    DCGM_FIELDS,
    DCGM_QUANTITIES,
    DIALECT_METRICS,
    GPU_INFO,
    MIB,
    MIG_ACTIVE_SECONDS,
    MIG_ACTIVITY,
    MIG_ENERGY,
    MIG_INFO,
    MIG_MEMORY_TOTAL,
    MIG_MEMORY_USED,
    MIG_POD_INFO,
    dcgm_family,
    dcgm_field,
    fields_of,
    indexes,
    keeps,
    presence_family,
    quantity_names,
    unit_scale,
)
from migscope.analyzer._intake.dialect.reader import SliceReader, iter_slice_series

__all__ = [
    "CLAIM_LABELS",
    "DCGM_ACTIVITY",
    "DCGM_FB_CAPACITY",
    "DCGM_FB_FREE",
    "DCGM_FB_USED",
    "DCGM_FIELDS",
    "DCGM_QUANTITIES",
    "DEFAULT_NODE",
    "DIALECT_METRICS",
    "GPU_INFO",
    "HOLDER_LABELS",
    "MIB",
    "MIG_ACTIVE_SECONDS",
    "MIG_ACTIVITY",
    "MIG_ENERGY",
    "MIG_INFO",
    "MIG_MEMORY_TOTAL",
    "MIG_MEMORY_USED",
    "MIG_POD_INFO",
    "NODE_LABELS",
    "POD_LABELS",
    "Dialect",
    "NoMigSeriesError",
    "SliceId",
    "SliceReader",
    "catalogue_model",
    "closest_names",
    "dcgm_family",
    "dcgm_field",
    "detect_dialect",
    "explain_no_mig",
    "exporter_pod_name",
    "fields_of",
    "gpu_uuid_of",
    "holder_of",
    "indexes",
    "iter_slice_series",
    "keeps",
    "migscope_slice_info",
    "node_of",
    "pod_of",
    "presence_family",
    "profile_bytes",
    "quantity_names",
    "unit_scale",
]
