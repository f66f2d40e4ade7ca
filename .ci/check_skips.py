"""Fail when a pytest JUnit report has failures, errors, or more skips than the budget.

    python .ci/check_skips.py REPORT.xml BUDGET_FILE

BUDGET_FILE's first number is the most skips allowed; the rest of it documents why those
tests skip. The skip reasons of REPORT.xml are printed grouped, most frequent first.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def main(report: str, budget_file: str) -> int:
    match = re.search(r"^\s*(\d+)\s*$", Path(budget_file).read_text(), re.M)
    if match is None:
        print(f"{budget_file}: no line holding just the skip budget (a number)")
        return 2
    budget = int(match.group(1))
    cases = list(ET.parse(report).getroot().iter("testcase"))
    reasons: Counter[str] = Counter()
    failed = []
    for case in cases:
        name = f"{case.get('classname')}::{case.get('name')}"
        for child in case:
            if child.tag == "skipped":
                message = child.get("message", "")
                # group by reason with the paths and numbers taken out
                reasons[re.sub(r"(/[^\s:']+)+|\b\d+\b", "<...>", message)[:160]] += 1
            elif child.tag in ("failure", "error"):
                failed.append(name)
    skipped = sum(reasons.values())
    print(f"{len(cases)} tests: {len(failed)} failed, {skipped} skipped (budget {budget})")
    for reason, count in reasons.most_common():
        print(f"  {count:4}  {reason}")
    for name in failed:
        print(f"FAILED {name}")
    if failed:
        return 1
    if skipped > budget:
        print(f"more skips than the budget of {budget} in {budget_file}: a test lost its data")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
