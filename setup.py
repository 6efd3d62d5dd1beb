"""Packaging hook: ship the top-level ``rules/`` catalog inside the wheel as ``compactor/_rules``.

In a source checkout (and editable installs) compactor reads ``rules/`` directly; an installed
wheel has no top-level folder, so the build copies the catalog next to the package.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithRules(build_py):
    def run(self):
        super().run()
        src = Path(__file__).resolve().parent / "rules"
        if src.is_dir() and not self.editable_mode:
            shutil.copytree(src, Path(self.build_lib) / "compactor" / "_rules", dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildWithRules})
