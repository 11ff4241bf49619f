"""Screen identity and the hierarchy parser, on hand-written dumps like real devices write."""

from __future__ import annotations

import pytest

from waystation.kinds.mobile.activities.identity import hamming, identify, perceptual_hash
from waystation.kinds.mobile.activities.simulator.render import render_png
from waystation.kinds.mobile.activities.uixml import HierarchyError, parse_hierarchy

PKG = "com.example.app"
FLAGS = ('checkable="false" checked="false" enabled="true" focusable="true" focused="false" '
         'long-clickable="false" password="false" selected="false"')


def node(cls: str, bounds: str, children: str = "", *, rid: str = "", text: str = "",
         clickable: bool = False, scrollable: bool = False, pkg: str = PKG,
         extra: str = "") -> str:
    attrs = (f'index="0" text="{text}" resource-id="{rid}" class="{cls}" package="{pkg}" '
             f'content-desc="" clickable="{str(clickable).lower()}" '
             f'scrollable="{str(scrollable).lower()}" {FLAGS} bounds="{bounds}" {extra}')
    return f"<node {attrs}>{children}</node>" if children else f"<node {attrs} />"


def row(i: int, title: str, *, rid: str = "row") -> str:
    y = 300 + i * 150
    return node("android.widget.LinearLayout", f"[0,{y}][1080,{y + 150}]",
                node("android.widget.TextView", f"[20,{y}][800,{y + 100}]",
                     rid=f"{PKG}:id/title", text=title),
                rid=f"{PKG}:id/{rid}", clickable=True)


def screen(rows: list[str], *, clock: str = "12:00", counter: str = "3 new",
           rotation: int = 0, extra_windows: str = "", button: str = "save") -> str:
    app = node("android.widget.FrameLayout", "[0,0][1080,2400]",
               node("android.widget.TextView", "[0,100][1080,200]", rid=f"{PKG}:id/counter",
                    text=counter)
               + node("androidx.recyclerview.widget.RecyclerView", "[0,300][1080,1800]",
                      "".join(rows), rid=f"{PKG}:id/list", scrollable=True)
               + node("android.widget.Button", "[0,1900][1080,2000]",
                      rid=f"{PKG}:id/{button}", text=button.title(), clickable=True))
    status = node("android.widget.FrameLayout", "[0,0][1080,63]",
                  node("android.widget.TextView", "[10,0][200,63]", text=clock,
                       pkg="com.android.systemui"), pkg="com.android.systemui")
    return (f"<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>"
            f'<hierarchy rotation="{rotation}">{app}{status}{extra_windows}</hierarchy>')


def key(xml: str) -> str:
    return identify(parse_hierarchy(xml)).layout_hash


def test_volatile_content_and_rows_keep_the_screen():
    base = screen([row(0, "Milk"), row(1, "Eggs")])
    assert key(base) == key(screen([row(0, "Milk"), row(1, "Eggs")], clock="12:07",
                                    counter="9 new"))
    more = screen([row(i, f"Item {i}") for i in range(8)])
    assert key(base) == key(more) == key(screen([row(0, "Only one")]))
    # Text with digits folded: a counter changing keeps the content hash too.
    a, b = identify(parse_hierarchy(base)), identify(parse_hierarchy(
        screen([row(0, "Milk"), row(1, "Eggs")], clock="13:59", counter="4 new")))
    assert a.content_hash == b.content_hash


def test_different_layouts_are_different_screens():
    base = key(screen([row(0, "Milk")]))
    assert base != key(screen([row(0, "Milk")], button="delete"))
    # A new kind of row (another skeleton) is a different screen; more of a known kind is not.
    assert base != key(screen([row(0, "Milk"), row(1, "Header", rid="header")]))
    assert base != key(screen([]))


def test_digits_in_resource_ids_are_folded():
    assert key(screen([row(0, "a", rid="row_1")])) == key(screen([row(0, "a", rid="row_27")]))


def test_real_device_variants_are_tolerated():
    base = key(screen([row(0, "Milk")]))
    naf = screen([row(0, "Milk")]).replace('class="android.widget.Button"',
                                           'NAF="true" class="android.widget.Button"')
    assert key(naf) == base
    keyboard = node("android.widget.FrameLayout", "[0,1500][1080,2400]",
                    node("android.view.View", "[0,1600][100,1700]", clickable=True,
                         pkg="com.google.android.inputmethod.latin"),
                    pkg="com.google.android.inputmethod.latin")
    assert key(screen([row(0, "Milk")], extra_windows=keyboard)) == base
    hidden = row(1, "Hidden").replace("<node ", '<node visible-to-user="false" ', 1)
    assert key(screen([row(0, "Milk"), hidden.replace('rid="', 'rid="x')])) == base
    offscreen = node("android.widget.Button", "[0,2500][1080,2600]", rid=f"{PKG}:id/far",
                     clickable=True)
    assert key(screen([row(0, "Milk"), offscreen])) == base
    rotated = parse_hierarchy(screen([row(0, "Milk")], rotation=1) +
                              "\nUI hierchary dumped to: /sdcard/window_dump.xml\n")
    assert rotated.rotation == 1 and identify(rotated).layout_hash == base
    assert parse_hierarchy(screen([])).foreground_package() == PKG


def test_malformed_dumps_are_refused():
    with pytest.raises(HierarchyError):
        parse_hierarchy("ERROR: could not get idle state.")
    with pytest.raises(HierarchyError):
        parse_hierarchy("<hierarchy><node></hierarchy>")


def test_near_blank_screens_are_transitional_and_actions_have_stable_selectors():
    blank = ('<hierarchy rotation="0">' + node(
        "android.widget.FrameLayout", "[0,0][1080,2400]",
        node("android.widget.ProgressBar", "[400,1000][600,1200]")) + "</hierarchy>")
    assert identify(parse_hierarchy(blank)).near_blank
    first = identify(parse_hierarchy(screen([row(0, "Milk"), row(1, "Eggs")])))
    again = identify(parse_hierarchy(screen([row(0, "Bread"), row(1, "Jam"), row(2, "Tea")],
                                            clock="18:00")))
    assert not first.near_blank
    assert {a.selector for a in first.actions} <= {a.selector for a in again.actions}
    rows = [a for a in again.actions if a.row_group]
    assert [a.row_index for a in rows] == [0, 1, 2] and rows[0].kind == "tap"
    assert first.actions[-1].kind == "back"


def test_perceptual_hash_ignores_the_clock_and_separates_screens():
    a = screen([row(0, "Milk")])
    same = perceptual_hash(render_png(a), parse_hierarchy(a))
    later = screen([row(0, "Milk")], clock="23:59")
    assert hamming(same, perceptual_hash(render_png(later), parse_hierarchy(later))) <= 4
    other = screen([], button="delete")
    assert hamming(same, perceptual_hash(render_png(other), parse_hierarchy(other))) > 4
    assert -(2**63) <= same < 2**63
