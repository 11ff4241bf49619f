"""Where a webhook may be sent (server-side request forgery).

Never to a link-local address or a cloud's metadata service (169.254.169.254 and its kin hand
out the machine's credentials), nor to an unspecified, multicast or reserved one. Loopback,
private (RFC 1918, IPv6 unique-local) and carrier-grade NAT (100.64/10) addresses reach the
services beside Waystation (the Temporal Web UI, Postgres, a cloud's internal APIs), so they
are refused too unless `WAYSTATION_WEBHOOK_PRIVATE_NETWORKS=true` allows them; that is the
default only with `WAYSTATION_ENV=dev`, where the receiver is often on the same machine.

The API refuses a URL whose host is, or resolves to, such an address when it is registered.
The worker resolves the host of each delivery again, checks every address it gets, and
connects to the one it checked, so a DNS answer that changes between the check and the
connection (DNS rebinding) cannot send it elsewhere.
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
# Shared address space (RFC 6598): neither private nor global to the ipaddress module.
CGNAT = ipaddress.ip_network("100.64.0.0/10")
# A registration waits this long for its host to resolve; past it (or when the host does not
# resolve yet) the URL is kept, and each delivery checks what the host resolves to then.
REGISTRATION_LOOKUP_SECONDS = 2.0


class TargetRefused(Exception):
    """The webhook's host is, or resolves to, an address it may not be sent to."""


def refusal(address: IpAddress, *, private_networks: bool) -> str | None:
    """Why a webhook may not be sent to `address`, or None."""
    if isinstance(address, ipaddress.IPv6Address):
        # An IPv4 address inside an IPv6 one (mapped, or 6to4's, which a relay delivers to
        # that IPv4 address) is judged as that address. (Teredo's 2001::/32 is private.)
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None:
            address = embedded
    if address.is_link_local or address in METADATA_ADDRESSES:
        return f"{address} is link-local or a cloud metadata service"
    if address.is_unspecified or address.is_multicast:
        return f"{address} is not an address a webhook can be sent to"
    if address.is_loopback or address in CGNAT or (address.is_private
                                                   and not address.is_reserved):
        return None if private_networks else (
            f"{address} is a loopback or private address "
            "(allowed only with WAYSTATION_WEBHOOK_PRIVATE_NETWORKS=true)")
    if address.is_reserved:
        return f"{address} is not an address a webhook can be sent to"
    return None


async def registration_refusal(url: str, *, private_networks: bool) -> str | None:
    """Why `url` may not be registered: its host is, or now resolves to, a refused address."""
    try:
        await asyncio.wait_for(resolve(url, private_networks=private_networks),
                               REGISTRATION_LOOKUP_SECONDS)
    except TargetRefused as why:
        return str(why)
    except (OSError, TimeoutError):
        return None
    return None


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
