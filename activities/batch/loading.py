"""Reads a job's items from a JSONL file or URL, in chunks, without holding them all."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx


class ItemsUnreadable(ValueError):
    """The items source is missing or not JSONL; retrying will not help."""


async def _lines(source: str) -> AsyncIterator[str]:
    if source.startswith(("http://", "https://")):
        async with httpx.AsyncClient(timeout=60) as client, client.stream("GET", source) as r:
            if r.status_code >= 400:
                raise ItemsUnreadable(f"{source}: HTTP {r.status_code}")
            async for line in r.aiter_lines():
                yield line
        return
    path = Path(source).expanduser()  # noqa: ASYNC240 - one stat, then chunked reads
    if not path.is_file():
        raise ItemsUnreadable(f"{source}: no such file on the worker")
    with path.open(encoding="utf-8") as lines:  # noqa: ASYNC230 - local file, read in chunks
        for line in lines:
            yield line


async def read_chunks(source: str, size: int) -> AsyncIterator[list[dict[str, Any]]]:
    """Yield the items of a JSONL source `size` at a time; blank lines are skipped."""
    chunk: list[dict[str, Any]] = []
    number = 0
    async for line in _lines(source):
        number += 1
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise ItemsUnreadable(f"{source} line {number}: not JSON ({error.msg})") from None
        if not isinstance(item, dict):
            raise ItemsUnreadable(f"{source} line {number}: an item must be a JSON object")
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
