"""A key's namespace glob as SQL can test it, so listings filter inside the query.

SQLite calls `fnmatchcase` itself (a registered function); PostgreSQL gets
the glob as a regular expression, translated here the way `fnmatch` reads
a glob, every literal written as an escape so that no character of a name
can mean anything else to the regex engine.
"""

from __future__ import annotations


def glob_regex(pattern: str) -> str | None:
    """`fnmatchcase(name, pattern)` as a POSIX regular expression (PostgreSQL's `~`), every
    literal written as a `\\u` escape; None for a pattern that matches nothing. Classes
    follow `fnmatch.translate` (ranges, `!` negation, empty ranges dropped)."""
    out = ["^"]
    i, n = 0, len(pattern)
    while i < n:
        c, i = pattern[i], i + 1
        if c == "*":
            if out[-1] != ".*":
                out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(_literal("["))
                continue
            bracket = _bracket(pattern, i, j)
            if bracket is None:
                return None
            out.append(bracket)
            i = j + 1
        else:
            out.append(_literal(c))
    return "".join(out) + "$"


def _literal(c: str) -> str:
    return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"


def _bracket(pattern: str, i: int, j: int) -> str | None:
    """The class `pattern[i:j]` (between its brackets), as `fnmatch.translate` reads it."""
    stuff = pattern[i:j]
    chunks = [stuff]
    if "-" in stuff:
        chunks = []
        k = i + 2 if pattern[i] == "!" else i + 1
        while (k := pattern.find("-", k, j)) >= 0:
            chunks.append(pattern[i:k])
            i, k = k + 1, k + 3
        if pattern[i:j]:
            chunks.append(pattern[i:j])
        else:
            chunks[-1] += "-"
        for k in range(len(chunks) - 1, 0, -1):  # empty ranges are dropped
            if chunks[k - 1][-1] > chunks[k][0]:
                chunks[k - 1] = chunks[k - 1][:-1] + chunks[k][1:]
                del chunks[k]
    joined = "-".join(chunks)
    if not joined:
        return None
    if joined == "!":
        return "."
    negated = joined.startswith("!")
    if negated:
        chunks[0] = chunks[0][1:]
    items: list[str] = []
    for index, chunk in enumerate(chunks):
        # a chunk's last character and the next chunk's first bound a range
        first = 1 if index > 0 else 0
        last = len(chunk) - 1 if index < len(chunks) - 1 else len(chunk)
        items += (_literal(ch) for ch in chunk[first:last])
        if index < len(chunks) - 1:
            items.append(f"{_literal(chunk[-1])}-{_literal(chunks[index + 1][0])}")
    return "[" + ("^" if negated else "") + "".join(items) + "]"
