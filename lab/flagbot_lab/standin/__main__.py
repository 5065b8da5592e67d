"""`python -m flagbot_lab.standin`: run the stand-in on its own until SIGTERM or Ctrl-C.

Why a process of its own: measuring the bot (acknowledgement latency) or running the demo
must not share an event loop with the fake Slack, or the fake's work is counted as the bot's.
Prints one line, `standin BASE_URL`, once it listens. With `--socket-mode` requests go to the bot
as Socket Mode envelopes (`flagbot serve --slack-api BASE_URL/api/` connects with the
`--app-token`); without it, as signed HTTP requests to `--bot-url` (or as envelopes once a bot
connects over Socket Mode anyway).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from flagbot_lab.standin.server import Standin


async def _serve(args: argparse.Namespace) -> None:
    standin = Standin(
        args.signing_secret,
        args.bot_url,
        bot_token=args.bot_token,
        app_token=args.app_token,
        socket_mode=args.socket_mode,
        host=args.host,
        port=args.port,
    )
    base = await standin.start()
    print(f"standin {base}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await standin.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--signing-secret", default="standin-unused", help="HTTP mode's signing secret")
    parser.add_argument("--bot-token", default="xoxb-standin")
    parser.add_argument("--app-token", default="xapp-standin", help="Socket Mode's app-level token")
    parser.add_argument("--bot-url", default=None, help="where the bot listens (HTTP mode)")
    parser.add_argument(
        "--socket-mode",
        action="store_true",
        help="send to the bot over Socket Mode (flagbot serve's default)",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(_serve(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
