"""`python -m waystation ...` is the same as the `waystation` command."""

from __future__ import annotations

import sys

from waystation.cli import main

sys.exit(main())
