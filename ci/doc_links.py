#!/usr/bin/env python3
"""Checks the relative links of the repository's Markdown files: every link
target exists, and every #anchor names a heading of its target (GitHub's
slugs). External links (http, mailto) are not followed. Prints each broken
link as FILE:LINE: target (reason) and exits 1 if there is one, else 0.
Usage: ci/doc_links.py [FILE.md ...]   (default: every tracked *.md)"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def slug(text):
    """GitHub's anchor of a heading: lower case, markup and punctuation
    dropped (hyphens and underscores kept), spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)   # a link's text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out, fence = {}, set(), False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("```"):
                    fence = not fence
                m = None if fence else HEADING.match(line)
                if m:
                    s = slug(m.group(2))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    out.add(s if n == 0 else f"{s}-{n}")
        cache[path] = out
    return cache[path]


def check(md):
    bad, fence = [], False
    with open(md, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                fence = not fence
            if fence:
                continue
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                if not os.path.exists(dest):
                    bad.append(f"{md}:{no}: {target} (no such file)")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    bad.append(f"{md}:{no}: {target} (no heading #{anchor})")
    return bad


def main():
    files = sys.argv[1:] or subprocess.run(
        ["git", "ls-files", "*.md"], capture_output=True, text=True, check=True).stdout.split()
    bad = [b for md in files for b in check(md)]
    print("\n".join(bad) if bad else f"{len(files)} Markdown files: every relative link resolves")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
