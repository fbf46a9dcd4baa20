"""The audit trail: a JSON log line and, when it matters, a Kubernetes Event per action.

Who changed a node's GPU layout, from what to what and why must be answerable from the
cluster itself (``kubectl describe node`` shows the Events) and from the applier's log
(one JSON object per line: ``ts, actor, node, action, before, after, why``). Events are
best effort: failing to record one is logged, never a reason to stop half way.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, TextIO

from migscope.kube import ApiError, Kube, now_rfc3339

EVENT_NAMESPACE = "default"
"""Events about a Node go to ``default``, where ``kubectl describe node`` looks."""


class Audit:
    """Writes the log lines and Events of one run.

    Args:
        kube: The cluster (None: log lines only, as in a dry run).
        actor: Who acts (the Lease identity).
        out: Where log lines go (stderr).
        clock: Timestamps, for tests.
    """

    def __init__(
        self,
        kube: Kube | None,
        *,
        actor: str,
        out: TextIO | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.kube = kube
        self.actor = actor
        self.out = out
        self.clock = clock
        self.lines: list[dict[str, Any]] = []

    def log(self, node: str | None, action: str, **fields: Any) -> dict[str, Any]:
        """One JSON line: ``ts, actor, node, action`` and ``fields`` (before, after, why...)."""
        record = {
            "ts": self.clock().isoformat().replace("+00:00", "Z"),
            "actor": self.actor,
            "node": node,
            "action": action,
            **fields,
        }
        self.lines.append(record)
        stream = self.out if self.out is not None else sys.stderr
        stream.write(json.dumps(record, sort_keys=False, default=str) + "\n")
        stream.flush()
        return record

    def event(
        self, node: dict[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None:
        """A core/v1 Event on the Node (best effort: a failure is logged, not raised)."""
        if self.kube is None:
            return
        meta = node.get("metadata") or {}
        now = now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": "migscope.", "namespace": EVENT_NAMESPACE},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Node",
                "name": meta.get("name"),
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": "migscope-applier"},
            "reportingComponent": "migscope.io/applier",
            "reportingInstance": self.actor,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.kube.create_event(EVENT_NAMESPACE, body)
        except ApiError as exc:
            self.log(meta.get("name"), "event-failed", reason=reason, why=str(exc))
