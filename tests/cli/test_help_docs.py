#!/usr/bin/env python3
"""Help and docs cannot drift apart: every subcommand of `parity` answers -h
(exit 0, its usage on stdout, nothing on stderr); every flag of a `parity CMD`
command written in docs/*.md (code spans and code blocks) is in CMD's --help;
and every flag of CMD's --help is named in docs/*.md, on CMD's own page where
it has one. Not a check of what the flags do (the other cli tests).
Usage: test_help_docs.py PATH/TO/parity SOURCE_DIR"""
import glob
import os
import re
import subprocess
import sys

PARITY, ROOT = sys.argv[1], sys.argv[2]
SUBS = ["train", "data", "model", "check", "bisect", "verify", "lockstep", "table keygen",
        "table sign", "table verify", "version"]
# The page of a subcommand, where its every flag is named.
PAGE = {"train": "train.md", "check": "check.md", "bisect": "bisect.md", "verify": "verify.md",
        "table keygen": "table.md", "table sign": "table.md", "table verify": "table.md",
        "data": "data.md"}
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
passed = failed = 0


def check(name, ok, why=""):
    global passed, failed
    print(f"{name} ... {'ok' if ok else 'FAIL' + (': ' + why if why else '')}")
    passed += ok
    failed += not ok


# Every subcommand's -h: its flags are the lines "  --flag ..." of the usage.
helpflags = {}
for sub in SUBS:
    r = subprocess.run([PARITY] + sub.split() + ["-h"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    check(f"parity {sub} -h: exit 0, usage on stdout, stderr empty",
          r.returncode == 0 and r.stdout.startswith("usage: ") and not r.stderr,
          f"exit {r.returncode}, stderr {r.stderr[:200]!r}")
    helpflags[sub] = set(re.findall(r"^  (--[a-z0-9-]+)", r.stdout, re.M)) - {"--help"}
    check(f"parity {sub} -h lists --help", "--help" in r.stdout)


def commands(text):
    """The `parity ...` commands of a page: code block lines (continuations
    joined) and code spans, each cut at && ; | and a # comment."""
    found = []
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    lines = [ln for b in blocks for ln in re.sub(r"\\\n\s*", " ", b).split("\n")]
    body = re.sub(r"```.*?```", "", text, flags=re.S).replace("\n", " ")
    for piece in lines + re.findall(r"`([^`]+)`", body):
        for part in re.split(r"&&|\|\||[;|]", piece.split(" #")[0]):
            m = re.search(r"(?:^|\s|\()parity\s+(\S+)(?:\s+(\S+))?(.*)", part)
            if not m:
                continue
            sub = m.group(1)
            rest = (m.group(2) or "") + m.group(3)
            if sub == "table" and m.group(2):
                sub, rest = "table " + m.group(2), m.group(3)
            if sub in helpflags:
                # a quoted word is a value (--external 'torchrun --nproc ...'), but
                # bisect's quoted A and B are parity train flags
                if sub != "bisect":
                    rest = re.sub(r"'[^']*'|\"[^\"]*\"", "", rest)
                found.append((sub, rest))
    return found


pages = {os.path.basename(f): open(f).read() for f in sorted(glob.glob(ROOT + "/docs/*.md"))}
check("docs/*.md found", len(pages) > 5, ROOT)
n_cmds = 0
for name, text in pages.items():
    for sub, rest in commands(text):
        n_cmds += 1
        for flag in FLAG.findall(rest):
            if flag != "--help" and flag not in helpflags[sub]:
                check(f"docs/{name}: parity {sub} {flag} is in its --help", False,
                      f"not in 'parity {sub} --help' ({rest.strip()[:80]})")
check(f"every flag of the {n_cmds} parity commands in docs/*.md is in its --help", n_cmds > 100)

alldocs = "\n".join(pages.values())
for sub in SUBS:
    where = PAGE.get(sub)
    text = pages.get(where, "") if where else alldocs
    missing = sorted(f for f in helpflags[sub] if not re.search(re.escape(f) + r"(?![\w-])", text))
    check(f"every flag of parity {sub} --help is named in docs/{where or '*.md'}", not missing,
          " ".join(missing))

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
