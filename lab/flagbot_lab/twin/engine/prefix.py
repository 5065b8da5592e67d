"""The twin's prefix cache: a radix tree over prompt keys, bounded by the KV pool, LRU eviction.

Modelled on SGLang 0.5.10 `mem_cache/radix_cache.py` (`RadixCache.match_prefix`, `insert`,
`_split_node`, `evict`, `inc_lock_ref` / `dec_lock_ref`): a tree whose edges hold runs of
tokens; a request locks the path of its prompt while it runs (locked nodes are never evicted);
when the pool runs short, unlocked leaves go first, least recently used first, and a parent
whose last child went becomes a leaf in turn.

The twin has no tokenizer (`tokens.py`), so a prompt's *key* is a string standing in for its
tokens, built so that equal token prefixes are equal string prefixes and every tree edge is a
whole number of tokens:

* text: a 4-character marker, then the text padded with spaces to a multiple of 4; one unit is
  four characters, the same four characters per token that `count_text_tokens` assumes.
* chat: the same, with each message's role and content each padded to whole units, so a shared
  system message is a shared prefix.
* token ids: a 1-character marker, then one character per id; one unit is one character.

The marker is the first unit, so a text and an id prompt never share a prefix; it counts as
the prompt's first token (a BOS, as real prompts have). Comparing keys is string slicing in C,
so matching a 4000-token prompt is a handful of slice comparisons, not a Python loop per token.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Node", "PrefixCache", "PrefixMatch", "chat_key", "ids_key", "key_tokens", "text_key"]

TEXT_UNIT = 4
"""Characters per token in a text key (`tokens.count_text_tokens`: about four per token)."""
_TEXT_MARK = "\x00txt"
_IDS_MARK = "\x01"
_MAX_CHAR = 0x110000


def _pad(text: str) -> str:
    return text + " " * (-len(text) % TEXT_UNIT)


def text_key(text: str) -> str:
    return _TEXT_MARK + _pad(text)


def chat_key(parts: Sequence[tuple[str, str]]) -> str:
    """(role, content) pairs; the role takes one unit, so roles never shift content alignment."""
    return _TEXT_MARK + "".join(f"{role[:TEXT_UNIT]:<{TEXT_UNIT}}{_pad(content)}" for role, content in parts)


def ids_key(ids: Sequence[int]) -> str:
    return _IDS_MARK + "".join(chr(i % _MAX_CHAR) for i in ids)


def _unit(key: str) -> int:
    return TEXT_UNIT if key.startswith(_TEXT_MARK[0]) else 1


def key_tokens(key: str) -> int:
    """How many tokens a key stands for (its marker included)."""
    return len(key) // _unit(key)


def _common(a: str, b: str, start: int) -> int:
    """Length of the common prefix of `a` and `b[start:]` (binary search on C-speed slices)."""
    n = min(len(a), len(b) - start)
    if a[:n] == b[start : start + n]:
        return n
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[start : start + mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class Node:
    __slots__ = ("children", "key", "last_access", "lock", "parent", "tokens", "unit")

    def __init__(self, key: str, parent: Node | None, unit: int) -> None:
        self.key = key
        self.unit = unit
        self.parent = parent
        self.tokens = len(key) // unit
        self.children: dict[str, Node] = {}
        self.lock = 0
        self.last_access = 0.0


@dataclass(frozen=True)
class PrefixMatch:
    """A lookup's outcome: how many of the key's tokens the tree holds (marker included)."""

    tokens: int


class PrefixCache:
    """The tree; sizes are in tokens. The scheduler decides when to evict and by how much."""

    def __init__(self) -> None:
        self.root = Node("", None, 1)
        self.root.lock = 1  # the root is never evicted
        self.total_tokens = 0
        self.evictable_tokens = 0
        self._tick = itertools.count()

    def match(self, key: str) -> PrefixMatch:
        """The longest cached prefix of `key`, in whole tokens (SGLang `match_prefix`)."""
        return PrefixMatch(self._walk(key, None)[1])

    def _walk(self, key: str, now: float | None) -> tuple[Node, int, int]:
        """(deepest fully matched node, matched tokens, matched chars); touches the path if `now`."""
        unit = _unit(key)
        node, pos, tokens = self.root, 0, 0
        while pos < len(key):
            child = node.children.get(key[pos : pos + unit])
            if child is None:
                break
            common = _common(child.key, key, pos)
            common -= common % unit
            if common < len(child.key):
                return node, tokens + common // unit, pos + common
            if now is not None:
                child.last_access = now
            node, pos, tokens = child, pos + common, tokens + child.tokens
        return node, tokens, pos

    def insert(self, key: str, now: float) -> tuple[Node, int]:
        """Add `key`, splitting an edge where it diverges; (its last node, tokens added)."""
        unit = _unit(key)
        node, pos = self.root, 0
        while pos < len(key):
            head = key[pos : pos + unit]
            child = node.children.get(head)
            if child is None:
                rest = key[pos:]
                leaf = Node(rest, node, unit)
                leaf.last_access = now
                node.children[head] = leaf
                self.total_tokens += leaf.tokens
                self.evictable_tokens += leaf.tokens
                return leaf, leaf.tokens
            common = _common(child.key, key, pos)
            common -= common % unit
            if common < len(child.key):
                child = self._split(child, common, unit)
            child.last_access = now
            node, pos = child, pos + common
        return node, 0

    def _split(self, child: Node, at: int, unit: int) -> Node:
        """Cut `child`'s edge after `at` characters; the new upper node inherits its locks."""
        parent = child.parent
        assert parent is not None
        upper = Node(child.key[:at], parent, unit)
        upper.lock = child.lock
        upper.last_access = child.last_access
        parent.children[child.key[:unit]] = upper
        child.key = child.key[at:]
        child.tokens -= upper.tokens
        child.parent = upper
        upper.children[child.key[:unit]] = child
        return upper

    def lock(self, node: Node) -> None:
        """A running request holds this path: no node on it can be evicted."""
        while node.parent is not None:
            if node.lock == 0:
                self.evictable_tokens -= node.tokens
            node.lock += 1
            node = node.parent

    def unlock(self, node: Node) -> None:
        while node.parent is not None:
            node.lock -= 1
            if node.lock == 0:
                self.evictable_tokens += node.tokens
            node = node.parent

    def evict(self, tokens: int) -> int:
        """Free at least `tokens` from unlocked leaves, least recently used first; freed count."""
        leaves = [(n.last_access, next(self._tick), n) for n in self._leaves() if n.lock == 0]
        heapq.heapify(leaves)
        freed = 0
        while leaves and freed < tokens:
            _, _, leaf = heapq.heappop(leaves)
            parent = leaf.parent
            assert parent is not None
            del parent.children[leaf.key[: leaf.unit]]
            freed += leaf.tokens
            self.total_tokens -= leaf.tokens
            self.evictable_tokens -= leaf.tokens
            if parent.parent is not None and not parent.children and parent.lock == 0:
                heapq.heappush(leaves, (parent.last_access, next(self._tick), parent))
        return freed

    def reset(self) -> None:
        """`/flush_cache`: drop everything (only called with nothing running)."""
        self.root.children.clear()
        self.total_tokens = self.evictable_tokens = 0

    def _leaves(self) -> list[Node]:
        out: list[Node] = []
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            else:
                out.append(node)
        return out
