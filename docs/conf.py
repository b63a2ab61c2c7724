"""Sphinx configuration for the trio_agents documentation (no theme beyond Sphinx's own)."""

from __future__ import annotations

project = "trio_agents"
author = "trio_agents developers"
copyright = "trio_agents developers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# No intersphinx: the build must pass offline (CI and fresh machines may have no network).
nitpicky = False

html_theme = "alabaster"
# A wider column than alabaster's 940 px page, so that code of up to MAX_CODE_LINE characters
# (tests/project/test_docs_code_width.py) fits unwrapped; wrap.css wraps anything longer.
html_theme_options = {"page_width": "1200px", "code_font_size": "0.85em"}
html_static_path = ["_static"]
html_css_files = ["wrap.css"]
exclude_patterns = ["_build"]
