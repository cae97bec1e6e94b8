"""``bash scripts/demo.sh`` exits non-zero (4) when the run stopped before finishing the task,
0 only when it finished, and passes ``hermes run``'s own non-zero codes through. The script runs
in a copy of the project layout whose ``scripts/setup.sh`` does nothing (the real one would
check or reinstall ``.venv``): once with the real ``hermes`` against the OpenAI-compatible stub
model (it never calls a tool, so the flagship task stops with a stated reason), and with a
stand-in ``hermes`` that records how it was called, for the finished and failed paths and the
caller's ``--thread`` / ``--data-dir``."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT
from tests.support.openai_stub import OpenAIStub

pytestmark = pytest.mark.slow
VENV_BIN = Path(sys.executable).parent


def project(tmp_path: Path, hermes: Path | None = None) -> Path:
    """A project copy: scripts/demo.sh, a no-op scripts/setup.sh, .venv/bin/{python,hermes}."""
    proj = tmp_path / "proj"
    (proj / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "demo.sh", proj / "scripts" / "demo.sh")
    (proj / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\necho 'setup: skipped in this test'\n")
    bin_dir = proj / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "hermes").symlink_to(hermes or VENV_BIN / "hermes")
    return proj


def demo(proj: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")} | env
    return subprocess.run(
        ["bash", str(proj / "scripts" / "demo.sh"), *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=600,
        check=False,
    )


def demo_database(tmp_path: Path) -> str:
    path = tmp_path / "sales.db"
    subprocess.run(
        [sys.executable, "-m", "tools.builtin.demo_db", str(path)], check=True, cwd=ROOT, capture_output=True
    )
    return str(path)


def test_a_run_that_stopped_exits_4_with_its_stop_reason(tmp_path):
    proj = project(tmp_path)
    with OpenAIStub(answer="All done, the report is posted.") as stub:
        out = demo(
            proj,
            "--max-tool-rounds",
            "2",
            env={**stub.env(), "HERMES_DATABASE": demo_database(tmp_path), "PYTHONPATH": str(ROOT)},
        )
    assert out.returncode == 4, out.stdout[-3000:] + out.stderr[-3000:]
    assert "demo: the run stopped before finishing the task:" in out.stderr
    assert "hermes session show demo-" in out.stderr


def fake_hermes(tmp_path: Path, run_rc: int, stop_reason: str | None) -> tuple[Path, Path]:
    """A stand-in for .venv/bin/hermes: logs each call's arguments as a JSON line; ``run``
    exits ``run_rc``; ``session show`` prints a workbench with ``stop_reason``."""
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "fake-hermes"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"if sys.argv[1] == 'run': sys.exit({run_rc})\n"
        f"print(json.dumps({{'thread_id': 'x', 'stop_reason': {stop_reason!r}}}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, log


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize(
    ("run_rc", "stop", "expected"),
    [
        (0, None, 0),  # finished
        (0, "", 0),
        (0, "no progress: 3 rounds in a row did not bring the goal closer", 4),
        (2, None, 2),  # hermes run's own codes pass through, no check after
        (3, None, 3),
        (1, "anything", 1),
    ],
)
def test_exit_codes(tmp_path, run_rc, stop, expected):
    script, log = fake_hermes(tmp_path, run_rc, stop)
    out = demo(project(tmp_path, script), env={"HERMES_DATABASE": "/data/your.db"})
    assert out.returncode == expected, out.stderr
    made = calls(log)
    assert made[0][0] == "run" and made[0][2] == "--thread" and made[0][3].startswith("demo-")
    if run_rc:
        assert len(made) == 1  # nothing is read back after a failed run
    else:
        assert made[1][:3] == ["session", "show", made[0][3]]
    assert ("stopped before finishing the task" in out.stderr) == (expected == 4)


@pytest.mark.parametrize("style", ["separate", "equals"])
def test_the_callers_thread_and_data_dir_are_the_ones_checked(tmp_path, style):
    script, log = fake_hermes(tmp_path, 0, "round cap")
    data = str(tmp_path / "my data")
    args = ["--thread", "mine", "--data-dir", data] if style == "separate" else ["--thread=mine", f"--data-dir={data}"]
    out = demo(project(tmp_path, script), *args, env={"HERMES_DATABASE": "/data/your.db"})
    assert out.returncode == 4 and "round cap" in out.stderr
    run, show = calls(log)
    assert run[2:] == args  # no thread of its own added
    assert show[:3] == ["session", "show", "mine"] and show[3:5] == ["--data-dir", data]
