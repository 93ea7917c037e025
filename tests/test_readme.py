"README.md is generated from the landing notebook (nbs/index.ipynb) by tools/make_readme.py, without Quarto."
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _make_readme():
    spec = importlib.util.spec_from_file_location("make_readme", ROOT / "tools" / "make_readme.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_in_sync_with_index():
    expected = _make_readme().readme_text(ROOT)
    readme = ROOT / "README.md"
    actual = readme.read_text(encoding="utf-8") if readme.exists() else ""
    assert actual == expected, "README.md is out of date with nbs/index.ipynb: run python tools/make_readme.py"


def test_readme_carries_the_index_content():
    "Every heading and every code block of the landing page, then of the maintainers' page (one level down), is in the README."
    text = _make_readme().readme_text(ROOT)
    for name, demoted in (("index.ipynb", ""), ("contributing.ipynb", "#")):
        nb = json.loads((ROOT / "nbs" / name).read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                for line in src.splitlines():
                    if line.startswith("#"):
                        assert demoted + line in text, f"heading {line!r} of {name} missing from the README"
            elif not src.lstrip().startswith("#|"):
                assert src.strip() in text, f"code cell of {name} missing from the README:\n{src}"
    assert "[@" not in text, "an unresolved citation in the README"


def test_hidden_cells_and_citations(tmp_path):
    "On a small project: hidden/exported cells are left out, echo: false keeps only output, links move to nbs/."
    import nbformat

    (tmp_path / "nbs").mkdir()
    (tmp_path / "settings.ini").write_text("[DEFAULT]\nnbs_path = nbs\nreadme_nb = index.ipynb\n")
    (tmp_path / "nbs" / "references.bib").write_text(
        "% a comment with @fake{ in it\n@book{doe2020book,\n  author = {Doe, Jane},\n  title = {A Book},\n"
        "  publisher = {P},\n  year = {2020}\n}\n")
    M, C = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    out = nbformat.v4.new_output("stream", name="stdout", text="42\n")
    nb = nbformat.v4.new_notebook(cells=[
        M("# Title\n\n> Tagline\n\nSee [ch 1](01_a.ipynb), [site](https://x.org) and [@doe2020book, p. 2]."),
        C("#| hide\nsecret = 1"), C("#| export\ndef f(): pass"), C("#| default_exp core"),
        C("#| echo: false\nprint(42)", outputs=[out]), C("x = 1 + 1"),
    ])
    nbformat.write(nb, tmp_path / "nbs" / "index.ipynb")
    text = _make_readme().readme_text(tmp_path)
    assert "secret" not in text and "def f" not in text and "default_exp" not in text and "print(42)" not in text
    assert "```\n42\n```" in text and "```python\nx = 1 + 1\n```" in text
    assert "(nbs/01_a.ipynb)" in text and "(https://x.org)" in text
    assert "(Doe 2020, p. 2)" in text and "## References" in text and "A Book" in text
