"""stencilkit's version: a leaf, so that the cache (which puts it in every key) does not import
the package's ``__init__``, which imports everything."""

__version__ = "0.1.0"
