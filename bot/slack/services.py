"""What the Slack handlers share: settings, the store, background runs, and idempotency keys.

Why background tasks: Slack wants an acknowledgement within 3 s, an experiment takes minutes;
so a handler acks, then hands the run to a task kept here (a reference is held so it is not
garbage-collected mid-run, and its failure is logged with an error id and shown in the thread).

Why a task waits for a quiet moment before it starts: acknowledgements and the work run on one
event loop, and asyncio has no priorities. In a burst of commands, the work of the first ones
(SSH handshakes, rendering, Web API calls: milliseconds of CPU each) would otherwise run between
the later ones' requests and hold their acks for hundreds of milliseconds. So a task starts
once no request has arrived for `QUIET_S` (at most `MAX_DEFER_S` later, so work is never
starved): a fraction of a second no user sees on a thread that takes minutes, against acks that
stay in the tens of milliseconds. (A burst of 50 from one sender on the 2-core machine arrives
over ~0.1 s, hence 0.15 s.)
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from bot.app.context import AppContext
from bot.config import Settings
from bot.slack.rate_limit import ReadLimiter
from bot.store import AsyncStore
from bot.store.seen_keys import DELIVERY_PREFIX, first_times, forget_deliveries

log = logging.getLogger(__name__)
QUIET_S = 0.15
"""A task starts once no request has arrived for this long ..."""
MAX_DEFER_S = 1.0
"""... or this long after it was spawned, whichever comes first."""
SEEN_IN_MEMORY = 10_000
"""Keys also kept in memory (the newest; the store has them all)."""
PRUNE_EVERY_S = 3600.0
"""How often the delivery keys older than a day are dropped from the store."""


def error_id() -> str:
    """A short id a user can quote; the log line with the traceback carries the same id."""
    return uuid.uuid4().hex[:10]


@dataclass
class SlackServices:
    """Everything a handler needs besides Slack's own arguments (one per app)."""

    settings: Settings
    store: AsyncStore
    lease_ttl_s: float = 60.0
    bot_user_id: str | None = None
    tasks: set[asyncio.Task[object]] = field(default_factory=set)
    seen: dict[str, str] = field(default_factory=dict)
    """Idempotency keys already acted on (button nonce or event id) -> who acted."""
    read_limiter: ReadLimiter = field(default_factory=ReadLimiter)
    """Each user's read commands of the last minute (`[slack] read_commands_per_minute`)."""
    _seen_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _unstored: list[tuple[str, str, asyncio.Future[bool]]] = field(default_factory=list)
    """Keys waiting for the store's trip in flight to end; they go together in the next one."""
    _storing: bool = False
    _last_request: float = float("-inf")
    _pruned_at: float = float("-inf")

    @property
    def context(self) -> AppContext:
        """The application layer's context: this bot's settings, store and lease time to live."""
        return AppContext(self.settings, self.store, lease_ttl_s=self.lease_ttl_s)

    def request_seen(self) -> None:
        """A listener was entered: the work of the tasks waits until the requests stop coming."""
        self._last_request = asyncio.get_running_loop().time()

    async def _after_requests(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MAX_DEFER_S
        while (pause := min(self._last_request + QUIET_S, deadline) - loop.time()) > 0:
            await asyncio.sleep(pause)

    def spawn(
        self,
        work: Coroutine[Any, Any, object],
        *,
        on_error: Callable[[str, BaseException], Awaitable[None]] | None = None,
    ) -> asyncio.Task[object]:
        """Run `work` after the ack; an unexpected error is logged with an id and reported."""

        async def guarded() -> object:
            try:
                await self._after_requests()
                return await work
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                ident = error_id()
                log.exception("flagbot error %s", ident)
                if on_error is not None:
                    try:
                        await on_error(ident, exc)
                    except Exception:
                        log.exception("flagbot error %s: could not report it", ident)
                return None

        task = asyncio.create_task(guarded())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def first_time(self, key: str, actor: str) -> bool:
        """True the first time `key` is seen; a double click or a redelivered event gets False,
        also after a restart of the bot (the key is in the store)."""
        async with self._seen_lock:
            if key in self.seen:
                return False
            self.seen[key] = actor
            while len(self.seen) > SEEN_IN_MEMORY:
                del self.seen[next(iter(self.seen))]
        return await self._stored_first_time(key, actor)

    async def _stored_first_time(self, key: str, actor: str) -> bool:
        """Ask the store, grouped: while one trip records keys, the keys that arrive wait and go
        together in the next. Why: each trip to the store's worker thread costs the event loop
        a hand-over of the GIL, which in a burst of commands held each ack by milliseconds
        (50 trips in a burst of 50; grouped, a handful)."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._unstored.append((key, actor, future))
        if not self._storing:
            self._storing = True
            task: asyncio.Task[object] = asyncio.create_task(self._store_keys())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return await future

    async def _store_keys(self) -> None:
        batch: list[tuple[str, str, asyncio.Future[bool]]] = []
        try:
            while self._unstored:
                batch, self._unstored = self._unstored, []
                try:
                    fresh = await self.store.run(
                        first_times, self.store.store, [(key, actor) for key, actor, _ in batch]
                    )
                except Exception as exc:  # each waiting handler sees the store's error
                    for _key, _actor, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_key, _actor, future), first in zip(batch, fresh, strict=True):
                    if not future.done():
                        future.set_result(first)
        except BaseException as exc:  # cancelled (shutdown): no handler is left waiting
            for _key, _actor, future in [*batch, *self._unstored]:
                if not future.done():
                    future.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            self._unstored = []
            raise
        finally:
            self._storing = False

    async def first_delivery(self, kind: str, ident: str, actor: str) -> bool:
        """True the first time Slack delivers this command or event (`ident`: its trigger id or
        event id, the same in a retry and in a replayed request), in any process, across
        restarts. The keys of deliveries older than a day are dropped now and then."""
        now = asyncio.get_running_loop().time()
        if now - self._pruned_at > PRUNE_EVERY_S:
            self._pruned_at = now
            self.spawn(self.store.run(forget_deliveries, self.store.store))
        return await self.first_time(f"{DELIVERY_PREFIX}{kind}:{ident}", actor)

    async def drain(self) -> None:
        """Wait for the runs in flight (shutdown, tests)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
