"""Render the app icon (workbench/resources/icon.svg, the one source) into the sizes that
desktops ask for: PNGs for Linux (resources/icons/) and an .icns for the macOS app.

Run it after changing the SVG: ``.venv/bin/python packaging/make_icons.py``. Qt draws the
PNGs (QtSvg comes with PySide6); the .icns is written here, as it is only PNGs in a
container, so that no image tool is needed.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "workbench" / "resources" / "icon.svg"
OUT = ROOT / "resources" / "icons"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
# The .icns entries that hold PNG data, by type: pixel size. The @2x types ("ic11" is 16
# points at 2x) hold the same pixels as their 1x namesakes.
ICNS_TYPES = {
    "icp4": 16,
    "icp5": 32,
    "ic11": 32,
    "icp6": 64,
    "ic12": 64,
    "ic07": 128,
    "ic08": 256,
    "ic13": 256,
    "ic09": 512,
    "ic14": 512,
    "ic10": 1024,
}


def png_name(size: int) -> str:
    return f"workbench-{size}.png"


def render_png(size: int) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(SOURCE))
    if not renderer.isValid():
        raise SystemExit(f"{SOURCE} is not an SVG that Qt can draw")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data.data())


def icns(pngs: dict[int, bytes]) -> bytes:
    """Apple's icon container: 'icns', its length, then (type, length, PNG) entries."""
    entries = b"".join(
        kind.encode("ascii") + struct.pack(">I", 8 + len(pngs[size])) + pngs[size]
        for kind, size in ICNS_TYPES.items()
    )
    return b"icns" + struct.pack(">I", 8 + len(entries)) + entries


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    pngs = {size: render_png(size) for size in {*PNG_SIZES, *ICNS_TYPES.values()}}
    OUT.mkdir(parents=True, exist_ok=True)
    for size in PNG_SIZES:
        (OUT / png_name(size)).write_bytes(pngs[size])
    (OUT / "workbench.icns").write_bytes(icns(pngs))
    print(f"wrote {len(PNG_SIZES)} PNGs and workbench.icns to {OUT}")
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
