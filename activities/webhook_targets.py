"""Where a webhook may be sent (server-side request forgery).

Never to a link-local address or a cloud's metadata service (169.254.169.254 and its kin hand
out the machine's credentials), nor to an unspecified, multicast or reserved one. Loopback and
private addresses are allowed by default, since a team's receiver is often on its own network;
a shared deployment turns them off with `WAYSTATION_WEBHOOK_PRIVATE_NETWORKS=false`, so no user
can make the worker call its neighbours.

The API refuses a URL whose host is such an address when it is registered. The worker resolves
the host of each delivery, checks every address it gets, and connects to the one it checked,
so a DNS answer that changes between the check and the connection cannot send it elsewhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Metadata services outside the link-local ranges: AWS's over IPv6 (a private address
# otherwise), Alibaba Cloud's.
METADATA_ADDRESSES = frozenset({ipaddress.ip_address("fd00:ec2::254"),
                                ipaddress.ip_address("100.100.100.200")})


class TargetRefused(Exception):
    """The webhook's host is, or resolves to, an address it may not be sent to."""


def refusal(address: IpAddress, *, private_networks: bool) -> str | None:
    """Why a webhook may not be sent to `address`, or None."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_link_local or address in METADATA_ADDRESSES:
        return f"{address} is link-local or a cloud metadata service"
    if address.is_unspecified or address.is_multicast:
        return f"{address} is not an address a webhook can be sent to"
    if address.is_loopback or (address.is_private and not address.is_reserved):
        return None if private_networks else (
            f"{address} is a loopback or private address "
            "(WAYSTATION_WEBHOOK_PRIVATE_NETWORKS=false)")
    if address.is_reserved:
        return f"{address} is not an address a webhook can be sent to"
    return None


def literal_refusal(url: str, *, private_networks: bool) -> str | None:
    """Why `url`, whose host is an IP address, may not be registered; None for a host name
    (checked by the worker at each delivery, against what it resolves to then)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        host = "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return refusal(address, private_networks=private_networks)


@dataclass(frozen=True)
class Target:
    """A delivery's URL with its host replaced by the address that was checked."""

    url: str
    host_header: str
    sni_hostname: str | None


async def resolve(url: str, *, private_networks: bool) -> list[Target]:
    """Where to send `url`'s delivery, one target per address its host resolves to, in the
    resolver's order; TargetRefused if any of them is refused (socket.gaierror when the host
    does not resolve: retried like any network error)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
    for address in addresses:
        if (why := refusal(address, private_networks=private_networks)) is not None:
            raise TargetRefused(why if host == str(address) else f"{host} resolves to {why}")
    port_part = f":{parts.port}" if parts.port is not None else ""
    userinfo, at, _ = parts.netloc.rpartition("@")
    return [Target(url=urlunsplit(parts._replace(
                       netloc=f"{userinfo}{at}{_bracketed(str(address))}{port_part}")),
                   host_header=_bracketed(host) + port_part,
                   sni_hostname=host if parts.scheme == "https" else None)
            for address in addresses]


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
