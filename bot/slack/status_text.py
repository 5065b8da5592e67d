"""Slack's answer to `status`: what an on-call engineer needs first, in a few lines.

Why more than the units: at 3 a.m. the question after "is it up?" is "what is it running, and is
that what we last saw work?". So the answer has, after the units and /health, how /health was
reached, the effective capacity of the latest start next to the known-good one, and each
`${NAME}` reference of the flags with its value from the `EnvironmentFile=` (secrets masked by
the application layer), beside the freeze, the divergence and the queue. The CLI prints the same
data as a table (`bot.cli.target`); both read `TargetStatus.to_json()`.
"""

from __future__ import annotations

from typing import Any


def own_unit(node: dict[str, object], node0_unit: str) -> str:
    """` (sglang-worker.service)` after a node whose unit is not node 0's (the one in the
    heading): a head/worker or templated layout shows every node's service, one layout stays short."""
    unit = node.get("unit") or node0_unit
    return "" if unit == node0_unit else f" ({unit})"


def status_text(target: str, data: dict[str, Any]) -> str:
    """The status as mrkdwn lines (escaped by the renderer: `bot.slack.render`)."""
    lines = [
        f"*{target}* `{data['unit']}`: /health {data['health']}; "
        + "; ".join(
            f"{node['node']}{own_unit(node, data['unit'])} {node.get('active', node.get('error'))}"
            for node in data["nodes"]
        )
    ]
    if data.get("http_way"):
        lines.append(f"HTTP: {data['http_way']}")
    latest = data.get("latest_snapshot")
    good = data.get("known_good_snapshot_id")
    if latest:
        capacity = (
            f"latest start: snapshot #{latest['id']}, max_running_requests effective "
            f"{latest['effective_max_running_requests']} (parsed {latest['parsed_max_running_requests']})"
        )
        lines.append(capacity + ("" if good is None else f"; known-good #{good}"))
    elif good is not None:
        lines.append(f"known-good snapshot #{good}")
    if data.get("references"):
        shown = ", ".join(f"`{name}` = {value}" for name, value in data["references"].items())
        lines.append(f"references (EnvironmentFile=): {shown}")
    if data["diverged"]:
        lines.append(f":warning: diverged: {data['diverged']}")
    if data.get("freeze"):
        lines.append(f":snowflake: {data['freeze']['text']}")
    lines.extend(f":hourglass: queued: {waiter['text']}" for waiter in data.get("waiting", []))
    return "\n".join(lines)
