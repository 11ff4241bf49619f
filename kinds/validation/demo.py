"""`waystation demo` (the default kind): a validation run of a sample idea, followed to its
first gate."""

from __future__ import annotations

from waystation.sdk import KindDemo

IDEA = ("A subscription service that delivers locally roasted coffee to small offices, "
        "with a dashboard to track consumption and reorder automatically.")

DEMO = KindDemo(input={"entrepreneur_input": IDEA},
                help="a sample idea through its first phase to the founders' brief gate")
