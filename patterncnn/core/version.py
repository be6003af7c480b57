"""The package version, in one place: ``patterncnn.__version__`` and every output's ``created_by`` read it."""

__version__ = "0.1.0"
