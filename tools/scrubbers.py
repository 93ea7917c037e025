"""Static stand-ins for the `ipywidgets.interact` cells: scrubbers, rendered at build time.

A static page cannot run the widget's function, so a slider on it would lie (the figure under it stays the one of
the first value). tools/build_site.py instead renders the widget's function for a grid of its control values while
it executes the notebook, and the page gets a scrubber: the same controls, switching between those frames with a
small script (no kernel, no widget JavaScript, nothing fetched).

Two halves:

- in the kernel (`record()` at start-up, `render_frames()` after the last cell): every `interactive` widget the
  notebook makes is recorded with the execution count of its cell; afterwards its function is called for a grid
  of values of its controls, within a time budget per widget, and each result (figures as 2x PNG files, printed or
  returned text) is saved. The grid is the full product of the control values when it fits the budget, else "one
  control at a time" (every value of each control with the others at their defaults);
- at page time (`scrubber_html()`): the HTML of a scrubber for one widget, with its frames' URLs, the values, and
  a note saying what was precomputed and how to get every value (run the notebook).
"""
from __future__ import annotations

import html
import itertools
import json
import math
import os
import time

MARK = "BN-SCRUBBERS-JSON:"
_REG: list = []  # (execution count of the cell, interactive widget)


# ------------------------------------------------------------------------------------------ kernel side
def record():
    "Record every `ipywidgets.interactive` made from now on (interact makes one), with its cell's execution count."
    try:
        from ipywidgets.widgets import interaction
    except ImportError:
        return
    cls = interaction.interactive
    if getattr(cls, "_bn_recording", False):
        return
    orig = cls.__init__

    def __init__(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        try:
            from IPython import get_ipython

            ip = get_ipython()
            count = ip.execution_count if ip is not None else None
        except Exception:
            count = None
        _REG.append((count, self))

    cls.__init__ = __init__
    cls._bn_recording = True


def _fmt(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _snap(x, lo, step):
    return lo + round((x - lo) / step) * step if step else x


def control_values(c, n: int) -> tuple[list, list, int] | None:
    """(values, labels, index of the current value) for one control with about `n` values, or None when the control
    cannot be scrubbed (a text box)."""
    import ipywidgets as W

    if hasattr(c, "_options_values"):  # Dropdown, RadioButtons, ToggleButtons, Select, SelectionSlider
        vals, labels = list(c._options_values), [str(x) for x in c._options_labels]
        return vals, labels, max(0, c.index if isinstance(c.index, int) else 0)
    if isinstance(c, (W.Checkbox, W.ToggleButton)):
        return [False, True], ["off", "on"], int(bool(c.value))
    if isinstance(c, W.FloatLogSlider):
        lo, hi, step, base = c.min, c.max, c.step or 0, c.base
        exps = [_snap(lo + (hi - lo) * k / (n - 1), lo, step) for k in range(n)] if n > 1 else [lo]
        vals = sorted({round(base ** e, 12) for e in exps} | {c.value})
    elif isinstance(c, (W.IntSlider, W.BoundedIntText)):
        lo, hi, step = c.min, c.max, c.step or 1
        vals = sorted({int(_snap(round(lo + (hi - lo) * k / (n - 1)), lo, step)) for k in range(n)} | {int(c.value)}) if n > 1 else [int(c.value)]
        vals = [v for v in vals if lo <= v <= hi]
    elif isinstance(c, (W.FloatSlider, W.BoundedFloatText)):
        lo, hi, step = c.min, c.max, c.step or 0
        vals = sorted({round(_snap(lo + (hi - lo) * k / (n - 1), lo, step), 10) for k in range(n)} | {c.value}) if n > 1 else [c.value]
        vals = [v for v in vals if lo - 1e-12 <= v <= hi + 1e-12]
    else:
        return None
    # keep about n values, always including the current one
    if len(vals) > n:
        keep = {round(k * (len(vals) - 1) / (n - 1)) for k in range(n)} | {vals.index(c.value)}
        vals = [v for i, v in enumerate(vals) if i in keep]
    return vals, [_fmt(v) for v in vals], vals.index(c.value)


def _render(w, kwargs: dict, outdir: str, stem: str) -> dict:
    "Call the widget's function once; save its figures as files; return {'images': [...], 'text': str}."
    import base64

    from IPython.display import display
    from IPython.utils.capture import capture_output

    try:
        from ipywidgets.widgets.interaction import show_inline_matplotlib_plots
    except ImportError:  # pragma: no cover
        show_inline_matplotlib_plots = lambda: None  # noqa: E731
    images, texts = [], []
    with capture_output() as cap:
        result = w.f(**kwargs)
        show_inline_matplotlib_plots()
        if getattr(w, "auto_display", True) and result is not None:
            display(result)
    for k, o in enumerate(cap.outputs):
        data, meta = o.data or {}, o.metadata or {}
        for mime, ext in (("image/png", "png"), ("image/jpeg", "jpg"), ("image/svg+xml", "svg")):
            if mime in data:
                name = f"{stem}-{k}.{ext}"
                raw = data[mime]  # in the kernel: bytes (PNG) or str (SVG); base64 only once sent to a client
                if isinstance(raw, str):
                    blob = raw.encode() if mime == "image/svg+xml" else base64.b64decode(raw)
                else:
                    blob = bytes(raw)
                m = meta.get(mime, meta) if isinstance(meta, dict) else {}
                width, height = m.get("width"), m.get("height")
                if mime == "image/png":  # 2x (tools/figures.py): shown at half its pixel size, palette-compressed
                    from figures import compress_png, png_scale, png_size

                    s = png_scale(blob)
                    w, h = png_size(blob)
                    width, height = width or w // s, height or h // s
                    blob = compress_png(blob)
                with open(os.path.join(outdir, name), "wb") as f:
                    f.write(blob)
                images.append({"src": name, "width": width, "height": height})
                break
        else:
            if "text/plain" in data:
                texts.append(data["text/plain"])
    try:
        import matplotlib.pyplot as plt

        plt.close("all")
    except ImportError:
        pass
    text = (cap.stdout or "") + "\n".join(texts)
    return {"images": images, "text": text.strip("\n")}


def _one(w, outdir: str, budget: float, max_values: int) -> dict:
    import ipywidgets as W

    controls, fixed = [], {}
    for c in w.kwargs_widgets:
        name = getattr(c, "_kwarg", None)
        if isinstance(c, W.fixed) or not isinstance(c, W.DOMWidget):
            fixed[name] = c.get_interact_value() if hasattr(c, "get_interact_value") else getattr(c, "value", None)
            continue
        controls.append((name, c))
    defaults = {name: c.get_interact_value() for name, c in controls}
    os.makedirs(outdir, exist_ok=True)
    t0 = time.perf_counter()
    first = _render(w, {**fixed, **defaults}, outdir, "f0")
    t1 = max(time.perf_counter() - t0, 0.02)
    max_frames = max(1, int(budget / t1))
    # values per control: as many as the budget allows, up to max_values (discrete controls: all options, capped)
    per = max(2, min(max_values, (max_frames - 1) // max(1, len(controls)) + 1))
    spec = []
    for name, c in controls:
        got = control_values(c, per)
        if got is None:
            spec.append({"name": name, "label": c.description or name, "values": [_fmt(defaults[name])], "raw": [defaults[name]], "default": 0})
            continue
        vals, labels, d = got
        if len(vals) > max_values:  # a long list of options: the current one and its neighbours
            lo = max(0, min(d - max_values // 2, len(vals) - max_values))
            vals, labels, d = vals[lo:lo + max_values], labels[lo:lo + max_values], d - lo
        spec.append({"name": name, "label": (c.description or name).rstrip(":"), "values": labels, "raw": vals, "default": d})
    sizes = [len(s["raw"]) for s in spec]
    full = math.prod(sizes) <= max_frames
    if full:
        keys = list(itertools.product(*[range(n) for n in sizes]))
    else:
        base = tuple(s["default"] for s in spec)
        keys = [base] + [base[:j] + (i,) + base[j + 1:] for j, s in enumerate(spec) for i in range(len(s["raw"])) if i != s["default"]]
    frames, failed = {}, []
    base = tuple(s["default"] for s in spec)
    frames[",".join(map(str, base))] = first
    deadline = t0 + max(budget * 1.5, 2 * t1)
    for n, key in enumerate(keys, 1):
        k = ",".join(map(str, key))
        if k in frames:
            continue
        if time.perf_counter() > deadline:
            failed.append(f"{k}: out of time")
            continue
        kw = {**fixed, **{s["name"]: s["raw"][i] for s, i in zip(spec, key)}}
        try:
            frames[k] = _render(w, kw, outdir, f"f{n}")
        except Exception as e:  # a value the function rejects: that frame is left out
            failed.append(f"{k}: {type(e).__name__}: {e}")
    for s in spec:
        s["raw"] = [r if isinstance(r, (int, float, str, bool)) or r is None else repr(r) for r in s["raw"]]
    return {"controls": spec, "frames": frames, "mode": "grid" if full else "one-at-a-time", "seconds_per_frame": round(t1, 3),
            "fixed": {k: _fmt(v) for k, v in fixed.items()}, "failed": failed}


def render_frames(outdir: str, budget: float = 30.0, max_values: int = 9):
    "Render every recorded widget (in the kernel, after the notebook ran); print the manifest after MARK."
    out = []
    for k, (count, w) in enumerate(_REG):
        d = os.path.join(outdir, f"w{k}")
        try:
            entry = _one(w, d, budget, max_values)
        except Exception as e:
            entry = {"error": f"{type(e).__name__}: {e}"}
        entry["execution_count"] = count
        entry["dir"] = f"w{k}"
        out.append(entry)
        try:
            w.close()
        except Exception:
            pass
    print(MARK + json.dumps(out))


# ------------------------------------------------------------------------------------------ page side
SCRIPT = """<script>(function(){if(window.bnScrubbers)return;window.bnScrubbers=1;
function init(el){var d=JSON.parse(el.getAttribute('data-bn-scrubber')),idx=d.controls.map(function(c){return c.default}),
box=el.querySelector('.bn-frame-box'),ctl=el.querySelectorAll('[data-bn-k]');
function key(){return idx.join(',')}
function show(){var f=d.frames[key()];if(!f)return;var imgs=box.querySelectorAll('img.bn-frame'),t=box.querySelector('.bn-frame-text');
f.images.forEach(function(im,i){var e=imgs[i];if(!e){e=document.createElement('img');e.className='bn-frame';box.insertBefore(e,t);}
e.src=d.base+im.src;if(im.width)e.width=im.width;if(im.height)e.height=im.height;
e.alt=d.alt+' ('+d.controls.map(function(c,j){return c.label+' = '+c.values[idx[j]]}).join(', ')+')';});
for(var i=f.images.length;i<imgs.length;i++)imgs[i].remove();
if(t){t.textContent=f.text||'';t.hidden=!f.text;}
ctl.forEach(function(c){var k=+c.getAttribute('data-bn-k');if(c.tagName==='SELECT')c.selectedIndex=idx[k];else c.value=idx[k];
var o=el.querySelector('output[data-bn-k="'+k+'"]');if(o)o.textContent=d.controls[k].values[idx[k]];});}
function set(k,i){idx[k]=i;if(!d.frames[key()]){for(var j=0;j<idx.length;j++)if(j!==k)idx[j]=d.controls[j].default;}show();
d.controls.forEach(function(c,j){[idx[j]-1,idx[j]+1].forEach(function(n){if(n<0||n>=c.values.length)return;var t=idx.slice();t[j]=n;
var f=d.frames[t.join(',')];if(f)f.images.forEach(function(im){(new Image()).src=d.base+im.src;});});});}
ctl.forEach(function(c){var k=+c.getAttribute('data-bn-k');c.addEventListener(c.tagName==='SELECT'?'change':'input',function(){
set(k,c.tagName==='SELECT'?c.selectedIndex:+c.value);});});show();}
function all(){document.querySelectorAll('.bn-scrubber').forEach(init);}
if(document.readyState==='loading')document.addEventListener('DOMContentLoaded',all);else all();})();</script>"""


def scrubber_html(entry: dict, base: str, alt: str, notebook_link: str | None = None) -> str:
    "The scrubber for one rendered widget; `base` is the URL of its frames folder relative to the page (ends with /)."
    spec, frames = entry["controls"], entry["frames"]
    key0 = ",".join(str(s["default"]) for s in spec)
    first = frames.get(key0) or next(iter(frames.values()))
    data = {"controls": [{"label": s["label"], "values": s["values"], "default": s["default"]} for s in spec],
            "frames": frames, "base": base, "alt": alt}
    rows = []
    for k, s in enumerate(spec):
        lab = html.escape(s["label"])
        if len(s["values"]) < 2:
            rows.append(f'<span class="bn-control bn-fixed">{lab} <output>{html.escape(s["values"][0])}</output></span>')
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in s["raw"]):
            rows.append(f'<label class="bn-control">{lab} <input type="range" min="0" max="{len(s["values"]) - 1}" step="1" '
                        f'value="{s["default"]}" data-bn-k="{k}" aria-label="{lab}"> <output data-bn-k="{k}">'
                        f'{html.escape(s["values"][s["default"]])}</output></label>')
        else:
            opts = "".join(f'<option{" selected" if i == s["default"] else ""}>{html.escape(v)}</option>' for i, v in enumerate(s["values"]))
            rows.append(f'<label class="bn-control">{lab} <select data-bn-k="{k}">{opts}</select></label>')
    for name, v in (entry.get("fixed") or {}).items():
        if name:
            rows.append(f'<span class="bn-control bn-fixed">{html.escape(name)} <output>{html.escape(v)}</output></span>')
    label = ", ".join(f'{s["label"]} = {s["values"][s["default"]]}' for s in spec)
    imgs = "".join(f'<img class="bn-frame" src="{html.escape(base + im["src"])}"'
                   + (f' width="{im["width"]}"' if im.get("width") else "") + (f' height="{im["height"]}"' if im.get("height") else "")
                   + f' alt="{html.escape(alt)} ({html.escape(label)})" loading="lazy" decoding="async">' for im in first["images"])
    text = html.escape(first.get("text") or "")
    n = len(frames)
    how = ("every combination of the values shown" if entry.get("mode") == "grid"
           else "one control at a time: moving a control returns the others to their starting values")
    run = f' <a href="{html.escape(notebook_link)}">Run the notebook</a> for any other value.' if notebook_link else " Run the notebook for any other value."
    note = (f'<p class="bn-scrubber-note">Interactive figure, precomputed when the book was built: {n} settings, '
            f'{how}.{run}</p>')
    blob = html.escape(json.dumps(data, separators=(",", ":")), quote=True)
    return (f'<div class="bn-scrubber" data-bn-scrubber="{blob}">\n<div class="bn-controls">{"".join(rows)}</div>\n'
            f'<div class="bn-frame-box">{imgs}<pre class="bn-frame-text"{"" if text else " hidden"}>{text}</pre></div>\n'
            f'{note}\n</div>\n{SCRIPT}')


def static_note(notebook_link: str | None = None) -> str:
    "What a page shows for a widget that has no frames (the notebook was not executed, or rendering failed)."
    run = f'<a href="{html.escape(notebook_link)}">run the notebook</a>' if notebook_link else "run the notebook"
    return (f'<div class="bn-scrubber bn-scrubber-missing"><p class="bn-scrubber-note">Interactive figure: its controls need '
            f'a running Python kernel; {run} to use them.</p></div>')
