"""Builds the optional compiled part: webapp/watch/_fanout.c (everything else is in
pyproject.toml). Without a C compiler the build goes on and the relay uses its pure-Python
path (webapp/watch/direct.py)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("webapp.watch._fanout", ["webapp/watch/_fanout.c"],
                             optional=True)])
