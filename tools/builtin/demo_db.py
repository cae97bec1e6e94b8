"""Generated demo databases: the sales database of the flagship demo (seed §5.1: "summarise
last month's sales into an analysis report ...") and a second, differently shaped invoicing
database for tests. Only ``scripts/demo.sh`` and the tests use them: the data tools read the
database the user names (``HERMES_DATABASE``) and never fall back to these.

Sales schema (:func:`generate_sales_db`)::

    regions(region_id INTEGER PK, name TEXT)
    customers(customer_id INTEGER PK, name TEXT, region_id INTEGER -> regions, segment TEXT)
    products(product_id INTEGER PK, name TEXT, category TEXT, unit_price REAL)
    orders(order_id INTEGER PK, customer_id INTEGER -> customers, order_date TEXT 'YYYY-MM-DD')
    order_items(order_item_id INTEGER PK, order_id INTEGER -> orders,
                product_id INTEGER -> products, quantity INTEGER, unit_price REAL)

    sales_lines  VIEW: one row per order line — order_id, order_date, region, customer,
                 segment, product, category, quantity, unit_price, revenue

Revenue of an order = SUM(quantity * unit_price) of its items (currency units, 2 decimals).

Invoicing schema (:func:`generate_invoices_db`, several years)::

    clients(client_ref TEXT PK 'C-0001', legal_name TEXT, country_code TEXT, onboarded DATE)
    invoices(inv_no INTEGER PK, issued_on TIMESTAMP 'YYYY-MM-DD HH:MM:SS',
             client_ref TEXT -> clients, net_amount_cents INTEGER, vat_cents INTEGER,
             status TEXT 'paid'|'open'|'void', paid_at TEXT ISO 'YYYY-MM-DDTHH:MM:SS' or NULL)
    invoice_lines(line_id INTEGER PK, inv_no INTEGER -> invoices, sku TEXT, qty INTEGER,
                  line_cents INTEGER)

Same arguments → byte-identical table contents. ``python -m tools.builtin.demo_db PATH``
creates the sales database at PATH when it is missing (``--invoices`` for the other one).
"""

from __future__ import annotations

import calendar
import datetime as dt
import random
import re
import sqlite3
from pathlib import Path

from base.sqlite_files import open_sqlite

SCHEMA_SQL = """
CREATE TABLE regions (region_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT NOT NULL,
    region_id INTEGER NOT NULL REFERENCES regions(region_id), segment TEXT NOT NULL);
CREATE TABLE products (product_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
    category TEXT NOT NULL, unit_price REAL NOT NULL);
CREATE TABLE orders (order_id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(customer_id), order_date TEXT NOT NULL);
CREATE TABLE order_items (order_item_id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders(order_id),
    product_id INTEGER NOT NULL REFERENCES products(product_id),
    quantity INTEGER NOT NULL, unit_price REAL NOT NULL);
CREATE INDEX idx_orders_date ON orders(order_date);
CREATE INDEX idx_items_order ON order_items(order_id);
-- the reporting view a sales database usually has: one row per order line with its date,
-- region, customer, product and revenue (the normalised tables stay the source of truth)
CREATE VIEW sales_lines AS
    SELECT o.order_id, o.order_date, r.name AS region, c.name AS customer, c.segment,
           p.name AS product, p.category, i.quantity, i.unit_price,
           i.quantity * i.unit_price AS revenue
    FROM order_items i
    JOIN orders o ON o.order_id = i.order_id
    JOIN customers c ON c.customer_id = o.customer_id
    JOIN regions r ON r.region_id = c.region_id
    JOIN products p ON p.product_id = i.product_id;
"""

REGIONS = ["North", "South", "East", "West", "Central"]
SEGMENTS = ["enterprise", "smb", "consumer"]
PRODUCTS = [
    ("Laptop Pro 14", "hardware", 1299.00),
    ("Laptop Air 13", "hardware", 999.00),
    ("4K Monitor 27", "hardware", 379.00),
    ("Docking Station", "accessories", 189.00),
    ("Wireless Keyboard", "accessories", 59.90),
    ("Ergonomic Mouse", "accessories", 39.90),
    ("Noise-Cancelling Headset", "accessories", 149.00),
    ("Office Suite Licence", "software", 129.00),
    ("Antivirus Annual", "software", 49.00),
    ("Cloud Backup 1TB", "services", 99.00),
    ("On-site Support Day", "services", 650.00),
    ("Webcam HD", "accessories", 79.00),
]
FIRST = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Stark",
    "Wayne",
    "Wonka",
    "Tyrell",
    "Cyberdyne",
    "Soylent",
    "Aperture",
    "Gringotts",
    "Oceanic",
    "Monarch",
]
LAST = ["Ltd", "GmbH", "Inc", "Partners", "Group", "Labs", "Trading", "Holdings"]
MONTH_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")


