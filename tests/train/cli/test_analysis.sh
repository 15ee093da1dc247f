#!/usr/bin/env bash
# scripts/analyze_attention.py on hand-made attention maps and `realpos attention` against the
# PyTorch reference (the checks are in tests/train/cli/test_analysis.py).
set -u
cd "$(dirname "$0")/../../.."
work=$(mktemp -d /tmp/realpos-analysis.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
/usr/bin/python3 tests/train/cli/test_analysis.py "$work" "$PWD/realpos"
