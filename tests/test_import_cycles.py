"""tools/import_cycles.py: the check `make lint` runs against import circles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "import_cycles.py"


def run(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, check=False)


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def test_finds_a_circle_hidden_in_a_function(tmp_path: Path) -> None:
    write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/sub/__init__.py": "",
        # `from .. import a` names the submodule a; the import inside a function still counts.
        "pkg/b.py": "def f():\n    from .sub import c\n",
        "pkg/sub/c.py": "from .. import a\n",
        "pkg/lone.py": "import pkg.a\n",
    })
    result = run("pkg", cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert "import cycle among 3 modules: pkg.a, pkg.b, pkg.sub.c" in result.stdout
    assert "pkg.a -> pkg.b  (pkg/a.py:1)" in result.stdout
    assert "pkg.b -> pkg.sub.c  (pkg/b.py:2)" in result.stdout
    assert "pkg.sub.c -> pkg.a  (pkg/sub/c.py:1)" in result.stdout
    assert "pkg.lone" not in result.stdout


def test_finds_a_circle_across_packages(tmp_path: Path) -> None:
    write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from other.b import thing\n",
        "other/__init__.py": "",
        "other/b.py": "import pkg.a\nthing = 1\n",
    })
    result = run("pkg", "other", cwd=tmp_path)
    assert result.returncode == 1
    assert "import cycle among 2 modules: other.b, pkg.a" in result.stdout
    assert run("pkg", cwd=tmp_path).returncode == 0  # other's modules are not edges then


def test_passes_on_an_acyclic_package(tmp_path: Path) -> None:
    write_package(tmp_path, {
        "pkg/__init__.py": "from .a import thing\n",
        # A name of the package (not a submodule) is an edge to its __init__.
        "pkg/a.py": "import json\nfrom . import b\nfrom pkg import other\nthing = b.value\n",
        "pkg/b.py": "value = 1\n",
        "pkg/other.py": "",
    })
    result = run("pkg", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert result.stdout == "no import cycles in pkg: 4 modules, 3 imports between them\n"


def test_a_circle_of_type_only_imports_counts(tmp_path: Path) -> None:
    write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/whole.py": "from pkg.part import Part\nclass Whole:\n    part: Part\n",
        "pkg/part.py": "from typing import TYPE_CHECKING\n"
                       "if TYPE_CHECKING:\n    from pkg.whole import Whole\n",
    })
    result = run("pkg", cwd=tmp_path)
    assert result.returncode == 1
    assert "pkg.part -> pkg.whole  (pkg/part.py:3)" in result.stdout


def test_webapp_and_simkube_have_no_import_cycles() -> None:
    # The same run as `make lint`.
    result = run("webapp", "simkube")
    assert result.returncode == 0, result.stdout
    assert result.stdout.startswith("no import cycles in webapp simkube: ")
