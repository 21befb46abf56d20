"""sqlq's version, in a module of its own: what reports it (``stats``, the tracer, the CLI)
imports it from here, below the package's face, and the build reads it here."""

__version__ = "0.1.0"
