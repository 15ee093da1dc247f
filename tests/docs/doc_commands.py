#!/usr/bin/python3
"""The commands of the docs, run or checked: every fenced ```sh block of the Markdown files given.

usage: /usr/bin/python3 tests/docs/doc_commands.py --realpos BIN --scratch DIR [--timeout S] FILE.md...

Run from the repository root. Each ```sh block must follow, on the line right before its fence, a
marker (docs/README.md, "Commands in the docs"):
    <!-- doc-test: run -->                  run in CI: the blocks of one file run in order, each
                                            with `bash -e -o pipefail`, in one scratch directory
                                            per file holding links to realpos, configs/, scripts/
                                            and tests/, each under a time cap
    <!-- doc-test: check-only (REASON) -->  not run (REASON says why: hours, a cluster, data);
                                            its command lines are checked instead
A block without a marker, a marker without a block, a check-only marker without a reason and a
```bash / ```shell / ```console fence (which would slip past) each print a FAIL line.

Checked in a check-only block, per command of each line (continuations joined, comments dropped,
split at ; && || |, redirections dropped, [ ] | of usage notation read as alternatives):
  - `realpos SUB ...` (any path ending in realpos, also after mpirun, srun, time): SUB exists
    (`realpos SUB --help` exits 0), every --flag appears in that help, every `--set KEY=VALUE`
    KEY is a key of `realpos config configs/bert-base.ini` (which lists every key), and, when
    the command names a config file of the repository and no value is a placeholder (upper case
    such as L or LR, or `...`), `realpos config CONFIG [--for JOB] --set ...` accepts the
    overrides as the job's launch would;
  - `scripts/*.py` run with python: every --flag is one of its argparse options (`--help`);
  - `make TARGET...`: every target is a rule of the Makefile;
  - every argument naming a path under configs/, scripts/ or tests/ exists.
Prints PASS/FAIL lines (tests/run.sh) and exits 1 on any FAIL.
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys

MARK = re.compile(r"^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^\s*```\s*([A-Za-z0-9_+-]*)\s*$")
SHELL_FENCES = {"bash", "shell", "console", "zsh", "shell-session"}
# Jobs whose launch `realpos config --for JOB` reproduces; the other commands load without one.
JOB_OF = {"pretrain": "pretrain", "finetune": "finetune"}
CONFIG_COMMANDS = {"config", "prepare", "pretrain", "eval", "finetune", "predict", "init", "bench"}
PATH_PREFIXES = ("configs/", "scripts/", "tests/")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def blocks_of(path):
    """[(line of the fence, marker text or None, fence language, body lines)] and stray problems."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, problems, i = [], [], 0
    pending_marker = None  # (line number, text) of a marker waiting for its block
    while i < len(lines):
        m = MARK.match(lines[i])
        if m:
            if pending_marker:
                problems.append((pending_marker[0], "a doc-test marker not right before a ```sh block"))
            pending_marker = (i + 1, m.group(1))
            i += 1
            continue
        f = FENCE.match(lines[i])
        if f:
            lang, start = f.group(1), i + 1
            body = []
            i += 1
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i])
                i += 1
            marker = pending_marker[1] if pending_marker and pending_marker[0] == start - 1 else None
            if pending_marker and marker is None:
                problems.append((pending_marker[0], "a doc-test marker not right before a ```sh block"))
            if lang == "sh" or lang in SHELL_FENCES:
                blocks.append((start, marker, lang, body))
            elif marker is not None:
                problems.append((start - 1, "a doc-test marker before a ```%s block (only ```sh blocks are tested)" % lang))
            pending_marker = None
            i += 1
            continue
        if lines[i].strip() and pending_marker:
            problems.append((pending_marker[0], "a doc-test marker not right before a ```sh block"))
            pending_marker = None
        i += 1
    if pending_marker:
        problems.append((pending_marker[0], "a doc-test marker not right before a ```sh block"))
    return blocks, problems


def command_lines(body):
    """The block's logical lines: continuations joined, usage brackets' | read as a space."""
    logical, cur = [], ""
    for line in body:
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        logical.append(cur + line)
        cur = ""
    if cur:
        logical.append(cur)
    out = []
    for line in logical:
        prev = None
        while prev != line:  # usage notation: [--a X | --b] and (x | y) alternatives
            prev = line
            line = re.sub(r"\[([^\[\]]*?)\s\|\s", r"[\1 ", line)
            line = re.sub(r"\(([^()]*?)\s\|\s", r"(\1 ", line)
        out.append(line)
    return out


