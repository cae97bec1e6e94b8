"""Reading a line from the terminal without blocking the event loop."""

from __future__ import annotations

import asyncio
import sys
import threading


async def ainput(prompt: str) -> str:
    """``input()`` on a daemon thread: Ctrl-C ends the program at once (a worker thread of
    ``asyncio.to_thread`` would keep it alive until a line arrives). Raises EOFError."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def deliver(line: str) -> None:
        if not future.done():
            future.set_result(line)

    def fail(error: BaseException) -> None:
        if not future.done():
            future.set_exception(error)

    def read() -> None:
        try:
            line = input(prompt)
            if not sys.stdin.isatty():
                print(line)  # piped input: keep the transcript readable
            loop.call_soon_threadsafe(deliver, line)
        except BaseException as exc:  # noqa: BLE001 - EOFError, KeyboardInterrupt: handed over to the awaiting task
            loop.call_soon_threadsafe(fail, exc)

    threading.Thread(target=read, daemon=True, name="hermes-input").start()
    return await future
