#!/usr/bin/env python3
"""Checks that the wings of realpos depend one way: no file includes a header of a higher wing.

Reads every `#include "..."` line of the C sources and headers under core/, layers/, optim/ and
train/ (root-relative paths, as the Makefile's -I. gives them). Wings and their ranks:

    core  <  layers, optim, core/io  <  core/config  <  train/config  <  train/data, train/model
          <  train/tasks  <  train/loop  <  train/cli

A file may include headers of its own wing and of wings of a lower rank; wings of the same rank
(layers, optim and core/io; train/data and train/model) may not include each other, so the layers
and the optimizer never see a file format. The wings of core (core: what layers and optim need;
core/io: file formats and file safety; core/config: the typed INI engine and CLI parsing) know no
model: they include no header outside core. tests/ may include anything and is not checked. A
source file in a folder that is no wing fails the check, so a new folder gets its place in WINGS
below. MPI is the business of optim/dist.c alone (the data-parallel communication under
optim/dp_adamw.h): any other file that includes <mpi.h> (or "mpi.h") fails, so core's error path
and everything else stay MPI-free.

No include circles either, in core/ or any wing: a file's module is its path without the extension
(X.c and X.h are module X; a .c that includes a header counts as its module's edge), and a circle
of modules (X.c includes Y.h and Y.c includes X.h; or longer: X -> Y -> Z -> X) fails, naming each
include line of the circle. A circle means two files that cannot be understood, tested or changed
one without the other; the fix is a third header below both, or one module. KNOWN_CIRCLES lists
the circles another change is removing; one that no longer occurs fails too, so the list only
shrinks.

In the wings of ONE_HEADER_WINGS each .c file has its own header: every function X.c defines
without `static` is declared in X.h (a helper is static; a header does not declare what another
file defines), so the include lines show who calls whom and a circle cannot hide behind a shared
header.

Prints one "PASS ..." or "FAIL ..." line per check (the format of tests/run.sh); with --graph
it prints the graph (wing -> wings it includes, with the number of include lines, then the
number of modules and include edges between modules and the circles) first;
--root DIR checks another tree (default: the repository holding this script).
Exit status 0 when every check passes.
"""
import os
import re
import sys

WINGS = {  # folder -> rank
    "core": 0,
    "core/io": 1,
    "layers": 1,
    "optim": 1,
    "core/config": 2,
    "train/config": 3,
    "train/data": 4,
    "train/model": 4,
    "train/tasks": 5,
    "train/loop": 6,
    "train/cli": 7,
}
CORE_WINGS = ("core", "core/io", "core/config")  # model-free: include no header outside them
# Wings where each .c exports only what its own header declares (the others still have headers
# shared by several files: layers/layers.h, train/cli/commands.h, train/model/model.h, ...).
ONE_HEADER_WINGS = ("core", "core/io", "core/config", "train/data")
DEFINITION = re.compile(r"^(?!static\b)(?!typedef\b)[A-Za-z_][\w \t*]*?\b(\w+)\s*\(([^;{}]*?)\)\s*\{",
                        re.M)
# Circles that another change removes (module paths in order, starting at the smallest); none
# now (issue 34's position-scheme interface removed main's two in layers/).
KNOWN_CIRCLES = set()
CHECKED_TOPS = ("core", "layers", "optim", "train")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
MPI_INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]mpi\.h[>"]')
MPI_FILES = ("optim/dist.c",)  # the files that may include mpi.h


def wing_of(path):
    """The wing of a root-relative path: its longest matching folder in WINGS, or None."""
    folder = os.path.dirname(path)
    while folder:
        if folder in WINGS:
            return folder
        folder = os.path.dirname(folder)
    return None


def module_of(path):
    """The module of a file: its path without the extension (core/arena.c, core/arena.h: core/arena)."""
    return os.path.splitext(path)[0]


def circles(edges):
    """Every simple circle of the module graph edges {module: {module: where}}, each as a list of
    modules starting at its smallest, each circle once."""
    found = []

    def walk(start, node, path):
        for nxt in sorted(edges.get(node, {})):
            if nxt == start:
                found.append(list(path))
            elif nxt > start and nxt not in path:
                walk(start, nxt, path + [nxt])

    for start in sorted(edges):
        walk(start, start, [start])
    return found


def unowned_functions(root, path):
    """(line, name) of each function path (a .c) defines without static that its header does not
    declare."""
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        text = f.read()
    header = os.path.splitext(path)[0] + ".h"
    declared = ""
    if os.path.isfile(os.path.join(root, header)):
        with open(os.path.join(root, header), encoding="utf-8", errors="replace") as f:
            declared = f.read()
    found = []
    for match in DEFINITION.finditer(text):
        name = match.group(1)
        if name in ("if", "for", "while", "switch", "main", "return", "sizeof"):
            continue
        if not re.search(r"\b%s\s*\(" % re.escape(name), declared):
            found.append((text.count("\n", 0, match.start()) + 1, name))
    return found


def sources(root):
    for top in CHECKED_TOPS:
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(directory, name), root)


