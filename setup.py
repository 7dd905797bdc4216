"""Finds forge's packages for setuptools, so a new subpackage ships without being listed.

Everything else about the build is in pyproject.toml. The built-in loop definitions live in
the top-level machines/ folder and ship as the package forge.machines, and the examples the
documentation runs in examples/ as forge.examples (`forge examples` writes them out), each
mapped there by `package-dir` in pyproject.toml, which no search under forge/ can find:
they are added here.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["forge", "forge.*"]), "forge.machines", "forge.examples"])
