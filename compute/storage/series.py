"""What a series is (data source, channel, tags) and how a subscription's channel selects series."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum


class SeriesKind(StrEnum):
    NUMERIC = "double"
    ENUM = "string"


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
class ChannelSelector:
    """A resolved `DataSourceChannel`: series of this channel whose tags include `tags`."""

    data_source_rid: str
    channel: str
    tags: tuple[tuple[str, str], ...]
    group_by: tuple[str, ...] = ()

    def matches(self, key: SeriesKey) -> bool:
        if key.data_source_rid != self.data_source_rid or key.channel != self.channel:
            return False
        series_tags = dict(key.tags)
        return all(series_tags.get(k) == v for k, v in self.tags)

    def group_of(self, key: SeriesKey) -> tuple[tuple[str, str], ...]:
        """The tag combination a series belongs to under `groupByTags` (empty when not grouped)."""
        series_tags = dict(key.tags)
        return tuple((k, series_tags.get(k, "")) for k in self.group_by)
