"""The app icons that packaging/make_icons.py rendered: each PNG is the size its name says,
and the .icns holds a PNG of the right size under each type macOS looks for."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ICONS = ROOT / "resources" / "icons"
_spec = importlib.util.spec_from_file_location("make_icons", ROOT / "packaging" / "make_icons.py")
assert _spec is not None and _spec.loader is not None
make_icons = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_icons)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    return width, height


def test_each_png_is_its_size():
    for size in make_icons.PNG_SIZES:
        assert png_size((ICONS / make_icons.png_name(size)).read_bytes()) == (size, size)


def test_the_icns_holds_every_size_macos_asks_for():
    data = (ICONS / "workbench.icns").read_bytes()
    assert data[:4] == b"icns"
    assert struct.unpack(">I", data[4:8])[0] == len(data)
    found, at = {}, 8
    while at < len(data):
        kind, length = (
            data[at : at + 4].decode("ascii"),
            struct.unpack(">I", data[at + 4 : at + 8])[0],
        )
        found[kind] = png_size(data[at + 8 : at + length])[0]
        at += length
    assert found == make_icons.ICNS_TYPES


def test_the_scalable_icon_is_the_apps_own():
    assert (ICONS / "workbench.svg").resolve() == ROOT / "workbench" / "resources" / "icon.svg"
