"""Figures for the website: sharp (2x) PNGs, made small, as files that load lazily.

- `hidpi()` runs in the kernel that executes a notebook for the site (tools/build_site.py): matplotlib figures are
  rendered as PNG at twice their dpi and tagged (a PNG text chunk), so a page can show them at their size, sharp on
  high-density screens; a second tag holds the figure's smallest font size and dpi (`png_min_font_pt()`), from which
  tests/test_browser.py measures how small its text is shown. The notebooks in nbs/ are not changed.
- `shrink_outputs()` then gives each tagged PNG of the executed notebook its display size (`width`/`height`
  metadata, which Quarto and the offline build both use) and a 256-colour palette when that is visually lossless
  (plots have few colours; it cuts the bytes by about 60 %).
- `extract_images()` (offline build) moves inline `data:` PNGs out of a page into files beside it, with
  `loading="lazy"`, their size, a link to the full-size file for wide strips (click to zoom), and a class that lets a
  figure wider than the column use the right margin on a wide screen (nbs/styles.css). Quarto writes
  figures as files itself (and `image-lazy-loading`, `lightbox` in _quarto.yml do the rest).
"""
from __future__ import annotations

import base64
import hashlib
import io
import re
from pathlib import Path

MARK_KEY, MARK_VALUE = "bayesnotes-scale", "2"
FONT_KEY, DPI_KEY = "bayesnotes-min-font-pt", "bayesnotes-dpi"  # smallest visible text (points) and the figure's dpi
# (at 1x): a displayed image's smallest text is FONT_KEY * DPI_KEY / 72 * (displayed width / natural CSS width) px
WIDE = 2.2  # width/height above which a figure is a "strip" that gets a click-to-zoom link
# natural CSS width (px) above which a figure may grow past the text column into the right margin, up to its natural
# width (class OUTSET, styled in nbs/styles.css): its text is then shrunk less than in the column (issue 30)
OUTSET_PX, OUTSET = 600, "bn-column-page"


# ------------------------------------------------------------------------------------------ kernel side
def min_font_pt(fig) -> float | None:
    """The smallest font size (points) of the visible, non-empty texts of a matplotlib figure: tick labels, axis
    labels, titles, legends, annotations, ... (an invisible artist hides its children; the axis texts of an axes
    switched off with `axis("off")` are not drawn). None when the figure has no text."""
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.text import Text

    sizes, seen = [], set()

    def walk(a):
        if id(a) in seen or not a.get_visible():
            return
        seen.add(id(a))
        if isinstance(a, Text) and a.get_text().strip():
            sizes.append(float(a.get_fontsize()))
        for c in a.get_children():
            if isinstance(c, Axis) and isinstance(a, Axes) and not a.axison:
                continue
            walk(c)

    walk(fig)
    return min(sizes) if sizes else None


def hidpi(scale: int = 2):
    "In the kernel: make every matplotlib PNG `scale` times denser (and tag it), whatever formatter asks for it."
    from IPython.core import pylabtools

    if getattr(pylabtools.print_figure, "_bn_hidpi", False):
        return
    orig = pylabtools.print_figure

    def print_figure(fig, fmt="png", bbox_inches="tight", base64=False, **kw):
        if fmt == "png":
            dpi = kw.get("dpi") or fig.dpi
            kw["dpi"] = dpi * scale
            md = kw.setdefault("metadata", {})
            md[MARK_KEY] = str(scale)
            try:
                pt = min_font_pt(fig)
            except Exception:  # a measurement must never break a figure
                pt = None
            if pt is not None:
                md[FONT_KEY], md[DPI_KEY] = f"{pt:g}", f"{float(dpi):g}"
        return orig(fig, fmt, bbox_inches, base64, **kw)

    print_figure._bn_hidpi = True
    pylabtools.print_figure = print_figure
    try:  # re-register the inline backend's formatters so that they call the function above
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("png")
    except Exception:
        pass


