"""One interface for every device: the offline simulator (default) and ADB.

A driver observes the screen (the uiautomator hierarchy, a PNG screenshot and the resumed
activity) and acts on it with the same primitives `adb shell input` offers, by coordinates.
The exploration never talks to a device any other way, so the simulator exercises the very
code paths a real device does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class DriverError(Exception):
    """The device did not do what was asked (counted against the run's error budget)."""


@dataclass(frozen=True)
class Observation:
    xml: str
    png: bytes
    package: str
    activity: str


class DeviceDriver(Protocol):
    async def launch(self, package: str) -> None: ...

    async def observe(self) -> Observation: ...

    async def tap(self, x: int, y: int) -> None: ...

    async def long_tap(self, x: int, y: int) -> None: ...

    async def input_text(self, x: int, y: int, text: str) -> None: ...

    async def swipe(self, x1: int, y1: int, x2: int, y2: int) -> None: ...

    async def back(self) -> None: ...

    async def declared_activities(self, package: str) -> list[str]: ...
