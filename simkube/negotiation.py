"""Content negotiation as kube-apiserver does it: which representation an ``Accept`` asks for.

A resource read may ask for the server-side ``Table`` (``application/json;as=Table;v=v1;
g=meta.k8s.io``, v1beta1 too), with ``includeObject=None|Metadata|Object``; ``/api`` and
``/apis`` may ask for the aggregated discovery document
(``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList``). The first media
range of the header that the server can serve wins, as in apimachinery's negotiation; a header
that names none of them is refused with 406.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ApiError

NOT_ACCEPTABLE = ("only the following media types are accepted: application/json, "
                  "application/yaml, application/vnd.kubernetes.protobuf")
_PLAIN = {"application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
          "application/*", "*/*", "application/json;stream=watch",
          "application/vnd.kubernetes.protobuf;stream=watch"}


@dataclass(frozen=True)
class MediaRange:
    mime: str
    params: dict[str, str]

    @property
    def as_(self) -> str:
        return self.params.get("as", "")


def parse_accept(header: str | None) -> list[MediaRange]:
    out = []
    for part in (header or "").split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        params = {}
        for p in pieces[1:]:
            key, _, value = p.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        out.append(MediaRange(pieces[0].lower(), params))
    return out


@dataclass(frozen=True)
class Representation:
    """How to answer a resource read: plain objects, a Table of ``table_version``, or only
    metadata (``partial``: PartialObjectMetadata or PartialObjectMetadataList)."""

    table_version: str | None = None  # "v1" / "v1beta1"
    include_object: str = "Metadata"
    partial: str | None = None
    partial_version: str = "v1"

    @property
    def table(self) -> bool:
        return self.table_version is not None


PLAIN = Representation()
PARTIAL = ("PartialObjectMetadata", "PartialObjectMetadataList")


def _table_version(r: MediaRange) -> str | None:
    if r.as_ == "Table" and r.params.get("g") == "meta.k8s.io" and \
            r.params.get("v") in ("v1", "v1beta1") and r.mime in ("application/json", "*/*",
                                                                  "application/*"):
        return r.params["v"]
    return None


def negotiate(header: str | None, include_object: str | None) -> Representation:
    """The representation of a GET of a resource (a list, an object or a watch)."""
    ranges = parse_accept(header)
    if not ranges:
        return PLAIN
    for r in ranges:
        version = _table_version(r)
        if version is not None:
            include = include_object or "Metadata"
            if include not in ("None", "Metadata", "Object"):
                raise ApiError(400, "Unable to convert to Table as requested: includeObject: "
                                    f'Invalid value: "{include}": must be \'Metadata\', '
                                    "'Object', 'None', or empty")
            return Representation(version, include)
        if r.as_ in PARTIAL and r.params.get("g") == "meta.k8s.io" and \
                r.params.get("v") in ("v1", "v1beta1"):
            return Representation(partial=r.as_, partial_version=r.params["v"])
        if not r.as_ and (r.mime in _PLAIN or r.mime.split(";")[0] in _PLAIN):
            return PLAIN
    raise ApiError(406, NOT_ACCEPTABLE, reason="NotAcceptable")


AGGREGATED = "APIGroupDiscoveryList"


def wants_aggregated(header: str | None, aggregated_served: bool = True) -> bool | None:
    """For /api and /apis: True for the aggregated document, False for the legacy one, None
    when the header accepts neither (406). Other discovery paths serve no aggregated form."""
    ranges = parse_accept(header)
    if not ranges:
        return False
    for r in ranges:
        if r.as_ == AGGREGATED:
            if aggregated_served and r.params.get("g") == "apidiscovery.k8s.io" \
                    and r.params.get("v") == "v2":
                return True
            continue  # v2beta1 is no longer served
        if not r.as_ and r.mime in _PLAIN:
            return False
    return None
