"""What the docs say of the official conformance suite (docs/reports/conformance.md) is what the pinned suite itself
lists.

The page counts the `tasks` extension's scenarios, which the suite runs but does not score; the count
is read here from `conformance list` of the same pinned suite `make conformance` runs (installed into
.cache/conformance on first use, by scripts/conformance.py).
"""

import importlib.util
import os
import re
import subprocess

from mcptest import ROOT

PAGE = os.path.join(ROOT, "docs", "reports", "conformance.md")


def suite():
    spec = importlib.util.spec_from_file_location("conformance_script", os.path.join(ROOT, "scripts", "conformance.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.install()


def test_the_conformance_page_counts_the_tasks_scenarios_the_suite_lists():
    node, entry = suite()
    done = subprocess.run([node, entry, "list", "--server", "--requirements", "2026-07-28"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    listed = re.findall(r"^\s+- (tasks-\S+) \[server\]$", done.stdout, re.MULTILINE)
    assert listed, done.stdout
    with open(PAGE, encoding="utf-8") as file:
        page = " ".join(file.read().split())
    claimed = re.search(r"the `tasks` extension's (\d+) scenarios", page)
    assert claimed is not None
    assert int(claimed.group(1)) == len(listed), listed
    script = importlib.util.spec_from_file_location("conformance_script", os.path.join(ROOT, "scripts",
                                                                                        "conformance.py"))
    module = importlib.util.module_from_spec(script)
    script.loader.exec_module(module)
    assert sorted(module.TASKS) == sorted(listed)  # make conformance runs every one the suite lists


def test_every_extension_scenario_the_suite_lists_is_run_and_the_conformance_page_counts_each_set():
    node, entry = suite()
    done = subprocess.run([node, entry, "list", "--server"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    extensions = set(re.findall(r"^\s+- (\S+) \[extension\]$", done.stdout, re.MULTILINE))
    script = importlib.util.spec_from_file_location("conformance_script", os.path.join(ROOT, "scripts",
                                                                                        "conformance.py"))
    module = importlib.util.module_from_spec(script)
    script.loader.exec_module(module)
    assert extensions == set(module.TASKS) | set(module.SKILLS)  # none left out, none made up
    with open(PAGE, encoding="utf-8") as file:
        page = file.read()
    rows = re.findall(r"^\| (.+?) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|(?: \d+ \|){4}$", page, re.MULTILINE)
    assert len(rows) == 8, rows  # the conformance table: a row for each set
    for name, scenarios, passed, failed, unexercised in rows:
        assert int(scenarios) == int(passed) + int(failed) + int(unexercised), name
    assert sum(int(row[1]) for row in rows if "Skills" in row[0]) == len(module.SKILLS)
