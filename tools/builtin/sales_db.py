"""Deterministic SQLite sales database for the flagship task (seed §5.1: "summarise last
month's sales into an analysis report ...").

Schema (also quoted in the ``query_database`` tool description)::

    regions(region_id INTEGER PK, name TEXT)
    customers(customer_id INTEGER PK, name TEXT, region_id INTEGER -> regions, segment TEXT)
    products(product_id INTEGER PK, name TEXT, category TEXT, unit_price REAL)
    orders(order_id INTEGER PK, customer_id INTEGER -> customers, order_date TEXT 'YYYY-MM-DD')
    order_items(order_item_id INTEGER PK, order_id INTEGER -> orders,
                product_id INTEGER -> products, quantity INTEGER, unit_price REAL)

Revenue of an order = SUM(quantity * unit_price) of its items (currency units, 2 decimals).
Same ``(months, end_month, seed)`` → byte-identical table contents.
"""

from __future__ import annotations

import calendar
import datetime as dt
import random
import re
import sqlite3
from pathlib import Path

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
"""

REGIONS = ["North", "South", "East", "West", "Central"]
SEGMENTS = ["enterprise", "smb", "consumer"]
PRODUCTS = [
    ("Laptop Pro 14", "hardware", 1299.00), ("Laptop Air 13", "hardware", 999.00),
    ("4K Monitor 27", "hardware", 379.00), ("Docking Station", "accessories", 189.00),
    ("Wireless Keyboard", "accessories", 59.90), ("Ergonomic Mouse", "accessories", 39.90),
    ("Noise-Cancelling Headset", "accessories", 149.00), ("Office Suite Licence", "software", 129.00),
    ("Antivirus Annual", "software", 49.00), ("Cloud Backup 1TB", "services", 99.00),
    ("On-site Support Day", "services", 650.00), ("Webcam HD", "accessories", 79.00),
]
FIRST = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne", "Wonka",
         "Tyrell", "Cyberdyne", "Soylent", "Aperture", "Gringotts", "Oceanic", "Monarch"]
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


def generate_sales_db(path: Path | str, months: int = 6, end_month: str | None = None, seed: int = 7) -> Path:
    """Create (overwrite) a deterministic sales DB at ``path``; return the path.

    ``months`` calendar months ending at ``end_month`` (``YYYY-MM``; default the last full month
    before today), 80–140 orders a month with a mild upward trend, 1–4 items per order.
    Raises ValueError on a malformed ``end_month`` or ``months < 1``.
    """
    end_month = end_month or last_full_month()
    if not MONTH_RE.match(end_month):
        raise ValueError(f"end_month must be YYYY-MM, got {end_month!r}")
    if months < 1:
        raise ValueError("months must be >= 1")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    rng = random.Random(seed)
    con = sqlite3.connect(tmp)
    try:
        con.executescript(SCHEMA_SQL)
        con.executemany("INSERT INTO regions VALUES (?, ?)", list(enumerate(REGIONS, 1)))
        con.executemany("INSERT INTO products VALUES (?, ?, ?, ?)",
                        [(i, n, c, p) for i, (n, c, p) in enumerate(PRODUCTS, 1)])
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
                con.execute("INSERT INTO orders VALUES (?, ?, ?)",
                            (order_id, rng.randint(1, len(customers)), f"{month}-{day:02d}"))
                for pid in rng.sample(range(1, len(PRODUCTS) + 1), rng.randint(1, 4)):
                    item_id += 1
                    qty = rng.choice([1, 1, 1, 2, 2, 3, 5])
                    price = PRODUCTS[pid - 1][2]
                    if rng.random() < 0.15:  # occasional discount
                        price = round(price * 0.9, 2)
                    con.execute("INSERT INTO order_items VALUES (?, ?, ?, ?, ?)",
                                (item_id, order_id, pid, qty, price))
        con.commit()
    finally:
        con.close()
    tmp.replace(path)
    return path


def ensure_sales_db(data_dir: Path | str) -> Path:
    """``data_dir/sales.db``, generated with the defaults if missing. Blocking file I/O: call
    through ``asyncio.to_thread`` from async code."""
    path = Path(data_dir) / "sales.db"
    if not path.exists():
        generate_sales_db(path)
    return path
