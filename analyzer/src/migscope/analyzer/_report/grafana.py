"""Links from the report to migscope's Grafana dashboards, at the window the report covers.

Why in the report: a slice or a namespace in the report is one click from its history in
Grafana (the node dashboard's slice map, the namespaces dashboard), over the same week.
Grafana's address is the user's (``--grafana-url``, Helm ``report.grafanaUrl``); the
dashboards' uids are the ones migscope ships (``dashboards/*.json``, built by
:mod:`migscope.core._dashboards`), so a link opens the dashboard whatever folder it was
imported into. Links follow Grafana's URL scheme: ``<base>/d/<uid>?from=<ms>&to=<ms>`` and
``var-<name>=<value>`` for a dashboard variable.

The base URL is checked: http or https only (never ``javascript:`` into a page), no user or
password (the report is mailed around; a credential in it would leak), no query or fragment.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from urllib.parse import quote, urlsplit

from migscope.core import DASHBOARDS, ReportV1, UserError

DASHBOARD_FILES: Mapping[str, str] = {
    "fleet": "migscope-fleet.json",
    "node": "migscope-node.json",
    "namespaces": "migscope-namespaces.json",
}
"""The report's name for each dashboard → its file in ``dashboards/``."""

DASHBOARD_TITLES: Mapping[str, str] = {
    "fleet": "fleet",
    "node": "nodes and slices",
    "namespaces": "namespaces",
}
"""What a report calls each dashboard in its links, in the order it lists them."""


class GrafanaUrlError(UserError):
    """``--grafana-url`` is not a plain http(s) address of a Grafana."""


@cache
def dashboard_uids() -> dict[str, str]:
    """``{fleet|node|namespaces: uid}`` of the dashboards migscope ships."""
    return {name: str(DASHBOARDS[file]()["uid"]) for name, file in DASHBOARD_FILES.items()}


_NOT_IN_URLS = frozenset('<>"`{}|\\^')
"""Characters RFC 3986 leaves out of URLs; in a link they would end it (``<url>`` in
Markdown, an attribute in HTML) where a browser would not."""


def normalise_base_url(url: str) -> str:
    r"""``url`` without a trailing slash, after checking it is a plain http(s) address.

    Args:
        url: Grafana's root as a browser reaches it (``https://grafana.example``, or with a
            sub-path when Grafana is served under one: ``https://example/grafana``).

    Raises:
        GrafanaUrlError: another scheme, no host, a user or password, a query or a fragment,
            or a character no URL holds (white space, control characters, ``<>"`{}|\\^``).
    """
    text = url.strip()
    odd = sorted({c for c in text if c.isspace() or not c.isprintable() or c in _NOT_IN_URLS})
    if odd:
        shown = " ".join(repr(c) for c in odd)
        raise GrafanaUrlError(f"--grafana-url {url!r}: characters a URL cannot hold: {shown}")
    try:
        parts = urlsplit(text)
        port = parts.port  # a bad port raises here
    except ValueError as exc:
        raise GrafanaUrlError(f"--grafana-url {url!r}: not a URL ({exc})") from exc
    del port
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GrafanaUrlError(f"--grafana-url {url!r}: give an http:// or https:// address")
    if parts.username is not None or parts.password is not None:
        raise GrafanaUrlError(
            f"--grafana-url: {parts.hostname}: no user or password in the URL (the report "
            "is shared; log in to Grafana in the browser)"
        )
    if parts.query or parts.fragment:
        raise GrafanaUrlError(f"--grafana-url {url!r}: no query or fragment, only Grafana's root")
    return text.rstrip("/")


def grafana_section(url: str) -> dict[str, object]:
    """The report's ``grafana`` entry: the checked base URL and the dashboards' uids.

    Raises:
        GrafanaUrlError: as :func:`normalise_base_url`.
    """
    return {"url": normalise_base_url(url), "dashboards": dict(dashboard_uids())}


def dashboard_url(
    base: str,
    uid: str,
    *,
    start_unix: float,
    end_unix: float,
    variables: Mapping[str, str] | None = None,
) -> str | None:
    """A link to dashboard ``uid`` over ``[start, end]`` with its variables set.

    Args:
        base: Grafana's root; checked again here (a report.json may have been edited), a
            bad one gives None, so that no link is drawn.
        uid: The dashboard's uid.
        start_unix: Window start, Unix seconds.
        end_unix: Window end, Unix seconds.
        variables: Dashboard variables (``{"node": "gpu-node-a"}``), URL-encoded here.

    Returns:
        The URL (not HTML-escaped), or None when ``base`` is not acceptable.
    """
    try:
        root = normalise_base_url(base)
    except GrafanaUrlError:
        return None
    query = [f"from={int(start_unix * 1000)}", f"to={int(end_unix * 1000)}"]
    for name, value in (variables or {}).items():
        query.append(f"var-{quote(name, safe='')}={quote(value, safe='')}")
    return f"{root}/d/{quote(uid, safe='')}?{'&'.join(query)}"


class DashboardLinks:
    """Links to migscope's dashboards over a report's window (none without ``grafana``)."""

    def __init__(self, report: ReportV1) -> None:
        self.base = report.grafana.url if report.grafana is not None else None
        self.uids: Mapping[str, str] = report.grafana.dashboards if report.grafana else {}
        self.start = report.window.start_unix
        self.end = report.window.end_unix

    def url(self, dashboard: str, **variables: str) -> str | None:
        """A link to ``dashboard`` (a :data:`DASHBOARD_FILES` name), None without Grafana."""
        uid = self.uids.get(dashboard)
        if self.base is None or uid is None:
            return None
        return dashboard_url(
            self.base, uid, start_unix=self.start, end_unix=self.end, variables=variables
        )
