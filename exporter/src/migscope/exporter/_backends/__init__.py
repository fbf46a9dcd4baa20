"""Hardware backends: NVML (default, also driving the simulator) and DCGM.

A backend turns one call of :meth:`Backend.read` into readings of every GPU and MIG slice on
the node. It owns its library session and whatever state sampling needs between cycles (GPM
samples, cached handles); everything else — pacing, power estimates, the snapshot — is the
sampler's job, so a new backend only has to answer one question.
"""

from migscope.exporter._backends.base import Backend, BackendError, BackendReading

__all__ = ["Backend", "BackendError", "BackendReading"]
