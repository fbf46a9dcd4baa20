"""Right-sizing a slice held through a Kubernetes DRA ResourceClaim: which claim, which selector.

Under the device plugin a smaller slice is asked for by resource
name (``nvidia.com/mig-2g.35gb``), and the plan's new layout is the whole fix. Under DRA a
pod gets a MIG slice from its ResourceClaim's device request (DeviceClass ``mig.nvidia.com``,
kubernetes-sigs/dra-driver-nvidia-gpu), and a claim without a profile selector takes
whatever slice the scheduler finds, so an oversized slice is only fixed for good when the
request selects the smaller profile. The recommendation therefore names the claim and the
CEL selector its request should carry, in the form NVIDIA's MIG guide uses::

    device.attributes['gpu.nvidia.com'].profile == '2g.35gb'

A claim made from a ResourceClaimTemplate is named by the resource-claim controller
``<pod>-<pod claim name>-<5 random characters>`` (kubernetes/kubernetes
``pkg/controller/resourceclaim/controller.go``: ``generateName := pod.Name + "-" +
podClaim.Name + "-"``, both parts cut in proportion when longer than 57 characters, then the
API server's 5-character suffix from ``bcdfghjklmnpqrstvwxz2456789``). When the claim's name
has that shape around its pod's name, the advice says the claim probably came from a
template (the template's name is not in the claim's name, and is never guessed); without a
known pod nothing is said about templates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from migscope.analyzer._judge.classify import Classification, Status
from migscope.analyzer._model import JsonValue, Owner, SliceStats
from migscope.core import ClaimResizeV1, SliceV1

MIG_DEVICE_CLASS = "mig.nvidia.com"
"""The DeviceClass NVIDIA's DRA driver advertises pre-created MIG slices under."""

DRA_ATTRIBUTE_DOMAIN = "gpu.nvidia.com"
"""The qualifier of the driver's device attributes (``profile``, ``uuid``, ``parentUUID``)."""

_SUFFIX = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5}$")
"""The API server's ``generateName`` suffix (``k8s.io/apimachinery`` ``rand.String(5)``)."""

_MAX_BASE = 57
"""The resource-claim controller's longest ``generateName`` (63 minus the 5 + 1 suffix)."""


def profile_selector(profile: str) -> str:
    """The CEL expression that makes a device request select ``profile``."""
    return f"device.attributes['{DRA_ATTRIBUTE_DOMAIN}'].profile == '{profile}'"


def template_origin(claim: str, pod: str) -> tuple[bool, str | None]:
    """Whether ``claim`` looks generated for ``pod`` from a template, and the pod's claim entry.

    Returns:
        ``(True, name)`` when the claim is ``<pod>-<name>-<suffix>``; ``(True, None)`` when it
        is such a name cut to 57 characters (the entry's name is then partly lost);
        ``(False, None)`` otherwise, and always without a pod.
    """
    match = _SUFFIX.search(claim)
    if not pod or match is None:
        return False, None
    base = claim[: match.start()]
    if base.startswith(pod + "-") and len(base) > len(pod) + 1:
        return True, base[len(pod) + 1 :]
    if len(base) + 1 == _MAX_BASE:  # both parts cut in proportion: a prefix of the pod, "-"
        cut = base.find("-", 1)
        while cut > 0:
            if pod.startswith(base[:cut]) and cut < len(base) - 1:
                return True, None
            cut = base.find("-", cut + 1)
    return False, None


@dataclass(frozen=True)
class ClaimResize:
    """What to change in a ResourceClaim so that its pod gets a right-sized MIG slice.

    Attributes:
        claim: The claim's name.
        namespace: Its namespace (its pod's).
        pod: The pod that used it, or None when the series named only the claim.
        from_template: The claim's name has the shape the resource-claim controller gives a
            claim it creates from a ResourceClaimTemplate for ``pod``: change the template
            (the pod's ``resourceClaims[]`` entry names it), not this claim, which is
            deleted with its pod.
        pod_claim: That ``resourceClaims[]`` entry's name, when the claim's name shows it.
        current_profile: The profile the claim holds now.
        profile: The profile its device request should select.
        device_class: The DeviceClass of that request.
        selector: The CEL selector that selects ``profile``.
    """

    claim: str
    namespace: str
    pod: str | None
    from_template: bool
    pod_claim: str | None
    current_profile: str
    profile: str
    device_class: str = MIG_DEVICE_CLASS

    @property
    def selector(self) -> str:
        """The request's CEL selector (see :func:`profile_selector`)."""
        return profile_selector(self.profile)

    def sentence(self) -> str:
        """The recommendation in one sentence (Markdown and HTML print it)."""
        where = f"ResourceClaim {self.namespace}/{self.claim}"
        if self.pod:
            where += f" (pod {self.pod})"
        text = (
            f"{where} holds a {self.current_profile}; its device request "
            f"(deviceClassName {self.device_class}) should select {self.profile}: "
            f'selectors: [cel: {{expression: "{self.selector}"}}]'
        )
        if self.from_template:
            entry = ""
            if self.pod_claim:
                entry = f" (the pod's resourceClaims entry {self.pod_claim!r})"
            text += (
                f". The claim's name suggests it was generated from a ResourceClaimTemplate"
                f"{entry}: change the template, since the claim is re-created from it"
            )
        return text + "."

    @classmethod
    def of_report(cls, data: ClaimResizeV1) -> ClaimResize:
        """The advice as a report holds it (the renderers read ``report.json``)."""
        return cls(
            claim=data.claim,
            namespace=data.namespace,
            pod=data.pod,
            from_template=data.from_template,
            pod_claim=data.pod_claim,
            current_profile=data.current_profile,
            profile=data.profile,
            device_class=data.device_class,
        )

    def to_dict(self) -> dict[str, JsonValue]:
        """The report's ``claim_resize`` object (docs/report-schema.md)."""
        return {
            "claim": self.claim,
            "namespace": self.namespace,
            "pod": self.pod,
            "from_template": self.from_template,
            "pod_claim": self.pod_claim,
            "current_profile": self.current_profile,
            "profile": self.profile,
            "device_class": self.device_class,
            "selector": self.selector,
        }


def holder_text(namespace: str | None, pod: str | None, claim: str | None) -> str:
    """A holder as the reports print it: ``ns/pod``, ``ns/pod (claim c)``, ``claim ns/c``."""
    if not pod:
        return f"claim {namespace}/{claim}" if claim else "—"
    text = f"{namespace}/{pod}"
    return f"{text} (claim {claim})" if claim else text


def resize_text(s: SliceV1) -> str:
    """A report slice's claim advice as one sentence, or "" when it has none."""
    return ClaimResize.of_report(s.claim_resize).sentence() if s.claim_resize else ""


def _claim_owner(stats: SliceStats) -> Owner | None:
    """The holder through a claim that held the slice longest (owners come longest first)."""
    return next((o for o in stats.owners if o.claim), None)


def claim_resize(stats: SliceStats, verdict: Classification) -> ClaimResize | None:
    """The claim change an oversized slice held through DRA calls for; None otherwise."""
    if verdict.status is not Status.OVERSIZED or not verdict.suggested_profile:
        return None
    owner = _claim_owner(stats)
    if owner is None:
        return None
    from_template, pod_claim = template_origin(owner.claim, owner.pod)
    return ClaimResize(
        claim=owner.claim,
        namespace=owner.namespace,
        pod=owner.pod or None,
        from_template=from_template,
        pod_claim=pod_claim,
        current_profile=stats.info.profile,
        profile=verdict.suggested_profile,
    )
