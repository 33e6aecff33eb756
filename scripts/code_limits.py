#!/usr/bin/env python3
"""code_limits.py - the size limits of the project's own code (STYLE.md: a
file is a concept, a function reads at a glance).

In agent/, collector/, cli/, tui/, rules/, common/ and export/ (tests/, bench/ and
fsdp_ref/ are outside the limits):
  * no .c or .h file is over 1,000 lines;
  * no function is over 150 lines, counted from its signature's first line
    to its closing '}' in column 0.
A function's signature starts at a line in column 0 that is not a
preprocessor line, a comment, a declaration ending in ';' or a type
definition, and whose text up to the body holds a '('. Prints each excess
and exits 1 when there is one; 0 otherwise.

usage: code_limits.py [ROOT]
"""
import os
import re
import sys

FOLDERS = ("agent", "collector", "cli", "tui", "rules", "common", "export")
FILE_MAX = 1000
FUNCTION_MAX = 150
NOT_START = re.compile(r"^(#|/\*|\*|//|typedef\b|struct \w+ \{|enum\b|union\b|extern\b|\}|\{|$)")


def functions(lines):
    """(first line, last line, signature) of each function: from a signature
    in column 0 to the '}' in column 0 that closes the body opened after it."""
    start, body = None, False
    for i, line in enumerate(lines):
        if body:
            if line.startswith("}"):
                yield start, i, lines[start]
                start, body = None, False
            continue
        if start is None:
            if not NOT_START.match(line) and not line.startswith((" ", "\t")) and "(" in line \
                    and not line.rstrip().endswith(";") and "=" not in line.split("(")[0]:
                start = i
                body = line.rstrip().endswith("{")
            continue
        if line.startswith("{"):
            body = True
        elif line.rstrip().endswith(";") or not line.strip():
            start = None  # a prototype over several lines, or not a function
        elif line.rstrip().endswith("{") and line.startswith(("\t", " ")):
            body = True  # the signature's last line opens the body


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    excess = []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().split("\n")
                if lines and lines[-1] == "":
                    lines.pop()
                if len(lines) > FILE_MAX:
                    excess.append(f"{rel}: {len(lines)} lines (at most {FILE_MAX})")
                for first, last, sig in functions(lines):
                    n = last - first + 1
                    if n > FUNCTION_MAX:
                        excess.append(f"{rel}:{first + 1}: a function of {n} lines (at most {FUNCTION_MAX}): "
                                      f"{sig.strip()[:70]}")
    for e in excess:
        print(e)
    print(f"code_limits: {len(excess)} over the limits")
    return 1 if excess else 0


if __name__ == "__main__":
    sys.exit(main())
