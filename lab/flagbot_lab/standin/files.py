"""The three-step file upload of slack_sdk's files_upload_v2.

1. files.getUploadURLExternal (filename, length) -> upload_url, file_id
2. POST the bytes to upload_url (served by the stand-in; answered "OK - <length>" as text/plain,
   the content type slack_sdk treats as the upload step's answer)
3. files.completeUploadExternal (files=[{id, title}], channel_id, thread_ts, initial_comment)
   -> the files, each with its permalink; with a channel, one message carrying them is posted.

flagbot uploads long journal excerpts and charts this way; the legacy files.upload is gone.
"""

from __future__ import annotations

from typing import Any

from flagbot_lab.standin.params import Params
from flagbot_lab.standin.workspace import SlackError, Workspace


def upload_path(file_id: str) -> str:
    """Where step 2 POSTs the bytes of `file_id`."""
    return f"/upload/v1/{file_id}"


def get_upload_url_external(ws: Workspace, p: Params, base: str) -> dict[str, Any]:
    """Step 1: a file id and the URL its bytes are to be POSTed to."""
    filename = p.required("filename")
    length = p.number("length", -1)
    if length < 0:
        raise SlackError("invalid_arguments")
    stored = ws.new_file(filename, length, base)
    return {"ok": True, "upload_url": base + upload_path(stored.id), "file_id": stored.id}


def receive_upload(ws: Workspace, file_id: str, data: bytes) -> tuple[int, str]:
    """Step 2: keep the bytes; (HTTP status, text/plain body) as files.slack.com answers."""
    stored = ws.files.get(file_id)
    if stored is None:
        return 404, "file not found"
    stored.content = data
    stored.length = len(data)
    return 200, f"OK - {len(data)}"


def complete_upload_external(ws: Workspace, p: Params, base: str) -> dict[str, Any]:
    """Step 3: title the files and, given a channel, share them there (in `thread_ts` if given)."""
    entries = p.obj("files")
    if not isinstance(entries, list) or not entries:
        raise SlackError("invalid_arguments")
    channels = [c for c in (p.opt("channels") or "").split(",") if c]
    channel_id = p.opt("channel_id")
    if channel_id:
        channels.insert(0, channel_id)
    thread_ts = p.opt("thread_ts")
    if thread_ts and not channels:
        raise SlackError("invalid_arguments")
    files = []
    for entry in entries:
        stored = ws.files.get(str(entry.get("id"))) if isinstance(entry, dict) else None
        if stored is None or not stored.uploaded:
            raise SlackError("file_not_found")
        stored.title = str(entry.get("title") or stored.name)
        files.append(stored)
    for channel in channels:
        chan = ws.channel(channel)
        for stored in files:
            stored.channel, stored.thread_ts = chan.id, thread_ts
        ws.post(chan.id, text=p.opt("initial_comment") or "", thread_ts=thread_ts, files=files)
    return {"ok": True, "files": [f.to_api() for f in files]}
