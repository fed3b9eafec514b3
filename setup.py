"""Builds the optional compiled part: webapp/watch/_fanout.c (everything else is in
pyproject.toml). Without a C compiler the build goes on, and every relayed message goes
through its connection's outbox and the sender thread (webapp/watch/direct.py)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("webapp.watch._fanout", ["webapp/watch/_fanout.c"],
                             optional=True)])
