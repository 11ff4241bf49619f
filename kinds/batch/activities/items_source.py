"""Where a batch job's items may come from: directories and URL prefixes the operator allows.

Without this any user could make a worker read one of its local files or fetch any URL
(cloud metadata at 169.254.169.254, internal services) through `items_path`. The API refuses a
source at submit time (422) and the worker checks again when it reads, because a symlink or a
redirect may point elsewhere by then. Redirects are followed by hand, and only to hosts whose
every address is public.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import posixpath
import socket
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, unquote, urljoin, urlsplit

from waystation.kinds.batch.settings import BatchSettings

URL_SCHEMES = ("http", "https")
MAX_REDIRECTS = 5


class SourceRefused(ValueError):
    """The source is outside what the operator allows; the message says why."""


@dataclass(frozen=True)
class ItemsSources:
    """Allowed local directories (symlinks resolved) and URL prefixes (scheme, host, port and
    leading path segments). Both empty: no `items_path` at all."""

    dirs: tuple[Path, ...] = ()
    url_prefixes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, dirs: str, url_prefixes: str) -> ItemsSources:
        """From the comma-separated settings `WAYSTATION_ITEMS_DIRS` and
        `WAYSTATION_ITEMS_URL_PREFIXES`."""
        return cls(dirs=tuple(Path(os.path.realpath(Path(d.strip()).expanduser()))
                              for d in dirs.split(",") if d.strip()),
                   url_prefixes=tuple(p.strip() for p in url_prefixes.split(",") if p.strip()))

    def check(self, source: str) -> None:
        """Raise SourceRefused unless `source` is under an allowed directory or URL prefix."""
        if urlsplit(source).scheme.lower() in URL_SCHEMES:
            self._check_url(source)
        else:
            self._check_path(source)

    def _check_path(self, source: str) -> None:
        path = Path(source)
        if not path.is_absolute():
            raise SourceRefused("a file path must be absolute")
        real = Path(os.path.realpath(path))  # `..` and symlinks resolved, as the reader sees
        if not any(real.is_relative_to(allowed) for allowed in self.dirs):
            raise SourceRefused("the file is not under a directory allowed by "
                                "WAYSTATION_ITEMS_DIRS")

    def _check_url(self, source: str) -> None:
        url = urlsplit(source)
        if url.username is not None or url.password is not None:
            raise SourceRefused("a URL with credentials is not allowed")
        segments = unquote(url.path).split("/")
        if "." in segments or ".." in segments:
            raise SourceRefused("a URL path may not contain . or .. segments")
        if not any(_under_prefix(url, prefix) for prefix in self.url_prefixes):
            raise SourceRefused("the URL is not under a prefix allowed by "
                                "WAYSTATION_ITEMS_URL_PREFIXES")


def _under_prefix(url: SplitResult, prefix: str) -> bool:
    """Same scheme, host and port, and the prefix's path is whole leading segments of the
    URL's: `https://data.example.com/jobs` allows neither `…/jobs-secret` nor
    `https://data.example.com.evil.net/jobs`."""
    allowed = urlsplit(prefix)
    try:
        same_origin = (url.scheme.lower() == allowed.scheme.lower()
                       and url.hostname == allowed.hostname and url.port == allowed.port)
    except ValueError:  # a port out of range
        return False
    base = allowed.path if allowed.path.endswith("/") else allowed.path + "/"
    path = posixpath.normpath(url.path or "/")
    return same_origin and (path + "/").startswith(base)


async def check_redirect(current: str, location: str) -> str:
    """The absolute URL a redirect points at, if its host has only public addresses."""
    target = urljoin(current, location)
    url = urlsplit(target)
    if url.scheme.lower() not in URL_SCHEMES or not url.hostname:
        raise SourceRefused(f"redirect to {target!r}: not an http(s) URL")
    for address in await _addresses(url.hostname, url.port):
        if not address.is_global:
            raise SourceRefused(f"redirect to {url.hostname}: {address} is not a public "
                                "address")
    return target


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


async def _addresses(host: str, port: int | None) -> set[IPAddress]:
    try:
        return {ipaddress.ip_address(host.strip("[]"))}
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port or 443,
                                                             type=socket.SOCK_STREAM)
    except OSError as error:
        raise SourceRefused(f"redirect to {host}: cannot resolve ({error})") from None
    return {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos}


def items_sources(settings: Any) -> ItemsSources:
    """What the operator allows (WAYSTATION_ITEMS_DIRS, WAYSTATION_ITEMS_URL_PREFIXES)."""
    allowed = settings.of(BatchSettings)
    return _parsed(allowed.items_dirs, allowed.items_url_prefixes)


@lru_cache(maxsize=8)
def _parsed(dirs: str, url_prefixes: str) -> ItemsSources:
    return ItemsSources.parse(dirs, url_prefixes)