def last_full_month(today: dt.date | None = None) -> str:
    """``YYYY-MM`` of the last full calendar month before ``today`` (default: local today)."""
    today = today or dt.date.today()
    first = today.replace(day=1)
    return (first - dt.timedelta(days=1)).strftime("%Y-%m")


def month_add(month: str, delta: int) -> str:
    """``YYYY-MM`` shifted by ``delta`` months."""
    y, m = (int(x) for x in month.split("-"))
    idx = y * 12 + (m - 1) + delta
    return f"{idx // 12:04d}-{idx % 12 + 1:02d}"


def _build(tmp: Path) -> sqlite3.Connection:
    """A connection to the new file ``tmp`` that a generator fills and then renames over its
    path: the shared opener without WAL (the result is the user's database, opened read-only by
    the data tools; a rollback journal leaves no ``-wal``/``-shm`` beside it) and with
    ``sqlite3``'s implicit transactions (one ``commit`` at the end)."""
    return open_sqlite(tmp, wal=False, autocommit=False)


def generate_sales_db(path: Path | str, months: int = 6, end_month: str | None = None, seed: int = 7) -> Path:
    """Create (overwrite) a deterministic sales DB at ``path``; return the path.

    ``months`` calendar months ending at ``end_month`` (``YYYY-MM``; default the last full month
    before today), 80–140 orders a month with a mild upward trend, 1–4 items per order.
    Raises ValueError on a malformed ``end_month`` or ``months < 1``.
    """
    end_month = end_month or last_full_month()
    if not MONTH_RE.fullmatch(end_month):
        raise ValueError(f"end_month must be YYYY-MM, got {end_month!r}")
    if months < 1:
        raise ValueError("months must be >= 1")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    rng = random.Random(seed)
    con = _build(tmp)
    try:
        con.executescript(SCHEMA_SQL)
        con.executemany("INSERT INTO regions VALUES (?, ?)", list(enumerate(REGIONS, 1)))
        con.executemany(
            "INSERT INTO products VALUES (?, ?, ?, ?)", [(i, n, c, p) for i, (n, c, p) in enumerate(PRODUCTS, 1)]
        )
        customers = []
        for cid in range(1, 61):
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)} {cid:02d}"
            customers.append((cid, name, rng.randint(1, len(REGIONS)), rng.choice(SEGMENTS)))
        con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", customers)
        order_id = item_id = 0
        start = month_add(end_month, -(months - 1))
        for k in range(months):
            month = month_add(start, k)
            y, m = (int(x) for x in month.split("-"))
            ndays = calendar.monthrange(y, m)[1]
            n_orders = rng.randint(80, 120) + 4 * k
            for _ in range(n_orders):
                order_id += 1
                day = rng.randint(1, ndays)
                con.execute(
                    "INSERT INTO orders VALUES (?, ?, ?)",
                    (order_id, rng.randint(1, len(customers)), f"{month}-{day:02d}"),
                )
                for pid in rng.sample(range(1, len(PRODUCTS) + 1), rng.randint(1, 4)):
                    item_id += 1
                    qty = rng.choice([1, 1, 1, 2, 2, 3, 5])
                    price = PRODUCTS[pid - 1][2]
                    if rng.random() < 0.15:  # occasional discount
                        price = round(price * 0.9, 2)
                    con.execute("INSERT INTO order_items VALUES (?, ?, ?, ?, ?)", (item_id, order_id, pid, qty, price))
        con.commit()
    finally:
        con.close()
    tmp.replace(path)
    return path