def commands_of(line):
    """The simple commands of one shell line, as token lists (comments and redirections dropped)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        tokens = list(lex)
    except ValueError as e:  # unbalanced quotes
        raise ValueError("cannot split '%s': %s" % (line.strip(), e))
    cmds, cur, skip_next = [], [], False
    for t in tokens:
        if skip_next:
            skip_next = False
            continue
        if t in (";", "&&", "||", "|", "&", ";;"):
            cmds.append(cur)
            cur = []
        elif re.fullmatch(r"[0-9]?(<|>|>>|<<|<<<|>&)", t):
            skip_next = True
        elif t in ("do", "then", "else", "{", "}") and not cur:
            continue
        else:
            cur.append(t)
    cmds.append(cur)
    return [c for c in cmds if c]


def clean(token):
    """A token without the brackets and ellipses of usage notation."""
    return token.strip("[](){}").rstrip(".").rstrip("]") if token not in ("...",) else ""


class Checker:
    def __init__(self, realpos, scratch):
        self.realpos, self.scratch = realpos, scratch
        self.help = {}    # realpos subcommand -> set of options, or None when it does not exist
        self.script_options = {}
        self.keys = None
        self.make_targets = None

    def realpos_help(self, sub):
        if sub not in self.help:
            r = subprocess.run([self.realpos, sub, "--help"], capture_output=True, text=True)
            self.help[sub] = set(OPTION.findall(r.stdout)) if r.returncode == 0 else None
        return self.help[sub]

    def config_keys(self):
        if self.keys is None:
            r = subprocess.run([self.realpos, "config", "configs/bert-base.ini"], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError("realpos config configs/bert-base.ini failed: " + r.stderr.strip())
            section, self.keys = None, set()
            for line in r.stdout.splitlines():
                if line.startswith("["):
                    section = line.strip("[] ")
                elif "=" in line and not line.startswith(";"):
                    self.keys.add(section + "." + line.split("=")[0].strip())
        return self.keys

    def python_options(self, script):
        if script not in self.script_options:
            src = open(script, encoding="utf-8").read()
            if "argparse" not in src:
                self.script_options[script] = None
            else:
                r = subprocess.run(["/usr/bin/python3", script, "--help"], capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError("%s --help exited %d: %s" % (script, r.returncode, r.stderr.strip()[-300:]))
                self.script_options[script] = set(OPTION.findall(r.stdout))
        return self.script_options[script]

    def check_paths(self, tokens, errors):
        for t in tokens:
            t = clean(t)
            if t.startswith(PATH_PREFIXES) and not re.search(r"[A-Z]{2,}|\$", t):
                if not glob.glob(t) and not os.path.exists(t.rstrip("/")):
                    errors.append("no such file: %s" % t)

    def check_realpos(self, args, errors):
        if not args:
            errors.append("realpos without a command")
            return
        sub = args[0]
        if sub in ("--version", "--help"):
            return
        options = self.realpos_help(sub)
        if options is None:
            errors.append("realpos %s: no such command (`realpos %s --help` fails)" % (sub, sub))
            return
        sets, placeholder, config = [], False, None
        i = 1
        while i < len(args):
            t = clean(args[i])
            if t.startswith("--"):
                name = t.split("=")[0]
                if name not in options:
                    errors.append("realpos %s: option %s is not in `realpos %s --help`" % (sub, name, sub))
                if name in ("--set", "--against-set") and "=" not in t and i + 1 < len(args):
                    value = clean(args[i + 1])
                    i += 1
                    if value in ("", "section.key=value", "KEY=VALUE") or "=" not in value:
                        placeholder = True
                    else:
                        key, val = value.split("=", 1)
                        if key not in self.config_keys():
                            errors.append("realpos %s: --set %s: no such key (`realpos config` lists every key)" % (sub, key))
                        if name == "--set":
                            sets.append(value)
                        if re.fullmatch(r"[A-Z][A-Z0-9_]*", val) or "..." in val:
                            placeholder = True
            elif config is None and sub in CONFIG_COMMANDS and t.endswith(".ini"):
                config = t
            i += 1
        if config and not placeholder and os.path.isfile(config) and not errors:
            cmd = [self.realpos, "config", config]
            if sub in JOB_OF:
                cmd += ["--for", JOB_OF[sub]]
            for s in sets:
                cmd += ["--set", s]
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=None)
            if r.returncode != 0:
                errors.append("`%s` fails: %s" % (" ".join(cmd[1:]), r.stderr.strip()[-400:]))

    def check_make(self, args, errors):
        if self.make_targets is None:
            text = open("Makefile", encoding="utf-8").read()
            self.make_targets = set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M))
        for a in args:
            if not a.startswith("-") and "=" not in a and a not in self.make_targets:
                errors.append("make %s: no such target in the Makefile" % a)

    def check_python(self, script, args, errors):
        try:
            options = self.python_options(script)
        except RuntimeError as e:
            errors.append(str(e))
            return
        if options is None:
            return
        for a in args:
            t = clean(a)
            if t.startswith("--") and t.split("=")[0] not in options:
                errors.append("%s: option %s is not in its --help" % (script, t.split("=")[0]))

    def check_block(self, body):
        errors = []
        for line in command_lines(body):
            try:
                cmds = commands_of(line)
            except ValueError as e:
                errors.append(str(e))
                continue
            for cmd in cmds:
                self.check_paths(cmd, errors)
                if cmd[0] == "make":
                    self.check_make(cmd[1:], errors)
                for j, t in enumerate(cmd):
                    if os.path.basename(t) == "realpos":
                        self.check_realpos(cmd[j + 1:], errors)
                        break
                    if t.startswith("scripts/") and t.endswith(".py") and os.path.isfile(t):
                        self.check_python(t, cmd[j + 1:], errors)
                        break
        return errors


def run_blocks(path, blocks, realpos, scratch, timeout):
    """Run the file's runnable blocks in order in one scratch directory; a PASS/FAIL line each."""
    root = os.getcwd()
    work = os.path.join(scratch, re.sub(r"[^A-Za-z0-9]+", "_", path))
    os.makedirs(work, exist_ok=True)
    os.symlink(os.path.abspath(realpos), os.path.join(work, "realpos"))
    for d in ("configs", "scripts", "tests"):
        os.symlink(os.path.join(root, d), os.path.join(work, d))
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(scratch, "cache"))
    failed = False
    for start, _, _, body in blocks:
        name = "%s:%d (run)" % (path, start)
        if failed:
            print("FAIL %s: not run, an earlier block of the file failed" % name)
            continue
        script = "set -e -o pipefail\n" + "\n".join(body) + "\n"
        try:
            r = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                               timeout=timeout)
            ok, why = r.returncode == 0, "exit status %d" % r.returncode
            out = (r.stdout + r.stderr).strip()
        except subprocess.TimeoutExpired:
            ok, why, out = False, "still running after %d s" % timeout, ""
        if ok:
            print("PASS " + name)
        else:
            failed = True
            tail = " | ".join(out.splitlines()[-4:])
            print("FAIL %s: %s: %s" % (name, why, tail[-600:]))
    return not failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--realpos", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--timeout", type=int, default=900, help="seconds a runnable block may take (default 900)")
    a = ap.parse_args()
    checker, any_fail = Checker(a.realpos, a.scratch), False

    def verdict(name, errors):
        nonlocal any_fail
        if errors:
            any_fail = True
            print("FAIL %s: %s" % (name, "; ".join(errors)))
        else:
            print("PASS " + name)

    for path in a.files:
        blocks, problems = blocks_of(path)
        for line, why in problems:
            verdict("%s:%d (marker)" % (path, line), [why])
        runnable = []
        for start, marker, lang, body in blocks:
            name = "%s:%d" % (path, start)
            if lang != "sh":
                verdict(name + " (fence)", ["a ```%s block: write ```sh and mark it (docs/README.md)" % lang])
            elif marker is None:
                verdict(name + " (unmarked)", ["a ```sh block without a doc-test marker on the line before it "
                                               "(<!-- doc-test: run --> or <!-- doc-test: check-only (why) -->, docs/README.md)"])
            elif marker == "run":
                runnable.append((start, marker, lang, body))
            elif re.fullmatch(r"check-only \(.*\S.*\)", marker):
                verdict(name + " (check-only)", checker.check_block(body))
            else:
                verdict(name + " (marker)", ["unknown marker '%s': expected 'run' or 'check-only (why)'" % marker])
        sys.stdout.flush()
        if runnable and not run_blocks(path, runnable, a.realpos, a.scratch, a.timeout):
            any_fail = True
        sys.stdout.flush()
    return 1 if any_fail else 0


if __name__ == "__main__":
    sys.exit(main())
