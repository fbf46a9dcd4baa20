"""PodDisruptionBudget arithmetic for the Eviction API (test fake).

In a real cluster two parts cooperate: the disruption controller keeps each PDB's ``status``
(``expectedPods``, ``currentHealthy``, ``desiredHealthy``, ``disruptionsAllowed``) up to date
in the background, and the eviction handler (``pkg/registry/core/pod/storage/eviction.go``)
decides from that status. The fake has no background controller: the store runs the
controller's computation for the one PDB an eviction touches, writes the status if it
changed, then applies the handler's rules to it (:func:`evict`, which works on the store's
internals under its lock, so the whole eviction is atomic). The pure parts:

* which PDBs guard a pod: same namespace, selector matches the pod's labels; a ``null`` or
  empty selector matches nothing (the eviction handler's rule);
* :func:`budget_status` — the controller's numbers. ``expectedPods`` comes from the scale
  of the pods' owning controllers upstream; the fake has no controllers, so it counts the
  pods the selector matches plus the pods evicted through this budget that no new matching
  pod has replaced yet (a ReplicaSet wants its evicted pods back; a pod deleted directly is
  a scale-down). Healthy means
  ``Ready=True`` and not being deleted. ``minAvailable``/``maxUnavailable`` may be ints or
  percentages, which round *up* (``GetScaledValueFromIntOrPercent(..., true)``). Pods already
  evicted but not gone (``status.disruptedPods``) do not count as healthy.

Not reproduced: the 2-minute expiry of ``disruptedPods`` entries (the fake deletes evicted
pods at once, so entries only ever name pods that are gone and are pruned on the next
eviction), ``unhealthyPodEvictionPolicy: AlwaysAllow``, and PDBs with neither field set.
"""

from __future__ import annotations

import copy
import datetime
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from . import errors
from .errors import ApiError
from .resources import ResourceType
from .selectors import match_label_selector_object

if TYPE_CHECKING:
    from .store import Change, Store

__all__ = [
    "budget_status",
    "can_ignore_pdb",
    "evict",
    "guarding_budgets",
    "is_ready",
    "note_replacement",
]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_ready(pod: Mapping[str, Any]) -> bool:
    """``podutil.IsPodReady``: the ``Ready`` condition is ``True``."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def can_ignore_pdb(pod: Mapping[str, Any]) -> bool:
    """Pods that evict without a budget check: terminal, Pending, or already being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    return phase in ("Succeeded", "Failed", "Pending") or deleting


