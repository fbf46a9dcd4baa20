"""An in-process Kubernetes API test server with real semantics, and a simulated MIG Manager.

Test support only, never shipped. No kube-apiserver can run where migscope's tests run, so
the applier is tested against :class:`KubeApiServer`: a real HTTP server on loopback that the
unmodified official ``kubernetes`` client talks to, reproducing the behaviour controllers
depend on (resourceVersion conflicts, the three patch formats, label and field selectors,
watches with bookmarks and 410 expiry, eviction through PDBs with 429) plus fault injection.
:class:`~support.kubeapi.mig_manager.MigManagerSim` plays NVIDIA's MIG Manager and device
plugin against it. What is and is not reproduced is listed in each module's docstring:
:mod:`.store` (objects, writes, watches), :mod:`.patch`, :mod:`.selectors`,
:mod:`.eviction`, :mod:`.validation`, :mod:`.app` (URLs, verbs), :mod:`.faults`.
"""

from .errors import ApiError
from .faults import Delay, Drop, EndWatch, ExpireWatch, Fault, Faults, Respond
from .objects import config_map, lease, node, pdb, pod
from .resources import BUILTIN_TYPES, ResourceType
from .server import THREAD_PREFIX, KubeApiServer, RecordedRequest
from .store import Change, Store
from .watch import WatchOptions

__all__ = [
    "BUILTIN_TYPES",
    "THREAD_PREFIX",
    "ApiError",
    "Change",
    "Delay",
    "Drop",
    "EndWatch",
    "ExpireWatch",
    "Fault",
    "Faults",
    "KubeApiServer",
    "RecordedRequest",
    "ResourceType",
    "Respond",
    "Store",
    "WatchOptions",
    "config_map",
    "lease",
    "node",
    "pdb",
    "pod",
]
