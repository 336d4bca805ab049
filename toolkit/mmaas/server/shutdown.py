"""Stop signals and the shutdown grace period.

On SIGTERM (Kubernetes, ``docker stop``) the server reports NOT_SERVING at once and keeps
its ports open for ``MMAAS_SHUTDOWN_GRACE_S`` seconds, so that probes and load balancers
see it leave while in-flight requests go on and new ones are refused with UNAVAILABLE;
then it closes the ports, gives the requests still in flight up to :data:`DRAIN_S` more
(cancelled after that), and exits 0. Keep grace + drain under the orchestrator's kill
timeout (Kubernetes: ``terminationGracePeriodSeconds``, 30 s by default; the default
grace is 25 s). SIGINT (Ctrl-C of ``mmaas serve``) skips the open-port wait. A second
signal ends the wait at once.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")
DRAIN_S = 5.0  # after the ports close: the longest in-flight requests still get


class Signals:
    """SIGTERM and SIGINT as they arrive on the running loop (install once per loop)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[int] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.queue.put_nowait, signum)

    async def next(self) -> int:
        """Wait for the next signal; its number."""
        return await self.queue.get()

    async def unless_signalled(self, work: Awaitable[T]) -> tuple[T | None, int | None]:
        """Await ``work`` unless a signal comes first: ``(result, None)`` or ``(None,
        signal number)`` (``work`` is then left to end on its own)."""
        task = asyncio.ensure_future(work)
        arrival = asyncio.ensure_future(self.next())
        await asyncio.wait({task, arrival}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            arrival.cancel()
            return task.result(), None
        return None, arrival.result()

    async def hold(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if another signal comes; True when one came."""
        try:
            await asyncio.wait_for(self.next(), seconds)
        except TimeoutError:
            return False
        return True


def open_ports_wait(signum: int | None, grace_s: float) -> float:
    """How long the ports stay open after ``signum`` (SIGTERM: the grace period; SIGINT
    or none: 0)."""
    return grace_s if signum == signal.SIGTERM else 0.0