INVOICES_SCHEMA_SQL = """
CREATE TABLE clients (client_ref TEXT PRIMARY KEY, legal_name TEXT NOT NULL,
    country_code TEXT NOT NULL, onboarded DATE NOT NULL);
CREATE TABLE invoices (inv_no INTEGER PRIMARY KEY, issued_on TIMESTAMP NOT NULL,
    client_ref TEXT NOT NULL REFERENCES clients(client_ref), net_amount_cents INTEGER NOT NULL,
    vat_cents INTEGER NOT NULL, status TEXT NOT NULL, paid_at TEXT);
CREATE TABLE invoice_lines (line_id INTEGER PRIMARY KEY,
    inv_no INTEGER NOT NULL REFERENCES invoices(inv_no), sku TEXT NOT NULL,
    qty INTEGER NOT NULL, line_cents INTEGER NOT NULL);
CREATE INDEX idx_invoices_issued ON invoices(issued_on);
"""
COUNTRIES = ["DE", "FR", "NL", "SE", "PL", "IT", "ES"]
SKUS = [
    ("CONSULT-H", 12000),
    ("LICENSE-Y", 89000),
    ("SUPPORT-M", 15000),
    ("TRAINING-D", 95000),
    ("HOSTING-M", 4900),
    ("AUDIT", 250000),
]
VAT_RATE = 0.2


def generate_invoices_db(path: Path | str, years: int = 3, end_month: str | None = None, seed: int = 11) -> Path:
    """Create (overwrite) a deterministic invoicing DB at ``path`` (schema in the module doc);
    return the path. ``years`` × 12 months ending at ``end_month`` (default the last full month
    before today), 25–60 invoices a month, 1–3 lines each; ``net_amount_cents`` = sum of the
    lines, ``vat_cents`` = 20 % of it (rounded). Raises ValueError on bad arguments."""
    end_month = end_month or last_full_month()
    if not MONTH_RE.fullmatch(end_month):
        raise ValueError(f"end_month must be YYYY-MM, got {end_month!r}")
    if years < 1:
        raise ValueError("years must be >= 1")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    rng = random.Random(seed)
    months = years * 12
    start = month_add(end_month, -(months - 1))
    con = _build(tmp)
    try:
        con.executescript(INVOICES_SCHEMA_SQL)
        clients = []
        for n in range(1, 41):
            onboarded = f"{start}-{rng.randint(1, 28):02d}"
            clients.append((f"C-{n:04d}", f"{rng.choice(FIRST)} {rng.choice(LAST)}", rng.choice(COUNTRIES), onboarded))
        con.executemany("INSERT INTO clients VALUES (?, ?, ?, ?)", clients)
        inv_no, line_id = 1000, 0
        for k in range(months):
            month = month_add(start, k)
            y, m = (int(x) for x in month.split("-"))
            ndays = calendar.monthrange(y, m)[1]
            for _ in range(rng.randint(25, 60)):
                inv_no += 1
                issued = dt.datetime(
                    y, m, rng.randint(1, ndays), rng.randint(8, 18), rng.randint(0, 59), rng.randint(0, 59)
                )
                net = 0
                for _ in range(rng.randint(1, 3)):
                    line_id += 1
                    sku, price = rng.choice(SKUS)
                    qty = rng.randint(1, 6)
                    net += qty * price
                    con.execute(
                        "INSERT INTO invoice_lines VALUES (?, ?, ?, ?, ?)", (line_id, inv_no, sku, qty, qty * price)
                    )
                status = rng.choices(["paid", "open", "void"], [0.8, 0.15, 0.05])[0]
                paid_at = (
                    (issued + dt.timedelta(days=rng.randint(3, 40))).isoformat(timespec="seconds")
                    if status == "paid"
                    else None
                )
                con.execute(
                    "INSERT INTO invoices VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        inv_no,
                        issued.strftime("%Y-%m-%d %H:%M:%S"),
                        rng.choice(clients)[0],
                        net,
                        round(net * VAT_RATE),
                        status,
                        paid_at,
                    ),
                )
        con.commit()
    finally:
        con.close()
    tmp.replace(path)
    return path


def ensure_demo_db(path: Path | str, kind: str = "sales") -> Path:
    """The demo database at ``path``, generated with the defaults only when the file is missing
    (``kind`` "sales" or "invoices"). Used by ``scripts/demo.sh``; never by the tools."""
    path = Path(path)
    if not path.exists():
        (generate_invoices_db if kind == "invoices" else generate_sales_db)(path)
    return path


def generate_cli(argv: list[str] | None = None) -> int:
    """``python -m tools.builtin.demo_db PATH [--invoices]``: create the demo DB at PATH if missing."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m tools.builtin.demo_db",
        description="Create a generated demo database at PATH when it is missing.",
    )
    parser.add_argument("path", type=Path)
    parser.add_argument("--invoices", action="store_true", help="the invoicing schema instead of the sales one")
    opts = parser.parse_args(argv)
    existed = opts.path.exists()
    path = ensure_demo_db(opts.path, "invoices" if opts.invoices else "sales")
    print(f"{'kept existing' if existed else 'generated'} demo database {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(generate_cli())
