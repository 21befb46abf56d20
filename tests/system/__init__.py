"""system tests (see tests/README.md)."""
