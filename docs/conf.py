"""Sphinx configuration of daskgp's documentation: MyST Markdown pages, the notebooks rendered with their
stored outputs (never executed here: the test suite executes them), and an API reference from the
docstrings. Built by ``make docs`` (and by ``make test``) with warnings as errors."""

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from daskgp._version import __version__  # noqa: E402

project = "daskgp"
author = "the daskgp developers"
copyright = "2026, the daskgp developers"  # noqa: A001
release = version = __version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.doctest", "sphinx.ext.mathjax"]
napoleon_google_docstring = False  # the docstrings with sections are numpydoc's
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3
nb_execution_mode = "off"  # the notebooks carry their outputs; tests/test_notebooks.py executes them
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the docstrings state shapes and units; the signatures stay readable
html_theme = "alabaster"
html_title = f"daskgp {release}"

# the notebooks live in notebooks/ (where users open them); the docs render a copy
_nb = HERE / "notebooks"
shutil.copytree(ROOT / "notebooks", _nb, dirs_exist_ok=True)
# the changelog lives at the repository root, where packagers look for it
shutil.copyfile(ROOT / "CHANGELOG.md", HERE / "changelog.md")

# the provenance of the benchmark numbers the README and these pages quote, written at every build from the
# results JSONs (benchmarks/claims.py): the revision each measured, and a flag where its code changed since
sys.path.insert(0, str(ROOT / "benchmarks"))
import claims  # noqa: E402

(HERE / "provenance.md").write_text(
    "# Provenance of the quoted numbers\n\n"
    "Each benchmark number the README quotes is rendered from its results JSON by `benchmarks/claims.py`, and "
    "`tests/test_claims.py` fails when the text and the JSON disagree. Each JSON records the revision it "
    "measured and a content hash of the code it measured; this table, written when the documentation is "
    "built, compares that hash with the code as it is now. A flagged result was measured on code that has "
    "changed since: its number stands for that revision, not for today's code, until it is measured again.\n\n"
    + claims.provenance_table() + "\n")
