"""The order in which TVM's C++ walks a ``std::unordered_map<std::string, ...>``.

TVM's ``Executable::Stats`` lists the VM's globals by walking its ``global_map``, a
``std::unordered_map<std::string, Index>``, so the listing's order is the order of GCC's
``std::_Hashtable``, which TVM's Linux wheels are built with. That order follows from the keys'
hashes (``std::_Hash_bytes``, a 64-bit MurmurHash2 with seed ``0xc70f6907``), the bucket counts
(``_Prime_rehash_policy``) and the order of insertion. An executable loaded from a file
inserts its globals in index order (``Executable::LoadGlobalSection``), which is what this
module replays; the compiler fills the map of a freshly built executable in the order of a map
keyed by pointers, which no file records.

Checked against libstdc++ itself by ``tests/runtime/vm/test_map_order.py``.
"""

from __future__ import annotations

__all__ = ["unordered_map_order"]

_MASK = (1 << 64) - 1
_MUL = (0xC6A4A793 << 32) + 0x5BD1E995
_SEED = 0xC70F6907

# the bucket counts of a map grown one key at a time from empty (``_Prime_rehash_policy`` with
# its maximum load factor of 1: 13 buckets at the first key, then, once the keys would outnumber
# the buckets, the first prime of libstdc++'s list at or above twice the count); a map that
# would outgrow the last is given in index order (no VM has millions of functions)
_BUCKETS = (
    13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933, 351061,
    712697, 1447153, 2938679,
)  # fmt: skip


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def hash_bytes(data: bytes) -> int:
    """``std::hash<std::string>`` of libstdc++ on a 64-bit target (``_Hash_bytes``)."""
    n = len(data)
    h = (_SEED ^ (n * _MUL)) & _MASK
    aligned = n & ~7
    for i in range(0, aligned, 8):
        word = int.from_bytes(data[i : i + 8], "little")
        h ^= (_shift_mix((word * _MUL) & _MASK) * _MUL) & _MASK
        h = (h * _MUL) & _MASK
    if n & 7:
        h ^= int.from_bytes(data[aligned:], "little")
        h = (h * _MUL) & _MASK
    h = (_shift_mix(h) * _MUL) & _MASK
    return _shift_mix(h)


def unordered_map_order(keys: list[str]) -> list[int]:
    """The positions of ``keys`` (distinct, inserted in list order) as the map walks them."""
    if len(keys) > _BUCKETS[-1]:
        return list(range(len(keys)))
    table = _Table([hash_bytes(k.encode()) for k in keys])
    grown = 0
    for node in range(len(keys)):
        if node == 0 or node >= _BUCKETS[grown]:
            grown += node != 0
            table.rehash(_BUCKETS[grown])
        table.insert(node)
    return table.walk()


class _Table:
    """GCC's ``_Hashtable`` for unique keys: one singly linked list of nodes, where each
    bucket's nodes sit together and the bucket points at the node before its first."""

    _BEFORE_BEGIN = -1

    def __init__(self, hashes: list[int]) -> None:
        self.hashes = hashes
        self.next: dict[int, int] = {self._BEFORE_BEGIN: -2}  # -2 ends the list
        self.buckets: dict[int, int] = {}
        self.n_bkt = 1

    def insert(self, node: int) -> None:
        # _M_insert_bucket_begin: first in its bucket's run, or, in an empty bucket, first in
        # the whole list (and the bucket of the former first node now starts after this one)
        bkt = self.hashes[node] % self.n_bkt
        before = self.buckets.get(bkt)
        if before is not None:
            self.next[node] = self.next[before]
            self.next[before] = node
            return
        first = self.next[self._BEFORE_BEGIN]
        self.next[node] = first
        self.next[self._BEFORE_BEGIN] = node
        if first >= 0:
            self.buckets[self.hashes[first] % self.n_bkt] = node
        self.buckets[bkt] = self._BEFORE_BEGIN

    def rehash(self, n_bkt: int) -> None:
        # _M_rehash_aux: the old list's nodes, in order, inserted as above into new buckets
        nodes = self.walk()
        self.next = {self._BEFORE_BEGIN: -2}
        self.buckets = {}
        self.n_bkt = n_bkt
        for node in nodes:
            self.insert(node)

    def walk(self) -> list[int]:
        out = []
        node = self.next[self._BEFORE_BEGIN]
        while node >= 0:
            out.append(node)
            node = self.next[node]
        return out
