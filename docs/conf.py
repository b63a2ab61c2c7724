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
exclude_patterns = ["_build"]
