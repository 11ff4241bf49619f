"""Writes the bundled sample apps:
`python -m waystation.kinds.mobile.activities.simulator.generate_apps`.

Each app is a folder under `apps/` with `app.json` (activities, the launch screen, and for each
screen its activity, its hierarchy file, its transitions keyed by the element acted on, the
lists whose row count varies) and one `<screen>.xml` per screen in exactly the format
`uiautomator dump` writes, status bar and navigation bar windows included. Text may hold
volatile placeholders the simulator fills per visit: `{clock}`, `{counter}`, `{n}` (row number)
and `{visit}`. Screenshots are rendered from the hierarchies at run time, so none are stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

APPS = Path(__file__).resolve().parent / "apps"
WIDTH, HEIGHT, STATUS, NAV = 1080, 2400, 63, 126
ROW_H, ITEM_H = 160, 150


@dataclass
class El:
    kind: str  # button | text | edit | switch | list | image | password
    name: str
    text: str = ""
    to: str | None = None
    rows: tuple[int, int] = (0, 0)
    row_text: str = ""


@dataclass
class Screen:
    name: str
    activity: str
    title: str
    elements: list[El]
    up: bool = True
    loading: bool = False
    dialog: bool = False
    extra: dict = field(default_factory=dict)


def b(name: str, text: str, to: str | None = None) -> El:
    return El("button", name, text, to)


def t(name: str, text: str) -> El:
    return El("text", name, text)


def lst(name: str, row_text: str, to: str | None, rows: tuple[int, int]) -> El:
    return El("list", name, to=to, rows=rows, row_text=row_text)


def _attrs(pkg: str, cls: str, bounds: tuple[int, int, int, int], *, index: int = 0,
           text: str = "", rid: str = "", desc: str = "", clickable: bool = False,
           checkable: bool = False, scrollable: bool = False, password: bool = False,
           long_clickable: bool = False, focusable: bool = False) -> str:
    def flag(v: bool) -> str:
        return "true" if v else "false"
    x1, y1, x2, y2 = bounds
    return (f'index="{index}" text={quoteattr(text)} resource-id="{rid}" class="{cls}" '
            f'package="{pkg}" content-desc={quoteattr(desc)} checkable="{flag(checkable)}" '
            f'checked="false" clickable="{flag(clickable)}" enabled="true" '
            f'focusable="{flag(focusable or clickable)}" focused="false" '
            f'scrollable="{flag(scrollable)}" long-clickable="{flag(long_clickable)}" '
            f'password="{flag(password)}" selected="false" bounds="[{x1},{y1}][{x2},{y2}]"')


def node(pkg: str, cls: str, bounds: tuple[int, int, int, int], children: str = "",
         **attrs: object) -> str:
    head = _attrs(pkg, cls, bounds, **attrs)  # type: ignore[arg-type]
    return f"<node {head}>{children}</node>" if children else f"<node {head} />"


_SIMPLE = {
    "button": ("android.widget.Button", {"clickable": True}),
    "text": ("android.widget.TextView", {}),
    "edit": ("android.widget.EditText", {"clickable": True}),
    "password": ("android.widget.EditText", {"clickable": True, "password": True}),
    "switch": ("android.widget.Switch", {"clickable": True, "checkable": True}),
}


def _element(pkg: str, el: El, y: int, index: int) -> tuple[str, int]:
    rid = f"{pkg}:id/{el.name}"
    box = (48, y, WIDTH - 48, y + ITEM_H - 20)
    if el.kind in _SIMPLE:
        cls, flags = _SIMPLE[el.kind]
        return node(pkg, cls, box, index=index, text=el.text, rid=rid,
                    **flags), ITEM_H  # type: ignore[arg-type]
    if el.kind == "image":
        return node(pkg, "android.widget.ImageButton", box, index=index, desc=el.text, rid=rid,
                    clickable=True), ITEM_H
    # A list: one template row; the simulator repeats it per visit (see simulator.py).
    height = ROW_H * 6
    cells = (node(pkg, "android.widget.TextView", (48, y + 20, 800, y + 90), text=el.row_text,
                  rid=f"{rid}_row_title")
             + node(pkg, "android.widget.TextView", (48, y + 90, 800, y + 140),
                    index=1, text="updated {clock}", rid=f"{rid}_row_subtitle"))
    template = node(pkg, "android.widget.LinearLayout", (0, y, WIDTH, y + ROW_H), cells,
                    rid=f"{rid}_row", clickable=True, long_clickable=True)
    return node(pkg, "androidx.recyclerview.widget.RecyclerView", (0, y, WIDTH, y + height),
                template, index=index, rid=rid, scrollable=True), height


def screen_xml(pkg: str, screen: Screen) -> str:
    top = STATUS
    parts = []
    if screen.up:
        parts.append(node(pkg, "android.widget.ImageButton", (0, top, 147, top + 147),
                          desc="Navigate up", clickable=True))
    parts.append(node(pkg, "android.widget.TextView", (168, top, 900, top + 147), index=1,
                      text=screen.title, rid=f"{pkg}:id/toolbar_title"))
    toolbar = node(pkg, "android.view.ViewGroup", (0, top, WIDTH, top + 147), "".join(parts),
                   rid=f"{pkg}:id/toolbar")
    y, body = top + 180, []
    for i, el in enumerate(screen.elements):
        xml, height = _element(pkg, el, y, i)
        body.append(xml)
        y += height
    content_cls = "android.widget.FrameLayout" if screen.dialog else "android.widget.LinearLayout"
    content = node(pkg, content_cls, (0, top + 147, WIDTH, HEIGHT - NAV), "".join(body),
                   index=1, rid=f"{pkg}:id/{screen.name}_content")
    app = node(pkg, "android.widget.FrameLayout", (0, 0, WIDTH, HEIGHT), toolbar + content)
    sysui = "com.android.systemui"
    clock = node(sysui, "android.widget.TextView", (40, 8, 200, 55), text="{clock}",
                 rid=f"{sysui}:id/clock")
    status = node(sysui, "android.widget.FrameLayout", (0, 0, WIDTH, STATUS), clock,
                  rid=f"{sysui}:id/status_bar")
    nav = node(sysui, "android.widget.FrameLayout", (0, HEIGHT - NAV, WIDTH, HEIGHT), index=2,
               rid=f"{sysui}:id/navigation_bar_frame")
    return ("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>"
            f'<hierarchy rotation="0">{app}{status}{nav}</hierarchy>')


def notes_app() -> tuple[str, list[str], list[Screen]]:
    main, settings, detail = ".MainActivity", ".SettingsActivity", ".NoteActivity"
    screens = [
        Screen("home", main, "Notes", [
            t("greeting", "{counter} notes · synced {clock}"),
            b("new_note", "New note", "editor"), b("open_search", "Search", "search"),
            lst("notes", "Note {n}: groceries", "note_detail", (2, 9)),
            b("open_tags", "Tags", "tags"), b("open_settings", "Settings", "settings")],
            up=False, loading=True),
        Screen("note_detail", detail, "Note", [
            t("note_body", "Edited {clock}"), b("edit_note", "Edit", "editor"),
            b("share_note", "Share", "share_sheet"), b("remind_note", "Remind me", "reminders"),
            b("delete_note", "Delete", "trash")]),
        Screen("editor", detail, "Edit note", [
            El("edit", "note_title_input", "Title"), El("edit", "note_text_input", "Text"),
            b("save_note", "Save", "back")]),
        Screen("search", main, "Search", [
            El("edit", "search_input", "Search notes"), b("run_search", "Go", "search_results")]),
        Screen("search_results", main, "Results", [
            t("result_count", "{counter} results"),
            lst("results", "Match {n}", "note_detail", (1, 6))]),
        Screen("tags", main, "Tags", [lst("tag_list", "#tag{n}", "tag_detail", (3, 7))]),
        Screen("tag_detail", main, "Tag", [
            t("tag_count", "{counter} notes tagged"), lst("tagged", "Tagged {n}", "note_detail",
                                                          (1, 4))]),
        Screen("share_sheet", detail, "Share", [
            b("share_copy", "Copy link", "back"), b("share_export", "Export PDF", "export_done")],
            dialog=True),
        Screen("export_done", detail, "Exported", [t("export_path", "notes_{visit}.pdf")]),
        Screen("reminders", detail, "Reminder", [
            El("switch", "reminder_on", "Remind"), b("pick_time", "Pick time", "reminder_time")]),
        Screen("reminder_time", detail, "Time", [
            t("time_now", "Now {clock}"), b("time_ok", "OK", "back")], dialog=True),
        Screen("trash", main, "Move to trash?", [
            b("trash_cancel", "Cancel", "back"), b("delete_forever", "Delete forever", "home")],
            dialog=True),
        Screen("settings", settings, "Settings", [
            b("settings_account", "Account", "account"), b("settings_theme", "Theme", "theme"),
            b("settings_notifications", "Notifications", "notifications"),
            b("settings_about", "About", "about")]),
        Screen("account", settings, "Account", [
            El("edit", "email_input", "Email"), El("password", "password_input", ""),
            b("sign_in", "Sign in", "signed_in")]),
        Screen("signed_in", settings, "Signed in", [
            t("signed_in_as", "Signed in at {clock}"), b("sign_out", "Sign out", "back")]),
        Screen("theme", settings, "Theme", [
            El("switch", "dark_mode", "Dark mode"), El("switch", "big_text", "Large text")]),
        Screen("notifications", settings, "Notifications", [
            El("switch", "notify_all", "All notifications"),
            b("notify_sound", "Sound", "sound")]),
        Screen("sound", settings, "Sound", [lst("tones", "Tone {n}", None, (4, 8))]),
        Screen("about", settings, "About", [
            t("version", "Version 2.{counter}"), b("open_licenses", "Licenses", "licenses")]),
        Screen("licenses", settings, "Licenses", [lst("license_list", "Library {n}", None,
                                                      (5, 9))]),
    ]
    return "com.waystation.sample.notes", [main, settings, detail, ".WidgetConfigActivity"], \
        screens


def shop_app() -> tuple[str, list[str], list[Screen]]:
    main, product, checkout, account = (".HomeActivity", ".ProductActivity",
                                        ".CheckoutActivity", ".AccountActivity")
    screens = [
        Screen("home", main, "Shop", [
            t("deal", "Deal ends {clock}"), b("browse", "Categories", "categories"),
            b("open_cart", "Cart ({counter})", "cart"), b("search", "Search", "search"),
            lst("featured", "Featured {n}", "product", (2, 8)),
            b("open_profile", "Profile", "profile")], up=False, loading=True),
        Screen("categories", main, "Categories", [lst("category_list", "Category {n}",
                                                      "category", (4, 9))]),
        Screen("category", main, "Category", [
            t("category_count", "{counter} items"),
            lst("products", "Product {n} · ${n}9", "product", (2, 9))]),
        Screen("search", main, "Search", [
            El("edit", "query", "What are you looking for?"), b("go", "Go", "search_results")]),
        Screen("search_results", main, "Results", [lst("hits", "Hit {n}", "product", (1, 5))]),
        Screen("product", product, "Product", [
            t("price", "${counter}.99 at {clock}"), b("add_to_cart", "Add to cart", "cart"),
            b("reviews", "Reviews", "reviews"), b("wish", "Add to wishlist", "wishlist")]),
        Screen("reviews", product, "Reviews", [
            lst("review_list", "★★★★ review {n}", None, (1, 6)),
            b("write_review", "Write a review", "write_review")]),
        Screen("write_review", product, "Your review", [
            El("edit", "review_text", "Tell others"), b("post_review", "Post", "back")]),
        Screen("wishlist", account, "Wishlist", [lst("wished", "Wish {n}", "product", (1, 5))]),
        Screen("cart", checkout, "Cart", [
            lst("cart_items", "Item {n}", "product", (1, 4)),
            b("checkout", "Checkout", "checkout")]),
        Screen("checkout", checkout, "Checkout", [
            El("edit", "address", "Address"), b("to_payment", "Continue", "payment")]),
        Screen("payment", checkout, "Payment", [
            El("edit", "card_number", "Card number"),
            b("buy_now", "Buy now · pay ${counter}", "order_done")]),
        Screen("order_done", checkout, "Thank you", [
            t("order_no", "Order #{visit}{counter}"), b("to_orders", "My orders", "orders")]),
        Screen("profile", account, "Profile", [
            b("orders_btn", "Orders", "orders"), b("login", "Sign in", "signed_in"),
            b("shop_settings", "Settings", "settings"), b("help", "Help", "help")]),
        Screen("signed_in", account, "Welcome back", [t("points", "{counter} points")]),
        Screen("orders", account, "Orders", [lst("order_list", "Order {n}", "order_detail",
                                                 (1, 5))]),
        Screen("order_detail", account, "Order", [
            t("order_status", "Shipped {clock}"), b("track", "Track", "tracking")]),
        Screen("tracking", account, "Tracking", [t("eta", "Arrives in {counter} days")]),
        Screen("settings", account, "Settings", [
            El("switch", "newsletter", "Newsletter"),
            b("delete_account", "Delete account", "goodbye")]),
        Screen("goodbye", account, "Account deleted", [t("bye", "Goodbye")], up=False),
        Screen("help", account, "Help", [lst("articles", "Article {n}", "help_article",
                                             (3, 6))]),
        Screen("help_article", account, "Article", [t("article_body", "Updated {clock}")]),
    ]
    return "com.waystation.sample.shop", [main, product, checkout, account,
                                          ".DeepLinkActivity"], screens


def write_app(pkg: str, activities: list[str], screens: list[Screen]) -> None:
    folder = APPS / pkg
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.xml"):
        old.unlink()
    spec: dict = {"package": pkg, "launch": screens[0].name,
                  "declared_activities": activities, "screens": {}}
    for screen in screens:
        (folder / f"{screen.name}.xml").write_text(screen_xml(pkg, screen) + "\n")
        transitions = {f"{pkg}:id/{el.name}": el.to for el in screen.elements
                       if el.to and el.kind != "list"}
        transitions.update({f"{pkg}:id/{el.name}_row": el.to for el in screen.elements
                            if el.kind == "list" and el.to})
        if screen.up:
            transitions["Navigate up"] = "back"
        spec["screens"][screen.name] = {
            "activity": screen.activity, "hierarchy": f"{screen.name}.xml",
            "transitions": transitions, "loading": screen.loading,
            "lists": {f"{pkg}:id/{el.name}": list(el.rows)
                      for el in screen.elements if el.kind == "list"}}
    (folder / "app.json").write_text(json.dumps(spec, indent=1) + "\n")


def main() -> None:
    for build in (notes_app, shop_app):
        write_app(*build())


if __name__ == "__main__":
    main()
