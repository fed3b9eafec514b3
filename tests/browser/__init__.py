"""Browser tests of the pages; a package so its conftest does not shadow tests/conftest.py."""
