"""What the stand-in keeps and answers tests with: the workspace, recorded calls, waiting.

Split from the server so the queries a test makes (`calls`, `messages`, `thread`,
`wait_for`) read apart from the HTTP plumbing that fills them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from flagbot_lab.standin.model import Ephemeral, Message, StoredFile
from flagbot_lab.standin.outbound import Delivery
from flagbot_lab.standin.recording import Call, ResponsePost, ResponseTarget
from flagbot_lab.standin.workspace import Workspace

T = TypeVar("T")


class StandinState:
    """The workspace and the records of one stand-in, with the queries tests make on them."""

    def __init__(self) -> None:
        self.workspace = Workspace()
        self._calls: list[Call] = []
        self._responses: list[ResponsePost] = []
        self._targets: dict[str, ResponseTarget] = {}
        self._sent: list[Delivery] = []
        self._changed = asyncio.Condition()

    def calls(self, method: str | None = None) -> list[Call]:
        """Every Web API call (rate-limited and failed ones too), oldest first; or one method's."""
        return [c for c in self._calls if method is None or c.method == method]

    def responses(self) -> list[ResponsePost]:
        """The bot's messages to response_urls and in slash-command acks (`via`), oldest first."""
        return list(self._responses)

    def sent(self) -> list[Delivery]:
        """Every request (HTTP) or envelope (Socket Mode) sent to the bot, oldest first; an
        envelope's later attempts are in `socket.envelopes()`."""
        return list(self._sent)

    @property
    def last_request(self) -> Delivery:
        """The latest request sent to the bot (to redeliver it)."""
        if not self._sent:
            raise LookupError("nothing was sent to the bot yet")
        return self._sent[-1]

    def messages(self, channel: str, thread_ts: str | None = None) -> list[Message]:
        """Oldest first: what the channel shows (roots, plain and broadcast messages), or with
        `thread_ts` that thread's replies (not its root; `thread()` gives both)."""
        if thread_ts is None:
            return self.workspace.roots(channel)
        return self.workspace.replies(channel, thread_ts)

    def thread(self, channel: str, ts: str) -> list[Message]:
        """A thread as people see it: its root, then its replies."""
        root = self.workspace.thread_root(channel, ts)
        return [root, *self.workspace.replies(channel, root.ts)]

    def message(self, channel: str, ts: str) -> Message:
        """One message (with its edit history)."""
        return self.workspace.message(channel, ts)

    def ephemerals(self, user: str | None = None) -> list[Ephemeral]:
        """Messages only one user saw (chat.postEphemeral, ephemeral response_url replies)."""
        return [e for e in self.workspace.ephemerals if user is None or e.user == user]

    def files(self) -> list[StoredFile]:
        """Every file of the upload flow, in the order step 1 created them."""
        return list(self.workspace.files.values())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[], T], *, timeout: float = 5.0) -> T:
        """Wait until `predicate()` is truthy (re-checked after every change) and return it."""
        try:
            async with self._changed:
                return await asyncio.wait_for(self._changed.wait_for(predicate), timeout)
        except TimeoutError:
            seen = [c.method for c in self._calls]
            raise TimeoutError(f"not met within {timeout}s; Web API calls so far: {seen}") from None

    async def wait_for_calls(self, method: str, count: int = 1, *, timeout: float = 5.0) -> list[Call]:
        """Wait until `method` was called at least `count` times; its calls."""

        def enough() -> list[Call]:
            found = self.calls(method)
            return found if len(found) >= count else []

        return await self.wait_for(enough, timeout=timeout)
