"""A mapping bounded to its most recently used entries (the caches of compiled programs and runs)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import ItemsView, Iterator, MutableMapping, ValuesView
from typing import Any

_MISSING = object()


class LRUCache(MutableMapping[Any, Any]):
    """A dict that keeps at most `maxsize` entries: storing one more drops the least recently
    used (read with `[]` or `get`, or stored) entry, so what it referred to can be freed."""

    def __init__(self, maxsize: int):
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"a cache size must be a positive int, got {maxsize!r}")
        self.maxsize = maxsize
        self._entries: OrderedDict[Any, Any] = OrderedDict()

    def __getitem__(self, key: Any) -> Any:
        value = self._entries[key]
        self._entries.move_to_end(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        """The entry for `key` (now the most recently used), else `default`."""
        value = self._entries.get(key, _MISSING)
        if value is _MISSING:
            return default
        self._entries.move_to_end(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __setitem__(self, key: Any, value: Any) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)

    def __delitem__(self, key: Any) -> None:
        del self._entries[key]

    def items(self) -> ItemsView[Any, Any]:
        """The entries, least recently used first (looking at them does not use them)."""
        return self._entries.items()

    def values(self) -> ValuesView[Any]:
        """The values, least recently used first (looking at them does not use them)."""
        return self._entries.values()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"LRUCache(maxsize={self.maxsize}, {len(self)} entries)"
