"""The batch kind's own settings: where a job's items may be read from."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class BatchSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    # Where a batch job's `items_path` may point: comma-separated directories and URL
    # prefixes; anything else is refused at submit (and again by the worker). Empty: nowhere.
    items_dirs: str = Field("", validation_alias="WAYSTATION_ITEMS_DIRS")
    items_url_prefixes: str = Field("", validation_alias="WAYSTATION_ITEMS_URL_PREFIXES")
