"""Block Kit checks the stand-in applies like Slack does, and reading blocks back as text.

Slack refuses a message whose blocks break its limits (`invalid_blocks`); a stand-in that
accepted them would let a renderer bug reach production, so the limits the renderer owns
are enforced here too. Only the limits flagbot can hit are checked, not the whole schema.
"""

from __future__ import annotations

from typing import Any

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_FIELD_TEXT = 2000
MAX_FIELDS = 10
MAX_HEADER_TEXT = 150
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_ID = 255
MAX_ACTIONS_ELEMENTS = 25
MAX_CONTEXT_ELEMENTS = 10
MAX_MESSAGE_TEXT = 40000


def block_errors(blocks: list[dict[str, Any]]) -> list[str]:
    """Slack-style error strings (`... [json-pointer:/blocks/N/...]`); empty when valid."""
    errors: list[str] = []
    if len(blocks) > MAX_BLOCKS:
        errors.append(f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]")
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        where = f"/blocks/{i}"
        if not isinstance(block, dict) or "type" not in block:
            errors.append(f"missing required field: type [json-pointer:{where}]")
            continue
        block_id = block.get("block_id")
        if isinstance(block_id, str):
            if block_id in block_ids:
                errors.append(f"duplicate block_id [json-pointer:{where}/block_id]")
            if len(block_id) > MAX_ID:
                errors.append(f"must be less than {MAX_ID + 1} characters [json-pointer:{where}/block_id]")
            block_ids.add(block_id)
        errors.extend(_block_errors(block, where))
    return errors


def _too_long(obj: Any, limit: int, where: str) -> list[str]:
    text = obj.get("text") if isinstance(obj, dict) else None
    if isinstance(text, str) and len(text) > limit:
        return [f"must be less than {limit + 1} characters [json-pointer:{where}/text]"]
    return []


def _block_errors(block: dict[str, Any], where: str) -> list[str]:
    kind = block["type"]
    errors: list[str] = []
    if kind == "section":
        errors += _too_long(block.get("text"), MAX_SECTION_TEXT, f"{where}/text")
        fields = block.get("fields") or []
        if len(fields) > MAX_FIELDS:
            errors.append(f"no more than {MAX_FIELDS} items allowed [json-pointer:{where}/fields]")
        for j, f in enumerate(fields):
            errors += _too_long(f, MAX_FIELD_TEXT, f"{where}/fields/{j}")
        if "text" not in block and not fields:
            errors.append(f"must provide either text or fields [json-pointer:{where}]")
        if isinstance(block.get("accessory"), dict):
            errors += _element_errors(block["accessory"], f"{where}/accessory")
    elif kind == "header":
        errors += _too_long(block.get("text"), MAX_HEADER_TEXT, f"{where}/text")
    elif kind == "actions":
        elements = block.get("elements") or []
        if len(elements) > MAX_ACTIONS_ELEMENTS:
            errors.append(
                f"no more than {MAX_ACTIONS_ELEMENTS} items allowed [json-pointer:{where}/elements]"
            )
        action_ids: set[str] = set()
        for j, element in enumerate(elements):
            action_id = element.get("action_id")
            if action_id in action_ids:
                errors.append(f"duplicate action_id [json-pointer:{where}/elements/{j}/action_id]")
            action_ids.add(action_id)
            errors += _element_errors(element, f"{where}/elements/{j}")
    elif kind == "context" and len(block.get("elements") or []) > MAX_CONTEXT_ELEMENTS:
        errors.append(f"no more than {MAX_CONTEXT_ELEMENTS} items allowed [json-pointer:{where}/elements]")
    return errors


def _element_errors(element: dict[str, Any], where: str) -> list[str]:
    if element.get("type") != "button":
        return []
    errors = _too_long(element.get("text"), MAX_BUTTON_TEXT, f"{where}/text")
    value = element.get("value")
    if isinstance(value, str) and len(value) > MAX_BUTTON_VALUE:
        errors.append(f"must be less than {MAX_BUTTON_VALUE + 1} characters [json-pointer:{where}/value]")
    action_id = element.get("action_id")
    if isinstance(action_id, str) and len(action_id) > MAX_ID:
        errors.append(f"must be less than {MAX_ID + 1} characters [json-pointer:{where}/action_id]")
    return errors


def buttons(blocks: list[dict[str, Any]]) -> list[tuple[str | None, dict[str, Any]]]:
    """Every button with the block_id of its block (actions elements and section accessories)."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    for block in blocks:
        candidates: list[Any] = []
        if block.get("type") == "actions":
            candidates = list(block.get("elements") or [])
        elif block.get("type") == "section" and block.get("accessory"):
            candidates = [block["accessory"]]
        found += [
            (block.get("block_id"), e)
            for e in candidates
            if isinstance(e, dict) and e.get("type") == "button"
        ]
    return found


def plain_text(blocks: list[dict[str, Any]]) -> list[str]:
    """The readable text of each block, for the web page and for assertions on what a person sees."""
    lines: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind in ("section", "header"):
            text = (block.get("text") or {}).get("text")
            if text:
                lines.append(str(text))
            lines += [str(f.get("text", "")) for f in block.get("fields") or []]
        elif kind == "context":
            lines.append(
                "  ".join(str(e.get("text", e.get("alt_text", ""))) for e in block.get("elements") or [])
            )
        elif kind == "actions":
            lines.append(
                " ".join(f"[{(e.get('text') or {}).get('text', '')}]" for e in block.get("elements") or [])
            )
        elif kind == "divider":
            lines.append("---")
        elif kind == "image":
            lines.append(f"(image: {block.get('alt_text', '')})")
        elif kind == "rich_text":
            lines.append(_rich_text(block))
    return lines


def _rich_text(block: dict[str, Any]) -> str:
    parts: list[str] = []
    for section in block.get("elements") or []:
        for element in section.get("elements") or []:
            parts.append(str(element.get("text", "")))
    return "".join(parts)
