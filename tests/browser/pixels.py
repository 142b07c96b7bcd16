"""What a person would see in a screenshot: a PNG read with the standard library only.

Chromium's screenshots are 8-bit RGB or RGBA PNGs without interlacing; that is all this
reads (anything else is refused, naming what it got). Pixels are counted by colour inside
a box of the page, so a test can say "the chart shows green and red candles" rather than
"the canvas element exists".
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    rows: list[bytes]  # RGB, 3 bytes a pixel

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        row = self.rows[y]
        return row[3 * x], row[3 * x + 1], row[3 * x + 2]

    def count(
        self, colour: tuple[int, int, int], box: tuple[float, float, float, float], slack: int = 24
    ) -> int:
        """Pixels within `slack` (per channel) of `colour` inside `box` (x, y, width, height)."""
        x0, y0 = max(0, int(box[0])), max(0, int(box[1]))
        x1, y1 = min(self.width, int(box[0] + box[2])), min(self.height, int(box[1] + box[3]))
        found = 0
        for y in range(y0, y1):
            row = self.rows[y]
            for x in range(x0, x1):
                r, g, b = row[3 * x], row[3 * x + 1], row[3 * x + 2]
                if (
                    abs(r - colour[0]) <= slack
                    and abs(g - colour[1]) <= slack
                    and abs(b - colour[2]) <= slack
                ):
                    found += 1
        return found

    def columns_with(
        self, colour: tuple[int, int, int], box: tuple[float, float, float, float]
    ) -> int:
        """How many pixel columns of `box` hold `colour` at least once: candles are columns."""
        x0, y0 = max(0, int(box[0])), max(0, int(box[1]))
        x1, y1 = min(self.width, int(box[0] + box[2])), min(self.height, int(box[1] + box[3]))
        return sum(1 for x in range(x0, x1) if self.count(colour, (x, y0, 1, y1 - y0)) > 0)

    def runs_with(
        self, colour: tuple[int, int, int], box: tuple[float, float, float, float]
    ) -> int:
        """How many separate stretches of columns of `box` hold `colour`: apart candles."""
        x0, y0 = max(0, int(box[0])), max(0, int(box[1]))
        x1, y1 = min(self.width, int(box[0] + box[2])), min(self.height, int(box[1] + box[3]))
        marked = [self.count(colour, (x, y0, 1, y1 - y0)) > 0 for x in range(x0, x1)]
        return sum(1 for n, on in enumerate(marked) if on and (n == 0 or not marked[n - 1]))


def read_png(data: bytes) -> Image:
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG file")
    at = len(SIGNATURE)
    idat = b""
    width = height = depth = kind = interlace = 0
    while at < len(data):
        (length,) = struct.unpack("!I", data[at : at + 4])
        tag = data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        at += 12 + length
        if tag == b"IHDR":
            width, height, depth, kind, _, _, interlace = struct.unpack("!IIBBBBB", body)
        elif tag == b"IDAT":
            idat += body
        elif tag == b"IEND":
            break
    if depth != 8 or kind not in (2, 6) or interlace:
        raise ValueError(f"only 8-bit RGB(A) PNGs are read, not depth {depth} type {kind}")
    channels = 3 if kind == 2 else 4
    stride = width * channels
    raw = zlib.decompress(idat)
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        method = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(method, line, previous, channels)
        rgb = line if channels == 3 else bytearray(b for i, b in enumerate(line) if i % 4 != 3)
        rows.append(bytes(rgb))
        previous = line
    return Image(width, height, rows)


def _unfilter(method: int, line: bytearray, previous: bytearray, bpp: int) -> None:
    """Undoes a scanline's filter in place (PNG specification, section 9)."""
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up = previous[i]
        corner = previous[i - bpp] if i >= bpp else 0
        if method == 1:
            line[i] = (line[i] + left) & 0xFF
        elif method == 2:
            line[i] = (line[i] + up) & 0xFF
        elif method == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif method == 4:
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            near = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            line[i] = (line[i] + near) & 0xFF
