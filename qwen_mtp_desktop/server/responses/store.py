"""Recent responses of `/v1/responses`, kept in memory for `previous_response_id` and
`GET /v1/responses/{id}`: bounded by count and by bytes, the oldest let go first (a local
server keeps no history on disk; a restart forgets them, and so does a full store)."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

#: Responses kept, and the bytes of their JSON together (their conversations and objects).
MAX_STORED = 256
MAX_STORED_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Stored:
    """A stored response: the conversation it ended (chat messages as JSON objects, its own
    answer last, without its `instructions`, as OpenAI chains them) and its response object."""

    conversation: tuple[dict[str, Any], ...]
    response: dict[str, Any]
    size: int


class ResponseStore:
    """Thread-safe; `put` lets the oldest go until both bounds hold."""

    def __init__(self, max_count: int = MAX_STORED, max_bytes: int = MAX_STORED_BYTES) -> None:
        self.max_count = max_count
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, Stored] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(
        self, response_id: str, conversation: list[dict[str, Any]], response: dict[str, Any]
    ) -> bool:
        """Keep it; False when it alone is larger than the store (it is not kept)."""
        size = len(json.dumps(conversation, ensure_ascii=False)) + len(
            json.dumps(response, ensure_ascii=False)
        )
        if size > self.max_bytes:
            return False
        with self._lock:
            self._drop(response_id)
            self._items[response_id] = Stored(tuple(conversation), response, size)
            self._bytes += size
            while len(self._items) > self.max_count or self._bytes > self.max_bytes:
                self._drop(next(iter(self._items)))
        return True

    def get(self, response_id: str) -> Stored | None:
        with self._lock:
            return self._items.get(response_id)

    def delete(self, response_id: str) -> bool:
        with self._lock:
            return self._drop(response_id)

    def sizes(self) -> tuple[int, int]:
        """(responses kept, their bytes)."""
        with self._lock:
            return len(self._items), self._bytes

    def _drop(self, response_id: str) -> bool:
        stored = self._items.pop(response_id, None)
        if stored is None:
            return False
        self._bytes -= stored.size
        return True