# ------------------------------------------------------------------------------------------ PNGs
def png_size(blob: bytes) -> tuple[int, int]:
    "Pixel width and height from a PNG's header."
    if blob[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return int.from_bytes(blob[16:20], "big"), int.from_bytes(blob[20:24], "big")


def png_text(blob: bytes) -> dict:
    "The tEXt chunks of a PNG, {keyword: text}."
    out, pos = {}, 8
    while pos + 8 <= len(blob):
        n, kind = int.from_bytes(blob[pos:pos + 4], "big"), blob[pos + 4:pos + 8]
        if kind == b"tEXt":
            key, _, val = blob[pos + 8:pos + 8 + n].partition(b"\x00")
            out[key.decode("latin-1")] = val.decode("latin-1")
        elif kind in (b"IDAT", b"IEND"):
            break
        pos += 12 + n
    return out


def png_scale(blob: bytes) -> int:
    "The density tag `hidpi()` put in the PNG (1 when there is none)."
    v = png_text(blob).get(MARK_KEY, "1")
    return int(v) if v.isdigit() and int(v) > 0 else 1


def png_min_font_pt(blob: bytes) -> tuple[float, float] | None:
    """(smallest font size in points, figure dpi at 1x) that `hidpi()` measured and put in the PNG; None when the PNG
    has no such tag. The smallest text at the figure's natural size is `pt * dpi / 72` CSS px."""
    t = png_text(blob)
    try:
        pt, dpi = float(t[FONT_KEY]), float(t[DPI_KEY])
    except (KeyError, ValueError):
        return None
    return (pt, dpi) if pt > 0 and dpi > 0 else None


def compress_png(blob: bytes, max_error: float = 1.5) -> bytes:
    """The PNG with a 256-colour palette (no dithering) when its mean error per channel stays below `max_error`
    (out of 255), else losslessly re-packed; the smaller of that and the original."""
    from PIL import Image, ImageChops, ImageStat, PngImagePlugin

    im = Image.open(io.BytesIO(blob))
    im.load()
    info = PngImagePlugin.PngInfo()  # keep the tags of hidpi() (and only them)
    for k, v in png_text(blob).items():
        if k in (MARK_KEY, FONT_KEY, DPI_KEY):
            info.add_text(k, v)
    if im.mode == "RGBA" and im.getchannel("A").getextrema() == (255, 255):
        im = im.convert("RGB")
    elif im.mode not in ("RGB", "RGBA", "L", "P"):
        im = im.convert("RGBA")
    best = blob
    try:
        method = Image.Quantize.FASTOCTREE if im.mode == "RGBA" else Image.Quantize.MEDIANCUT
        q = im.quantize(colors=256, method=method, dither=Image.Dither.NONE)
        err = ImageStat.Stat(ImageChops.difference(q.convert(im.mode), im)).mean
        cand = q if max(err) <= max_error else im
    except (ValueError, OSError):
        cand = im
    out = io.BytesIO()
    cand.save(out, "PNG", optimize=True, pnginfo=info)
    if len(out.getvalue()) < len(best):
        best = out.getvalue()
    return best


def shrink_outputs(nb) -> tuple[int, int]:
    "Display size and palette for every PNG output of an executed notebook; returns (bytes before, after)."
    before = after = 0
    for cell in nb.cells:
        for o in cell.get("outputs") or []:
            data = o.get("data") or {}
            if "image/png" not in data:
                continue
            raw = data["image/png"]
            raw = "".join(raw) if isinstance(raw, list) else raw
            blob = base64.b64decode(raw)
            scale = png_scale(blob)
            w, h = png_size(blob)
            small = compress_png(blob)
            before, after = before + len(blob), after + len(small)
            data["image/png"] = base64.b64encode(small).decode()
            if scale > 1:
                md = o.setdefault("metadata", {}).setdefault("image/png", {})
                md.setdefault("width", w // scale)
                md.setdefault("height", h // scale)
    return before, after


# ------------------------------------------------------------------------------------------ pages
_DATA_IMG = re.compile(r'<img\b([^>]*?)\bsrc="data:image/(png|jpeg|gif);base64,([A-Za-z0-9+/=\s]+)"([^>]*)>')


def extract_images(html: str, page: Path, out: Path) -> tuple[str, int]:
    """Move the inline images of a page into `<page>_files/figures/`, named by content (cacheable); each `<img>` gets
    its file, its display size, `loading="lazy"` and `decoding="async"`; a wide strip is wrapped in a link to its file;
    a figure wider than OUTSET_PX is wrapped in (or its link gets) the class OUTSET, which lets it outgrow the column.
    Returns the new HTML and the number of images moved."""
    folder = page.with_name(page.stem + "_files") / "figures"
    n = 0

    def sub(m):
        nonlocal n
        before, kind, b64, after = m.group(1), m.group(2), re.sub(r"\s+", "", m.group(3)), m.group(4)
        blob = base64.b64decode(b64)
        ext = {"jpeg": "jpg"}.get(kind, kind)
        name = hashlib.sha256(blob).hexdigest()[:16] + "." + ext
        folder.mkdir(parents=True, exist_ok=True)
        f = folder / name
        if not f.exists():
            f.write_bytes(blob)
        rel = f.relative_to(page.parent).as_posix()
        attrs = before + after
        size = ""
        if kind == "png" and not re.search(r"\bwidth=", attrs):
            w, h = png_size(blob)
            s = png_scale(blob)
            size = f' width="{w // s}" height="{h // s}"'
        extra = "" if "loading=" in attrs else ' loading="lazy" decoding="async"'
        tag = f'<img{before}src="{rel}"{after}{size}{extra}>'
        n += 1
        if kind == "png":
            w, h = png_size(blob)
            outset = w // png_scale(blob) > OUTSET_PX
            if h and w / h > WIDE:
                cls = "bn-zoom " + OUTSET if outset else "bn-zoom"
                return f'<a class="{cls}" href="{rel}" title="Open the full-size figure">{tag}</a>'
            if outset:
                return f'<span class="{OUTSET}">{tag}</span>'
        return tag

    return _DATA_IMG.sub(sub, html), n
