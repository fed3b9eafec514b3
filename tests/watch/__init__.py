"""Watch relay tests over real sockets; a package so its conftest does not shadow
tests/conftest.py."""
