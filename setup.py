"""The one build step pyproject.toml cannot say: man/*.1 also go inside the package (walctl/man/), so
`walctl help COMMAND` reads them from any install, with or without `man`. man/ stays the only copy in the
source tree; the same pages are installed under share/man/man1 by [tool.setuptools.data-files]."""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class build_py_with_man(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "walctl", "man")
        os.makedirs(target, exist_ok=True)
        for page in sorted(glob.glob(os.path.join(HERE, "man", "*.1"))):
            shutil.copyfile(page, os.path.join(target, os.path.basename(page)))


setup(cmdclass={"build_py": build_py_with_man})
