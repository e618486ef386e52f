"""Running a coroutine from synchronous code: the one way the package does it (the agent's batch runs, the demo's
runs, a tool called by hand), also inside Jupyter, whose thread already runs an event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures


def run_coroutine(coro):
    """Run ``coro`` to completion and return its result (or raise its exception): with ``asyncio.run`` when no event
    loop runs in this thread, else (Jupyter) in a worker thread with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="venus-coroutine") as pool:
        return pool.submit(asyncio.run, coro).result()
