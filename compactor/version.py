"""The package version (ground floor: importable from anywhere without loading the package)."""

__version__ = "0.1.0"
