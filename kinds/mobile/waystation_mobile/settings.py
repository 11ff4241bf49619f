"""The mobile kind's own settings: the devices users may drive."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class MobileSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    # Devices attached to workers (`driver: adb`) that users may name by serial,
    # comma-separated; the service role may name any (device_policy.py). Empty: none.
    adb_devices: str = Field("", validation_alias="WAYSTATION_ADB_DEVICES")

    @property
    def adb_device_serials(self) -> frozenset[str]:
        return frozenset(s.strip() for s in self.adb_devices.split(",") if s.strip())
