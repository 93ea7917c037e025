#!/usr/bin/env python
"""Page weight of a built site: what a reader's browser loads for each page, and the whole site on disk.

    python tools/site_weight.py _docs             # table of the heaviest pages and the totals
    python tools/site_weight.py _docs --json      # the same as JSON

For each page: the HTML itself (bytes and gzip bytes, as a web server sends it), what it loads when it opens
(stylesheets, scripts, fonts named in those stylesheets, images that are not `loading="lazy"`, including `data:`
images inside the HTML), and what it loads only as the reader scrolls (lazy images) or moves a scrubber (frames).
Resources on other hosts are listed separately (they are not counted, and a self-contained site has none).
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit


def _local(base: Path, page: Path, url: str) -> Path | None:
    if not url or url.startswith(("#", "data:", "mailto:", "javascript:")):
        return None
    parts = urlsplit(url)
    if parts.scheme or url.startswith("//"):
        return None
    f = (page.parent / unquote(parts.path)).resolve()
    return f if f.is_file() else None


def page_weight(site: Path, page: Path, css_cache: dict) -> dict:
    text = page.read_text(encoding="utf-8", errors="replace")
    eager, lazy, external = set(), set(), set()
    data_bytes = sum(len(m) for m in re.findall(r'src="data:image/[^"]+"', text))
    for m in re.finditer(r"<(img|script|link|source)\b([^>]*)>", text):
        tag, attrs = m.group(1), m.group(2)
        url = re.search(r'\b(?:src|href)="([^"]*)"', attrs)
        if not url:
            continue
        url = url.group(1)
        if tag == "link" and not re.search(r'rel="(stylesheet|icon|preload|modulepreload)"', attrs):
            continue
        if re.match(r"^(https?:)?//", url):
            external.add(url)
            continue
        f = _local(site, page, url)
        if f is None:
            continue
        (lazy if 'loading="lazy"' in attrs else eager).add(f)
        if f.suffix == ".css":
            eager.update(css_cache.setdefault(f, _css_assets(f, external)))
    frames = set()
    for m in re.finditer(r'data-bn-scrubber="([^"]*)"', text):
        import html

        d = json.loads(html.unescape(m.group(1)))
        for fr in d.get("frames", {}).values():
            for im in fr.get("images", []):
                f = _local(site, page, d["base"] + im["src"])
                if f:
                    frames.add(f)
    lazy -= eager
    frames -= eager | lazy
    size = lambda fs: sum(f.stat().st_size for f in fs)  # noqa: E731
    return {"page": page.relative_to(site).as_posix(), "html": len(text.encode()), "html_gzip": len(gzip.compress(text.encode())),
            "inline_images": data_bytes, "eager": size(eager), "lazy": size(lazy), "frames": size(frames),
            "first_load": len(text.encode()) + size(eager), "external": sorted(external)}


def _css_assets(css: Path, external: set) -> set:
    out = set()
    text = css.read_text(encoding="utf-8", errors="replace")
    for url in re.findall(r"url\(['\"]?([^'\")]+)['\"]?\)", text):
        if re.match(r"^(https?:)?//", url):
            external.add(url)
        elif not url.startswith("data:"):
            f = (css.parent / unquote(urlsplit(url).path)).resolve()
            if f.is_file() and f.suffix in (".woff2",):  # browsers take the first format they support
                out.add(f)
    for url in re.findall(r"@import\s+url\(['\"]?([^'\")]+)", text):
        if re.match(r"^(https?:)?//", url):
            external.add(url)
    return out


def weigh(site: Path) -> dict:
    site = site.resolve()
    cache: dict = {}
    pages = [page_weight(site, p, cache) for p in sorted(site.rglob("*.html"))]
    files = [f for f in site.rglob("*") if f.is_file()]
    return {"site": str(site), "total_bytes": sum(f.stat().st_size for f in files), "files": len(files),
            "pages": sorted(pages, key=lambda p: -p["first_load"])}


def mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("site", type=Path, nargs="?", default=Path("_docs"))
    p.add_argument("--json", action="store_true")
    p.add_argument("--top", type=int, default=6)
    a = p.parse_args(argv)
    w = weigh(a.site)
    if a.json:
        print(json.dumps(w, indent=1))
        return 0
    print(f"{a.site}: {mb(w['total_bytes'])} in {w['files']} files, {len(w['pages'])} pages")
    print(f"{'page':24} {'first load':>11} {'html':>9} {'html gz':>9} {'inline img':>11} {'lazy img':>9} {'frames':>9}")
    for r in w["pages"][: a.top]:
        print(f"{r['page']:24} {mb(r['first_load']):>11} {mb(r['html']):>9} {mb(r['html_gzip']):>9} {mb(r['inline_images']):>11} "
              f"{mb(r['lazy']):>9} {mb(r['frames']):>9}")
    ext = sorted({u for r in w["pages"] for u in r["external"]})
    print(f"loaded from other hosts: {len(ext)}" + (f" ({', '.join(ext[:4])}{', ...' if len(ext) > 4 else ''})" if ext else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
