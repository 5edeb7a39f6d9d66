"""The bounds on what a report file may hold. Reading any file, however
crafted (huge, compressed a thousandfold, nested without end), stays
within them in time and memory and answers with a ReportError that names
the bound; docs/report-format.md lists them.

Each is far above what a run with the default max_spans=1,000,000 writes
(48 bytes a span before compression, 48 MB of spans at most) and is read
at call time, so a program that must read larger files may raise one:
``aquaprof.limits.MAX_FILE_BYTES = 4 << 30``.
"""
from .. import _core

#: most bytes a report file (or a report stored in a History) may have
MAX_FILE_BYTES = 1 << 30
#: most bytes one encoded array (spans, GPU events) may inflate to:
#: 22 million spans or 12 million GPU events
MAX_ARRAY_BYTES = 1 << 30
#: most JSON containers and separators (each '[', '{' and ',') a file
#: may hold; parsing costs at most about 100 bytes of memory each
MAX_JSON_ITEMS = 16 << 20
#: deepest stage nesting a report may hold (a top-level stage has depth
#: 0): four times what Python's default recursion limit lets a recursive
#: staged function reach, and where a run folds deeper entries (into
#: "(over max depth)"), so that no run writes a file this refuses
MAX_DEPTH = _core.MAX_DEPTH
#: most characters of all stage paths ("outer/inner") together: paths
#: grow with depth, so a deep chain of long names costs this, not more
MAX_PATH_CHARS = 1 << 27
