"""The chapters as a student meets them: JupyterLab 4 in headless Chromium, every cell run, every widget moved.

    make test-jupyterlab                   # or: .venv/bin/python -m pytest -p no:xdist -m jupyterlab -v tests/test_jupyterlab.py

Outside `make test` (about five minutes on 2 cores). For each chapter notebook (a copy in a temporary directory,
so autosave never touches nbs/): open it in JupyterLab, run all cells, and assert that no cell shows an error or
anything on stderr (warnings included), that the cells tools/tag_cells.py folds (`jupyter.source_hidden`) start
folded, that every slider and drop-down of every `interact` widget changes the
widget's output when moved by one step (as a reader moves it with the keyboard), within `MAX_RESPONSE` seconds,
and that the browser console logged no error. ipywidgets shows an exception raised in a widget's callback inside
the widget, not as a cell error, so only a test like this one sees it. JupyterLab's `window.jupyterapp`
(`--LabApp.expose_app_in_browser`) runs the cells and reports the kernel state; Chromium is Debian's, as in
tests/test_browser.py, and nothing is downloaded.
"""
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from test_browser import CHROMIUM_ARGS, NO_CHROMIUM, chromium_path

pytestmark = pytest.mark.jupyterlab
ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p.name for p in (ROOT / "nbs").glob("[0-9]*.ipynb"))
TOKEN = "bayesnotes-test"
MAX_RESPONSE = 20.0      # seconds for one widget change; measured 0.3-3 s here (the slowest refits a BNN)
KERNEL_IDLE = """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!k && k.status === 'idle'; }"""
STATE = """() => { const w = window.jupyterapp.shell.currentWidget;
    const code = w.content.widgets.filter(c => c.model.type === 'code' && c.model.sharedModel.getSource().trim() !== '');
    return {idle: w.sessionContext.session.kernel.status === 'idle', n_code: code.length,
            running: code.filter(c => c.model.executionState === 'running').length,
            unrun: code.map((c, i) => c.model.executionCount === null ? i : -1).filter(i => i >= 0)}; }"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM)
    tmp = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "nbs", tmp / "nbs", ignore=shutil.ignore_patterns("_*", ".ipynb_checkpoints"))
    # every cell in the DOM (JupyterLab 4 otherwise renders only the cells near the viewport)
    tracker = tmp / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text('{"windowingMode": "none"}')
    port = _free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp / "cfg"), JUPYTER_RUNTIME_DIR=str(tmp / "rt"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp / "ws"), JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
               JUPYTER_DATA_DIR=str(tmp / "data"))
    cmd = [str(ROOT / ".venv" / "bin" / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--ServerApp.token={TOKEN}", f"--ServerApp.root_dir={tmp}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(tmp / "server.log", "w")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        for _ in range(120):
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                assert server.poll() is None, (tmp / "server.log").read_text()[-3000:]
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(20)
        log.close()


@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield b
        b.close()


def _move(page, control, output):
    "Move one control by one step (back if it sits at its maximum); seconds until the widget's output changed."
    before = output.inner_html()
    start = time.time()
    if control.evaluate("e => e.tagName") == "SELECT":
        options = control.locator("option").all_inner_texts()
        current = control.evaluate("e => e.options[e.selectedIndex].text")
        control.select_option(label=next(o for o in options if o != current))
    else:
        value = lambda: control.get_attribute("aria-valuenow")
        at_max = control.evaluate("e => Number(e.getAttribute('aria-valuenow')) >= Number(e.getAttribute('aria-valuemax'))")
        start_value = value()
        for _ in range(3):                    # a key press can be lost while JupyterLab moves focus; the value tells
            control.scroll_into_view_if_needed()
            control.focus()
            page.keyboard.press("ArrowLeft" if at_max else "ArrowRight")
            try:
                page.wait_for_function("([e, v]) => e.getAttribute('aria-valuenow') !== v",
                                       arg=[control.element_handle(), start_value], timeout=2000, polling=50)
                break
            except Exception:
                pass
        assert value() != start_value, "the slider did not move"
    page.wait_for_function("([el, b]) => el.innerHTML !== b", arg=[output.element_handle(), before],
                           timeout=MAX_RESPONSE * 1000, polling=50)
    return time.time() - start


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_runs_in_jupyterlab_and_its_widgets_respond(lab, chromium, name):
    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    console = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console.append(str(e)))
    try:
        # a workspace of its own, reset: otherwise JupyterLab reopens the previous chapters as hidden tabs
        page.goto(f"{lab}/lab/workspaces/{Path(name).stem}/tree/nbs/{name}?token={TOKEN}&reset")
        page.wait_for_function(KERNEL_IDLE, timeout=180_000, polling=250)
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget.context.isReady", timeout=120_000)
        for _ in range(5):                    # the command is a no-op while the notebook is still being set up
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            page.wait_for_timeout(2000)
            state = page.evaluate(STATE)
            if state["running"] or len(state["unrun"]) < state["n_code"]:
                break
        quiet, deadline = 0, time.time() + 600
        while quiet < 4:                      # idle, nothing running, four polls in a row (run-all stops at an error)
            assert time.time() < deadline, f"{name}: still running after 10 minutes"
            page.wait_for_timeout(500)
            state = page.evaluate(STATE)
            quiet = quiet + 1 if state["idle"] and not state["running"] else 0
        panel = "#" + page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
        assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path") == f"nbs/{name}"
        # checks, setup and plumbing start folded (tools/tag_cells.py sets jupyter.source_hidden): JupyterLab obeys it
        folded = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.widgets"
                               ".filter(c => c.model.type === 'code' && c.inputHidden).length")
        meta = [c.get("metadata", {}) for c in json.loads((ROOT / "nbs" / name).read_text())["cells"] if c["cell_type"] == "code"]
        expected = sum(1 for m in meta if m.get("jupyter", {}).get("source_hidden"))
        assert expected and folded == expected, f"{name}: {folded} code cells start folded in JupyterLab, {expected} should"
        errors = page.evaluate("""() => Array.from(document.querySelectorAll('.jp-OutputArea-output'))
            .filter(e => e.querySelector('.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]')
                         || e.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr'
                         || /Traceback \\(most recent call last\\)/.test(e.innerText))
            .map(e => e.innerText.slice(0, 400))""")
        assert not errors, f"{name}: output on stderr or a traceback:\n" + "\n---\n".join(errors)
        assert not state["unrun"], f"{name}: code cells not run (run-all stopped early): {state['unrun'][:10]}"
        widgets = page.locator(f"{panel} .widget-interact")
        times = []
        for i in range(widgets.count()):
            w = widgets.nth(i)
            w.scroll_into_view_if_needed()
            output = w.locator(".widget-output").first
            controls = w.locator(".noUi-handle, select")
            assert controls.count() >= 1, f"{name}: widget {i} has no control"
            for j in range(controls.count()):
                try:
                    times.append(_move(page, controls.nth(j), output))
                except Exception as e:
                    raise AssertionError(f"{name}: widget {i}, control {j}: {type(e).__name__}: {str(e)[:300]}") from e
            inner = w.locator(".widget-output").first.inner_text()
            assert "Traceback" not in inner and "Error" not in inner.split("\n")[0], f"{name}: widget {i} shows an error:\n{inner[:600]}"
        assert not console, f"{name}: browser console errors: {console[:5]}"
        print(f"{name}: {widgets.count()} widget(s), {len(times)} control(s), response "
              + (f"{min(times):.2f}-{max(times):.2f} s" if times else "-"))
    finally:
        page.close()
