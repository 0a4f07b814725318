"""What a series is (data source, channel, tags) and how a subscription's channel selects series."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum


class SeriesKind(StrEnum):
    """A series' kind, fixed by its first write (the log refuses points of another kind on it)."""

    NUMERIC = "double"
    ENUM = "string"
    # Log lines (`POST /storage/writer/v1/logs/{rid}`): each point's message and args as compact JSON
    # text in the string column, as `log_text` writes it (docs/decisions/0071-log-points.md).
    LOG = "log"
    # Arrays and structs (nominal-api's `array` and `struct` points), also as JSON text in the string
    # column, as `composite_points` writes them (docs/decisions/0104-array-and-struct-points.md).
    DOUBLE_ARRAY = "double-array"
    STRING_ARRAY = "string-array"
    STRUCT = "struct"


@dataclass(frozen=True)
class SeriesKey:
    data_source_rid: str
    channel: str
    tags: tuple[tuple[str, str], ...]  # sorted, so equal tag maps give equal keys

    @classmethod
    def of(cls, data_source_rid: str, channel: str, tags: dict[str, str]) -> SeriesKey:
        return cls(data_source_rid, channel, tuple(sorted(tags.items())))

    def tags_json(self) -> str:
        return json.dumps(dict(self.tags), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class SeriesInfo:
    id: int
    key: SeriesKey
    kind: SeriesKind


@dataclass(frozen=True)
class TagCondition:
    """One `TagFilter` (Nominal's tag filter semantics): IN holds when the series has the tag with one
    of `values`; NOT_IN holds when it has not (a series without the tag passes NOT_IN)."""

    key: str
    values: frozenset[str]
    negate: bool = False

    def holds(self, tags: dict[str, str]) -> bool:
        found = tags.get(self.key) in self.values
        return not found if self.negate else found


@dataclass(frozen=True)
class ChannelSelector:
    """A resolved channel: series of this data source and channel whose tags include `tags` and pass
    every one of `tag_filters`. `injected` tags (a dataset's `tag`, an asset's or a run's branch tags)
    are not in the log: they take part in grouping as if the series carried them."""

    data_source_rid: str
    channel: str
    tags: tuple[tuple[str, str], ...]
    group_by: tuple[str, ...] = ()
    tag_filters: tuple[TagCondition, ...] = ()
    injected: tuple[tuple[str, str], ...] = ()

    def matches(self, key: SeriesKey) -> bool:
        if key.data_source_rid != self.data_source_rid or key.channel != self.channel:
            return False
        series_tags = dict(key.tags)
        return all(series_tags.get(k) == v for k, v in self.tags) and all(
            f.holds(series_tags) for f in self.tag_filters
        )

    def group_of(self, key: SeriesKey) -> tuple[tuple[str, str], ...]:
        """The tag combination a series belongs to under `groupByTags` (empty when not grouped)."""
        series_tags = {**dict(key.tags), **dict(self.injected)}
        return tuple((k, series_tags.get(k, "")) for k in self.group_by)
