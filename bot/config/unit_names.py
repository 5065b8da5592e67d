"""systemd service names as flagbot accepts them, for the config and for the node command table.

One rule in one place: a unit name reaches `systemctl`, `journalctl -u`, a drop-in path and a
sudoers line, so the config refuses at load what the command table would refuse at run time.
The rule is systemd's (`unit_name_is_valid`, systemd.unit(5)) narrowed to what needs no
quoting anywhere flagbot writes it: letters, digits and `:_.-` in the name, the same plus `@` in
a template's instance, `.service` last, at most 255 characters. systemd's `\\x2d`-style escapes
are refused (a backslash would need escaping in sudoers and in the shell).
"""

from __future__ import annotations

import re
from typing import Final

UNIT_NAME_MAX: Final = 255
"""systemd's UNIT_NAME_MAX (256) less the terminating NUL."""

SERVICE_NAME: Final = re.compile(
    r"^(?P<prefix>[A-Za-z0-9:_.-]+)(?:@(?P<instance>[A-Za-z0-9:_.@-]*))?\.service$"
)
"""`name.service`, `name@instance.service` or the template `name@.service` (empty instance)."""


class UnitNameError(ValueError):
    """A unit name systemd or flagbot refuses; the message says which rule and shows a good one."""


def is_template(name: str) -> bool:
    """`sglang@.service`: a template file, which systemd cannot start, only its instances."""
    found = SERVICE_NAME.match(name)
    return found is not None and found["instance"] == ""


def check_service_name(value: object, *, template_ok: bool = False) -> str:
    """`value` when it is a service name flagbot can run commands for, else `UnitNameError`.

    A template (`name@.service`) is accepted only where flagbot turns it into one instance per
    node (a target's `unit`, `template_ok=True`): `systemctl restart sglang@.service` fails."""
    if not isinstance(value, str) or not SERVICE_NAME.match(value):
        raise UnitNameError(
            f"{value!r} is not a systemd service name like sglang-qwen.service or sglang@0.service "
            "(letters, digits and :_.- only, one @ before an instance, ending in .service)"
        )
    if len(value) > UNIT_NAME_MAX:
        raise UnitNameError(f"{value[:40]!r}…: a unit name is at most {UNIT_NAME_MAX} characters")
    if is_template(value) and not template_ok:
        prefix = value.removesuffix("@.service")
        raise UnitNameError(
            f"{value!r} is a template, which systemd cannot start: name the instance, e.g. {prefix}@0.service"
        )
    return value


def template_instance(template: str, instance: str) -> str:
    """`sglang@.service`, `1` -> `sglang@1.service`: the instance a node runs (`%i` in the file)."""
    return check_service_name(template.removesuffix("@.service") + f"@{instance}.service")
