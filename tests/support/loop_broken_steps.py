"""A steps module whose own import fails: `ensure_builtin_actions` must not hide that."""

import no_such_dependency  # type: ignore[import-not-found]  # noqa: F401
