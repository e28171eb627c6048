"""Reading a study file without trusting it: what may be read, how big, how deep.

* Only a regular file is read (a FIFO would block forever, ``/dev/zero``
  never ends, a directory is not a study), and at most
  :data:`MAX_STUDY_BYTES` of it.  The file is opened non-blocking and checked
  with ``fstat`` on the open descriptor, so nothing can be swapped in between.
* A UTF-8 byte-order mark at the start is accepted (and dropped).
* TOML nested deeper than :data:`MAX_DEPTH` arrays/tables is refused: a
  study needs a handful of levels, and Python's recursion (in the TOML
  parser, pydantic and copies) must never see a 100,000-deep array.

Every problem is a one-line :class:`~ccbench.errors.StudyError`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from ccbench.errors import StudyError

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

MAX_STUDY_BYTES = 1 << 20  # 1 MiB: the largest ready study is about 10 KB
MAX_DEPTH = 32  # nested arrays/tables; the deepest ready study uses 6
BOM = "\ufeff"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_study_bytes(path: Path, shown: str) -> bytes:
    """The bytes of a study file: a regular file of at most MAX_STUDY_BYTES."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise StudyError(f"{shown}: study file not found") from None
    except OSError as e:
        raise StudyError(f"{shown}: cannot read the study file: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise StudyError(f"{shown}: is {_kind(st.st_mode)}, not a study file (a regular .toml file)")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise StudyError(f"{shown}: cannot read the study file: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)  # what was opened, not what the name pointed at before
        if not stat.S_ISREG(st.st_mode):
            raise StudyError(f"{shown}: is {_kind(st.st_mode)}, not a study file (a regular .toml file)")
        if st.st_size > MAX_STUDY_BYTES:
            raise StudyError(f"{shown}: the study file is {st.st_size:,} bytes; a study file is at most "
                             f"{MAX_STUDY_BYTES:,} bytes")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_STUDY_BYTES:  # grew while being read
                raise StudyError(f"{shown}: the study file is larger than {MAX_STUDY_BYTES:,} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise StudyError(f"{shown}: cannot read the study file: {e.strerror or e}") from None
    finally:
        os.close(fd)


def strip_bom(text: str) -> str:
    return text[1:] if text.startswith(BOM) else text


def loads(text: str, filename: str) -> dict:
    """tomllib.loads, but too deep or too big numbers are one-line StudyErrors
    (TOMLDecodeError is left to the caller, which words it).  The parser
    recurses per level: a very deep document stops it with RecursionError
    long before memory matters."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except RecursionError:
        raise StudyError(f"{filename}: arrays or tables nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise StudyError(f"{filename}: a value cannot be read: {str(e).splitlines()[0]}") from None
    check_depth(doc, filename)
    return doc


def check_depth(doc: Any, filename: str) -> None:
    """Refuse documents nested deeper than MAX_DEPTH (iteratively: no recursion)."""
    stack = [(doc, 0)]
    while stack:
        node, d = stack.pop()
        if d > MAX_DEPTH:
            raise StudyError(f"{filename}: arrays or tables nested too deeply (at most {MAX_DEPTH} levels)")
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node)
