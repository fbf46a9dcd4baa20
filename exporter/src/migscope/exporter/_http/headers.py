"""Request header lines read as RFC 9110 and 9112 require of a server, not as cheroot reads them.

cheroot's :class:`~cheroot.server.HeaderReader` is lenient where the RFCs say a server must
not be, and every leniency is a way for a request to mean one thing to a proxy in front of
the exporter and another to the exporter (request smuggling), or to put bytes into the
headers an application trusts:

* a line starting with a space or tab continues the previous field (obs-fold); RFC 9112
  section 5.2 lets a server either reject such a request with 400 or replace each fold with
  a space. cheroot does neither: it replaces the previous field's value with the folded part,
  or joins it with a comma;
* a field value holding NUL, a bare CR or another control character: RFC 9110 section 5.5
  says values with CR, LF or NUL must be rejected or have those replaced, and its grammar
  (``field-vchar``) admits no control character but HTAB;
* whitespace between the field name and the colon (``Host : x``), or a name that is not a
  token: RFC 9112 section 5.1 says a server must reject such a request with 400. cheroot
  strips the whitespace.

:class:`StrictHeaderReader` rejects all of these (``ValueError``, which cheroot answers with
``400 Bad Request`` and a closed connection) and otherwise reads fields exactly as cheroot
does: names title-cased, repeated list fields joined with ``", "``. Rejecting is the simpler
and safer of the RFC's two choices; no client the exporter serves (Prometheus, curl, the
kubelet's probes) folds lines or sends control characters.
"""

from __future__ import annotations

import re
from typing import Any

from cheroot.server import (  # type: ignore[attr-defined]  # not in cheroot's stub
    HeaderReader,
    comma_separated_headers,
)

# field-name = token (RFC 9110 section 5.1), then the colon at once; OWS around the value.
_FIELD_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*(.*?)[ \t]*\r\n", re.DOTALL)
# Control characters other than HTAB (CR, LF and NUL among them): not in field-vchar.
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


class StrictHeaderReader(HeaderReader):
    """cheroot's header reader, refusing obs-fold, control characters and malformed names."""

    def __call__(self, rfile: Any, hdict: Any = None) -> Any:
        """Read header lines up to the empty line into ``hdict`` (a new dict if None).

        Raises:
            ValueError: A line cheroot would refuse, a folded line, a malformed field name
                or a control character other than HTAB in a value; the message is the
                body of cheroot's ``400 Bad Request``.
        """
        if hdict is None:
            hdict = {}
        while True:
            line = rfile.readline()
            if not line:
                raise ValueError("Illegal end of headers.")
            if line == b"\r\n":
                return hdict
            if not line.endswith(b"\r\n"):
                raise ValueError("HTTP requires CRLF terminators")
            if line[:1] in (b" ", b"\t"):
                raise ValueError("Folded header line (obs-fold) is not accepted.")
            match = _FIELD_LINE.fullmatch(line)
            if match is None:
                raise ValueError("Illegal header line.")
            name, value = match.groups()
            if _CONTROL.search(value):
                raise ValueError("Illegal control character in a header value.")
            key = name.title()  # as cheroot spells names (a token has no space to strip)
            if key in comma_separated_headers:
                existing = hdict.get(key)
                if existing:
                    value = b", ".join((existing, value))
            hdict[key] = value
