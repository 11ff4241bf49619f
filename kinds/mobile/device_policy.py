"""Submit-time refusals of a mobile run: one that would drive a device its caller may not name,
and one that asks the simulator for an app it does not have (which no retry could fix).

A device attached to the worker (`driver: adb`) is the operator's: whoever drives it sees and
types into whatever is signed in on it. Users may name the devices in `WAYSTATION_ADB_DEVICES`
(serials, comma-separated); the service role may name any. A run without a serial would take
whichever device adb picks, so on the adb driver a user must name one from the list.
"""

from __future__ import annotations

from pydantic import BaseModel

from waystation.kinds.mobile.settings import MobileSettings
from waystation.sdk import ApiError, Settings
from waystation.sdk.services import User


def check_device(run_input: BaseModel, user: User, settings: Settings) -> None:
    """403 naming `input.device_serial` when the caller may not drive that device."""
    if getattr(run_input, "driver", None) != "adb" or user.is_service:
        return
    serial = getattr(run_input, "device_serial", None)
    if serial is not None and serial in settings.of(MobileSettings).adb_device_serials:
        return
    why = ("the adb driver needs a device_serial" if serial is None
           else f"device {serial!r} is not one users may name")
    raise ApiError(403, "device_not_allowed",
                   f"input.device_serial: {why} (WAYSTATION_ADB_DEVICES)",
                   details=[{"loc": ["body", "input", "device_serial"], "msg": why,
                             "type": "device_not_allowed"}])


def check_app(run_input: BaseModel) -> None:
    """422 naming `input.app_package` when the simulator has no such app: the run would only
    fail at its first step, retried as a device error."""
    if getattr(run_input, "driver", None) != "simulator":
        return
    from waystation.kinds.mobile.activities.simulator.driver import bundled_packages

    package, bundled = getattr(run_input, "app_package", None), bundled_packages()
    if package in bundled:
        return
    why = f"the simulator has no app {package!r}; bundled: {', '.join(bundled)}"
    raise ApiError(422, "invalid_request", f"input.app_package: {why}",
                   details=[{"loc": ["body", "input", "app_package"], "msg": why,
                             "type": "unknown_app"}])