def main():
    args = sys.argv[1:]
    default_root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    root = default_root
    if "--root" in args:
        root = os.path.abspath(args[args.index("--root") + 1])
    show_graph = "--graph" in args
    failures, graph, modules = [], {}, {}
    for path in sorted(sources(root)):
        wing = wing_of(path)
        if wing is None:
            failures.append(f"{path}: its folder is no wing (add it to WINGS in {sys.argv[0]})")
            continue
        if wing in ONE_HEADER_WINGS and path.endswith(".c"):
            header = os.path.splitext(path)[0] + ".h"
            for number, name in unowned_functions(root, path):
                failures.append(f"{path}:{number}: {name} is defined without static but not declared in "
                                f"{header}: make it static, or declare it there (one header per file)")
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                if MPI_INCLUDE.match(line) and path not in MPI_FILES:
                    failures.append(f"{path}:{number}: {line.strip()}: only {', '.join(MPI_FILES)} may "
                                    "talk to MPI (optim/dist.h wraps it)")
                    continue
                match = INCLUDE.match(line)
                if not match:
                    continue
                header = match.group(1)
                where = f"{path}:{number}: #include \"{header}\""
                if not os.path.isfile(os.path.join(root, header)):
                    failures.append(f"{where}: expected a root-relative path of a file in the "
                                    "repository")
                    continue
                target = wing_of(header)
                if target is None:
                    failures.append(f"{where}: expected a header of a wing, got one outside them")
                    continue
                if module_of(header) != module_of(path):
                    modules.setdefault(module_of(path), {}).setdefault(module_of(header), where)
                edges = graph.setdefault(wing, {})
                edges[target] = edges.get(target, 0) + 1
                if target != wing and WINGS[target] >= WINGS[wing]:
                    kind = "a higher" if WINGS[target] > WINGS[wing] else "a peer"
                    failures.append(f"{where}: {wing} (rank {WINGS[wing]}) includes {kind} wing "
                                    f"{target} (rank {WINGS[target]})")
                elif wing in CORE_WINGS and target not in CORE_WINGS:
                    failures.append(f"{where}: {wing} is a wing of core, which knows no model, but "
                                    f"includes {target}")
    found = circles(modules)
    known = []  # circles of KNOWN_CIRCLES found (only in this repository, not under --root)
    for circle in found:
        steps = " -> ".join(circle + circle[:1])
        lines = "; ".join(modules[a][b] for a, b in zip(circle, circle[1:] + circle[:1]))
        if tuple(circle) in KNOWN_CIRCLES and root == default_root:
            known.append(f"{steps} (KNOWN_CIRCLES: being removed)")
        else:
            failures.append(f"include circle {steps}: {lines}")
    for circle in sorted(KNOWN_CIRCLES):
        if root == default_root and list(circle) not in found:
            failures.append(f"KNOWN_CIRCLES lists {' -> '.join(circle + circle[:1])}, which no longer "
                            f"occurs: remove it from {sys.argv[0]}")
    if show_graph:
        for wing in sorted(WINGS, key=lambda w: (WINGS[w], w)):
            targets = sorted((t for t in graph.get(wing, {}) if t != wing),
                             key=lambda t: (-WINGS[t], t))
            listed = ", ".join(f"{t} ({graph[wing][t]})" for t in targets) or "-"
            print(f"  {wing:13} -> {listed}")
        names = set(modules) | {m for targets in modules.values() for m in targets}
        print(f"  {len(names)} modules, {sum(len(t) for t in modules.values())} include edges between "
              f"them, {len(found)} include circle{'' if len(found) == 1 else 's'}"
              f"{f' ({len(known)} known)' if known else ''}")
        for line in known:
            print(f"  known circle: {line}")
    for failure in failures:
        print(f"FAIL includes: {failure}")
    if not failures:
        print("PASS includes: no file includes a header of a higher or peer wing, no include circle"
              f"{f' but the {len(known)} of KNOWN_CIRCLES' if known else ''}, each .c of "
              f"{', '.join(ONE_HEADER_WINGS)} exports only what its own header declares, and only "
              "optim/dist.c includes mpi.h")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
