"""The target's SSH session as a command opens it: the target's config and the context's store.

Why a module: every target command (`bot.app.status`, `bot.app.target_commands`) opens it the
same way, and `status` must not import the other commands to do so.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from bot.app.context import AppContext
from bot.target.session import TargetSession


def open_session(ctx: AppContext, target: str) -> AbstractAsyncContextManager[TargetSession]:
    """`target`'s session (pooled by `flagbot serve`), recording into the context's store."""
    return TargetSession.open(target, ctx.settings.targets[target], store=ctx.store)
