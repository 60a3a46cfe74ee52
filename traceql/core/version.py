"""The package's version (pyproject.toml's), which workspaces, timelines and exports record."""

__version__ = "0.1.0"
