"""Reads a job's items from a JSONL file or URL, in chunks, without holding them all."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from waystation.kinds.batch.activities.items_source import (
    MAX_REDIRECTS,
    ItemsSources,
    SourceRefused,
    check_redirect,
)


class ItemsUnreadable(ValueError):
    """The items source is missing or not JSONL; retrying will not help."""


async def _lines(source: str, sources: ItemsSources) -> AsyncIterator[str]:
    try:
        sources.check(source)
    except SourceRefused as refused:
        raise ItemsUnreadable(f"{source}: {refused}") from None
    if source.startswith(("http://", "https://")):
        async for line in _url_lines(source):
            yield line
        return
    path = Path(source).expanduser()  # noqa: ASYNC240 - one stat, then chunked reads
    if not path.is_file():
        raise ItemsUnreadable(f"{source}: no such file on the worker")
    with path.open(encoding="utf-8") as lines:  # noqa: ASYNC230 - local file, read in chunks
        for line in lines:
            yield line


async def _url_lines(source: str) -> AsyncIterator[str]:
    url = source
    async with httpx.AsyncClient(timeout=60, follow_redirects=False) as client:
        for _ in range(MAX_REDIRECTS + 1):
            async with client.stream("GET", url) as r:
                if r.is_redirect:
                    try:
                        url = await check_redirect(url, r.headers["location"])
                    except SourceRefused as refused:
                        raise ItemsUnreadable(f"{source}: {refused}") from None
                    continue
                if r.status_code >= 400:
                    raise ItemsUnreadable(f"{source}: HTTP {r.status_code}")
                async for line in r.aiter_lines():
                    yield line
                return
    raise ItemsUnreadable(f"{source}: more than {MAX_REDIRECTS} redirects")


async def read_chunks(source: str, size: int,
                      sources: ItemsSources) -> AsyncIterator[list[dict[str, Any]]]:
    """Yield the items of a JSONL source `size` at a time, if `sources` allows it; blank
    lines are skipped."""
    chunk: list[dict[str, Any]] = []
    number = 0
    async for line in _lines(source, sources):
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