def guarding_budgets(
    pdbs: Iterable[Mapping[str, Any]], pod: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """The PDBs of the pod's namespace whose non-empty selector matches the pod."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    namespace = (pod.get("metadata") or {}).get("namespace")
    found = []
    for pdb in pdbs:
        if (pdb.get("metadata") or {}).get("namespace") != namespace:
            continue
        selector = (pdb.get("spec") or {}).get("selector")
        if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
            continue
        if match_label_selector_object(selector, labels):
            found.append(pdb)
    return found


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        return math.ceil(int(text[:-1]) * total / 100)
    return int(text)


def budget_status(
    pdb: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    *,
    now: str,
    awaiting_replacement: int = 0,
) -> dict[str, Any]:
    """The ``status`` the disruption controller would write for ``pdb`` given ``pods``.

    Args:
        pdb: The PodDisruptionBudget.
        pods: Every pod of the PDB's namespace (the selector is applied here).
        now: RFC 3339 time for a condition that changes.
        awaiting_replacement: Evicted pods their owner still wants (counted as expected).
    """
    spec = pdb.get("spec") or {}
    old = dict(pdb.get("status") or {})
    selector = spec.get("selector")
    matching = [
        p
        for p in pods
        if selector
        and match_label_selector_object(selector, (p.get("metadata") or {}).get("labels") or {})
    ]
    names = {(p.get("metadata") or {}).get("name") for p in matching}
    disrupted = {k: v for k, v in (old.get("disruptedPods") or {}).items() if k in names}
    healthy = sum(
        1
        for p in matching
        if is_ready(p)
        and not (p.get("metadata") or {}).get("deletionTimestamp")
        and p["metadata"].get("name") not in disrupted
    )
    expected = len(matching) + awaiting_replacement
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = 0
    allowed = max(0, healthy - desired)
    generation = (pdb.get("metadata") or {}).get("generation", 1)
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": allowed,
        "expectedPods": expected,
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    status["conditions"] = [_allowed_condition(old, allowed > 0, generation, now)]
    return status


def _allowed_condition(
    old_status: Mapping[str, Any], allowed: bool, generation: int, now: str
) -> dict[str, Any]:
    value = "True" if allowed else "False"
    previous = next(
        (c for c in old_status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"),
        None,
    )
    since = previous["lastTransitionTime"] if previous and previous.get("status") == value else now
    return {
        "type": "DisruptionAllowed",
        "status": value,
        "reason": "SufficientPods" if allowed else "InsufficientPods",
        "message": "",
        "observedGeneration": generation,
        "lastTransitionTime": since,
    }


# ------------------------------------------------------------------- the eviction handler
def evict(store: Store, namespace: str, name: str, eviction: Mapping[str, Any]) -> dict[str, Any]:
    """POST ``pods/<name>/eviction``: delete the pod if its disruption budget allows.

    Follows the upstream handler step by step (module docstring): terminal, Pending
    and terminating pods are deleted without a budget check; more than one matching PDB
    is a 500; an unready pod may go while the budget is otherwise met; else the PDB's
    status (recomputed first, as the disruption controller would have) must allow a
    disruption, which is then recorded in ``status.disruptedPods`` before the delete.

    Returns:
        ``Status`` ``Success`` (the HTTP layer answers 201).

    Raises:
        ApiError: 404 (no such pod), 400 (names disagree), 429 ``TooManyRequests`` with a
            ``DisruptionBudget`` cause, 500 (several PDBs), 409 (preconditions).
    """
    pods = store._types[("", "pods")]
    pdbs = store._types[("policy", "poddisruptionbudgets")]
    body_name = (eviction.get("metadata") or {}).get("name")
    if body_name != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = eviction.get("deleteOptions") or {}
    preconditions = options.get("preconditions") or {}
    dry_run = "All" in (options.get("dryRun") or [])
    changes: list[Change] = []
    try:
        with store._cond:
            pod = store._lookup(pods, namespace, name)
            budgets = guarding_budgets(store._objects[pdbs.key].values(), pod)
            if not can_ignore_pdb(pod):
                if len(budgets) > 1:
                    raise ApiError(
                        errors.status_failure(
                            500,
                            "",
                            "This pod has more than one PodDisruptionBudget, which the "
                            "eviction subresource does not support.",
                        )
                    )
                if budgets:
                    _spend_budget(store, pdbs, budgets[0], pod, changes, dry_run=dry_run)
            _, done = store._delete_locked(pods, pod, preconditions, dry_run=dry_run)
            changes.extend(done)
            for budget in budgets if done else ():
                key = (namespace, budget["metadata"]["name"])
                store._evicted[key] = store._evicted.get(key, 0) + 1
    finally:
        store._run_hooks(changes)
    return errors.status_success()


def note_replacement(store: Store, new_pod: Mapping[str, Any]) -> None:
    budgets = guarding_budgets(store._objects[("policy", "poddisruptionbudgets")].values(), new_pod)
    for budget in budgets:
        key = (new_pod["metadata"]["namespace"], budget["metadata"]["name"])
        if store._evicted.get(key):
            store._evicted[key] -= 1


def _spend_budget(
    store: Store,
    pdbs: ResourceType,
    pdb: Mapping[str, Any],
    pod: Mapping[str, Any],
    changes: list[Change],
    *,
    dry_run: bool,
) -> None:
    namespace = pod["metadata"]["namespace"]
    in_namespace = [p for (ns, _), p in store._objects[("", "pods")].items() if ns == namespace]
    budget_key = (namespace, pdb["metadata"]["name"])
    status = budget_status(
        pdb,
        in_namespace,
        now=_now(),
        awaiting_replacement=store._evicted.get(budget_key, 0),
    )
    current = _refresh_status(store, pdbs, pdb, status, changes)
    if not is_ready(pod) and 0 < status["desiredHealthy"] <= status["currentHealthy"]:
        return  # an unready pod may go while the budget holds without it
    if status["disruptionsAllowed"] == 0:
        raise errors.too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            causes=[
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {pdb['metadata']['name']} needs "
                    f"{status['desiredHealthy']} healthy pods and has "
                    f"{status['currentHealthy']} currently",
                }
            ],
        )
    if dry_run:
        return
    spent = copy.deepcopy(current["status"])
    spent["disruptionsAllowed"] -= 1
    spent.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = _now()
    if spent["disruptionsAllowed"] == 0:
        spent["conditions"] = [
            {
                **c,
                "status": "False",
                "reason": "InsufficientPods",
                "lastTransitionTime": _now(),
            }
            if c.get("type") == "DisruptionAllowed"
            else c
            for c in spent.get("conditions", [])
        ]
    _refresh_status(store, pdbs, current, spent, changes)


def _refresh_status(
    store: Store,
    rtype: ResourceType,
    obj: Mapping[str, Any],
    status: Mapping[str, Any],
    changes: list[Change],
) -> dict[str, Any]:
    old = store._lookup(rtype, obj["metadata"].get("namespace"), obj["metadata"]["name"])
    if old.get("status") == status:
        return old
    new = copy.deepcopy(old)
    new["status"] = copy.deepcopy(dict(status))
    changes.append(store._commit(rtype, "MODIFIED", new, old))
    return new
