"""The lint gate (issue 21): the real ``ruff`` with the repository's ``pyproject.toml`` refuses
each kind of fault the wider rule set was chosen for — a ``noqa`` naming a rule the set does not
enable (RUF100), a blind ``except`` with no reason, a loop variable reassigned, a list of strings
missing a comma, ``subprocess.run`` without ``check=``, ``print()`` in library code — and keeps
``print()`` allowed where it is the output (evals/, the command line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts ruff

ROOT = Path(__file__).resolve().parents[2]
RUFF = (sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "json")


def findings(source: str, path: str = "tools/_lint_probe.py") -> set[str]:
    """The rule codes ruff reports for ``source`` linted as if it were the file ``path``."""
    done = subprocess.run(
        [*RUFF, "--config", str(ROOT / "pyproject.toml"), "--stdin-filename", path, "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return {f["code"] for f in json.loads(done.stdout)}


@pytest.mark.parametrize(
    ("source", "code"),
    [
        # a noqa for a rule the set leaves out documents nothing ruff checks
        ("def f():\n    import json  # noqa: PLC0415\n\n    return json\n", "RUF100"),
        # a noqa for an enabled rule that does not fire there
        ("X = 1  # noqa: E501\n", "RUF100"),
        # a blind except that neither logs nor re-raises, without a reason
        ("def f(g):\n    try:\n        return g()\n    except Exception:\n        return None\n", "BLE001"),
        (
            "def f(xs):\n    out = []\n    for x in xs:\n        x = x.strip()\n        out.append(x)\n    return out\n",
            "PLW2901",
        ),
        ('NAMES = [\n    "alpha"\n    "beta",\n    "gamma",\n]\n', "ISC004"),
        ("import subprocess\n\n\ndef f():\n    return subprocess.run(['true']).returncode\n", "PLW1510"),
        ("def f():\n    print('debug')\n", "T201"),
        ("def f(g):\n    try:\n        g()\n    except OSError:\n        pass\n", "SIM105"),
    ],
    ids=[
        "noqa-not-enabled",
        "noqa-unused",
        "blind-except",
        "loop-variable",
        "missing-comma",
        "run-check",
        "print",
        "suppress",
    ],
)
def test_the_gate_refuses_each_kind_of_fault(source: str, code: str) -> None:
    assert code in findings(source)


def test_a_reasoned_noqa_of_an_enabled_rule_passes() -> None:
    source = (
        "import logging\n\nlog = logging.getLogger(__name__)\n\n\ndef f(g):\n    try:\n        return g()\n"
        "    except Exception:  # noqa: BLE001 - a tool failure must not end the turn\n        return None\n"
    )
    assert findings(source) == set()


@pytest.mark.parametrize("path", ["evals/_lint_probe.py", "graph/cli/_lint_probe.py", "tests/unit/_lint_probe.py"])
def test_print_is_allowed_where_it_is_the_output(path: str) -> None:
    assert "T201" not in findings("def f():\n    print('report')\n", path)
