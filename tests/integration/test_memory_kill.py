"""Never loses (seed §5.2): a real ``kill -9`` of a process in the middle of memory writes loses
nothing it had acknowledged — in the embedded episodic store (LanceDB) and in the persistent
retry queue (SQLite) — and leaves both readable; a second writer process keeps going meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memory.embeddings import HashEmbedder
from memory.episodic.lance import LanceEpisodicStore
from memory.queue import RetryQueue

ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from memory.embeddings import HashEmbedder
    from memory.episodic.base import EpisodicEvent
    from memory.episodic.lance import LanceEpisodicStore
    from memory.queue import RetryQueue

    async def main(data: Path, name: str) -> None:
        store = LanceEpisodicStore(data / "episodic.lance", HashEmbedder(16), optimize_every=7)
        queue = RetryQueue(data / "memory.db")
        n = 0
        while True:
            batch = [EpisodicEvent(user_id=name, kind="note", text=f"{name} memory {n + i} about reports",
                                   confidence=0.9) for i in range(3)]
            ids = await store.add_many(batch)
            print("ack", *ids, flush=True)          # acknowledged: add_many returned
            qid = await queue.enqueue("episodic.add", {"n": n}, "RuntimeError: test")
            print("queued", qid, flush=True)         # acknowledged: enqueue returned
            n += 3

    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
""")


def start(data: Path, name: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data), name],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def read_acks(proc: subprocess.Popen, want: int, deadline: float) -> tuple[list[str], list[int]]:
    acked: list[str] = []
    queued: list[int] = []
    assert proc.stdout is not None  # piped
    while len(acked) < want and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        kind, *rest = line.split()
        if kind == "ack":
            acked.extend(rest)
        elif kind == "queued":
            queued.append(int(rest[0]))
    return acked, queued


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_kill_9_mid_write_loses_nothing_acknowledged(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    victim, survivor = start(data, "victim"), start(data, "survivor")
    try:
        deadline = time.monotonic() + 120
        acked, queued = read_acks(victim, 45, deadline)
        assert len(acked) >= 45, "the writer did not get going"
        os.killpg(victim.pid, signal.SIGKILL)  # mid-stream: it is always inside a write
        victim.wait(10)
        tail = victim.stdout.read().split()  # lines already printed before the kill count too
        for i, word in enumerate(tail):
            if word == "ack":
                acked.extend(w for w in tail[i + 1 : i + 4])
            elif word == "queued" and i + 1 < len(tail):
                queued.append(int(tail[i + 1]))
        more, _ = read_acks(survivor, 9, time.monotonic() + 60)  # the other writer is unharmed
        assert len(more) >= 9
    finally:
        for proc in (victim, survivor):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    async def check() -> None:
        store = LanceEpisodicStore(data / "episodic.lance", HashEmbedder(16))
        stored = {e.id for e in await store.list("victim", limit=100_000)}
        missing = set(acked) - stored
        assert not missing, f"{len(missing)} acknowledged memories lost"
        hits = await store.search("victim", "memory about reports", k=3)
        assert hits  # still readable and searchable
        from memory.episodic.base import EpisodicEvent

        await store.add(EpisodicEvent(user_id="victim", kind="note", text="after the kill", confidence=0.9))
        assert await store.count("victim") == len(stored) + 1  # and writable
        entries = {e.id for e in await RetryQueue(data / "memory.db").pending()}
        assert set(queued) <= entries
        await store.close()

    asyncio.run(check())
