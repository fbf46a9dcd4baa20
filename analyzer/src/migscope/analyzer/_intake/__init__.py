"""The intake: where the analyzer's slice history comes from, and the statistics made of it.

The first step of the analyzer's flow (intake → judge → plan → report). Every source yields
slices with their window statistics; the two ways to compute those sit side by side, from raw
samples here (:mod:`.stats_local`, for a file or the simulator) or in PromQL on the server
(:mod:`.stats_promql`), held to the same answers. The series of either exporter's dialect are
read by :mod:`.dialect`, and what the data says about each GPU by :mod:`.gpu_facts` and
:mod:`.gpu_catalogue`.

One module per source, one protocol for all.

Every source implements :class:`~migscope.analyzer._intake.base.Source` (window, slices,
notes, provenance) and is analysed by :func:`migscope.analyzer.run`:

* :mod:`~migscope.analyzer._intake.file`: an OpenMetrics/text exposition file
  (``--source``), migscope's or dcgm-exporter's series;
* :mod:`~migscope.analyzer._intake.simulation`: the simulator's ground truth (``--simulate``);
* :mod:`~migscope.analyzer._intake.prometheus_source`: a Prometheus-compatible server
  (``--prometheus``: Prometheus, Thanos, Mimir, Cortex, VictoriaMetrics), whose statistics
  are PromQL (:mod:`~migscope.analyzer._intake.stats_promql`) over the HTTP API client
  (:mod:`~migscope.analyzer._intake.prometheus`), with selectors built without injection
  (:mod:`~migscope.analyzer._intake.promql`);
* :mod:`~migscope.analyzer._intake.embedded_prometheus`: another source replayed through a
  real Prometheus started for the run (``--prometheus-embedded``,
  :mod:`~migscope.analyzer._intake.local_prometheus`).

Pending pods (:mod:`~migscope.analyzer._intake.kube_pending`) are demand, not history: they
join the options. ``docs/analyzer-sources.md`` explains how to connect to each server.
"""
