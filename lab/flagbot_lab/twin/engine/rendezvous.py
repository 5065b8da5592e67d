"""Multi-node rendezvous over TCP at `--dist-init-addr`, as torch.distributed's TCPStore does it.

Why over the network and not faked: the testbed's nodes are separate network namespaces, and
the behaviours flagbot must cope with are network behaviours: node 0 hosts the store and waits
for the others, which retry connecting; a node started alone waits and then fails after the
timeout; nodes started with different flags meet but cannot work together and fail too; a node
that restarts alone cannot re-join peers that are already running.

Protocol (one JSON line each way): a node of rank >= 1 connects to node 0 (retrying until the
deadline) and sends `{"rank", "nnodes", "fingerprint"}`; node 0 answers every node once all
ranks have joined, `{"ok": true}` when all fingerprints match its own, else `{"ok": false}`.
A mismatch is not reported at once: as in a real launch, the ranks sit in their first collective
until the timeout, then fail with an NCCL error. After success the connections stay open, and a
peer that goes away makes the survivor fail after the same timeout (what NCCL's watchdog does
to a survivor), so a lone restart leads both units through systemd's restart logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Rendezvous", "RendezvousError", "fingerprint", "split_addr"]

NOT_COMPARED = frozenset({"--node-rank", "--host", "--port"})
"""Flags that legitimately differ between the nodes of one deployment."""
_VALUED = frozenset({"--node-rank", "--host", "--port"})


def fingerprint(argv: Sequence[str]) -> str:
    """A hash of the flags that must match across nodes (all but node rank, host and port)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in NOT_COMPARED:
            skip = "=" not in arg and name in _VALUED
            continue
        kept.append(arg)
    return hashlib.sha256("\0".join(kept).encode()).hexdigest()[:16]


def split_addr(addr: str) -> tuple[str, int]:
    """`10.0.0.1:5000` or `[::1]:5000` → (host, port)."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class RendezvousError(Exception):
    """The exception line to print (torch.distributed / NCCL wording)."""

    def __init__(self, exception_line: str, extra: Sequence[str] = ()) -> None:
        super().__init__(exception_line)
        self.exception_line = exception_line
        self.extra = list(extra)


def nccl_error(nccl_version: str) -> RendezvousError:
    return RendezvousError(
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        f"ProcessGroupNCCL.cpp:3356, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version {nccl_version}",
        [
            "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
            "Last error:",
            "Error: peer ranks disagree on the collective's shape or count",
        ],
    )


@dataclass
class Rendezvous:
    """One node's side. `world_size` counts processes (TP x PP ranks), as TCPStore does."""

    nnodes: int
    node_rank: int
    host: str
    port: int
    fingerprint: str
    timeout_s: float
    world_size: int
    nccl_version: str = "2.27.5"
    _server: asyncio.base_events.Server | None = None
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)
    _readers: list[asyncio.StreamReader] = field(default_factory=list)

    @property
    def per_node(self) -> int:
        return max(1, self.world_size // max(1, self.nnodes))

    async def run(self) -> None:
        """Return once all nodes met with equal flags; raise RendezvousError otherwise."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        if self.node_rank == 0:
            await self._host(deadline)
        else:
            await self._join(deadline)

    async def _host(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        joined: dict[int, tuple[str, asyncio.StreamWriter]] = {}
        everyone = loop.create_future()
        accepting = True

        async def on_peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                hello = json.loads(await reader.readline())
                rank = int(hello["rank"])
            except (ValueError, KeyError, TypeError, OSError):
                writer.close()
                return
            if not accepting or rank in joined or not 0 < rank < self.nnodes:
                self._writers.append(writer)  # a late or duplicate joiner waits and times out
                return
            joined[rank] = (str(hello.get("fingerprint")), writer)
            self._readers.append(reader)
            self._writers.append(writer)
            if len(joined) == self.nnodes - 1 and not everyone.done():
                everyone.set_result(None)

        try:
            self._server = await asyncio.start_server(on_peer, host=None, port=self.port, reuse_address=True)
        except OSError as exc:
            raise RendezvousError(
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                f"network address. port: {self.port}, useIpv6: false, code: -{exc.errno}, name: EADDRINUSE, "
                "message: address already in use"
            ) from None
        try:
            await asyncio.wait_for(everyone, max(0.0, deadline - loop.time()))
        except TimeoutError:
            joined_procs = self.per_node * (1 + len(joined))
            raise RendezvousError(
                f"torch.distributed.DistStoreError: Timed out after {round(self.timeout_s) + 1} seconds "
                f"waiting for clients. {joined_procs}/{self.world_size} clients joined."
            ) from None
        accepting = False
        ok = all(fp == self.fingerprint for fp, _ in joined.values())
        for _, writer in joined.values():
            writer.write((json.dumps({"ok": ok}) + "\n").encode())
            with contextlib.suppress(OSError):
                await writer.drain()
        if not ok:
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            raise nccl_error(self.nccl_version)

    async def _join(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        reader = writer = None
        while reader is None:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), max(0.01, deadline - loop.time())
                )
            except (OSError, TimeoutError):
                if loop.time() >= deadline:
                    raise self._connect_timeout() from None
                await asyncio.sleep(min(0.2, max(0.0, deadline - loop.time())))
        assert writer is not None
        self._readers.append(reader)
        self._writers.append(writer)
        hello = {"rank": self.node_rank, "nnodes": self.nnodes, "fingerprint": self.fingerprint}
        writer.write((json.dumps(hello) + "\n").encode())
        try:
            line = await asyncio.wait_for(reader.readline(), max(0.0, deadline - loop.time()))
            answer = json.loads(line) if line else None
        except (TimeoutError, ValueError, OSError):
            answer = None
        if answer is None:
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            raise RendezvousError(
                f"torch.distributed.DistStoreError: wait timeout after {round(self.timeout_s * 1000)}ms, "
                "keys: /default_pg/0//cuda//0"
            )
        if not answer.get("ok"):
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            raise nccl_error(self.nccl_version)

    def _connect_timeout(self) -> RendezvousError:
        return RendezvousError(
            f"torch.distributed.DistNetworkError: The client socket has timed out after "
            f"{round(self.timeout_s * 1000)}ms while trying to connect to ({self.host}, {self.port})."
        )

    async def watch(self) -> RendezvousError:
        """Wait until a peer's connection drops (a peer died); return the error to fail with."""
        if not self._readers:
            await asyncio.Event().wait()
        waits = [asyncio.ensure_future(r.read()) for r in self._readers]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        await asyncio.sleep(self.timeout_s)
        return RendezvousError(
            "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            f"NCCLUtils.cpp:77, remote process exited or there was a network error, NCCL version {self.nccl_version}",
            [
                "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."
            ],
        )

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
