"""Reports from records: results.json (versioned, mergeable), matrix.md, junit.xml, report.html, and the
table printed at the end. Rendering is pure (records in, text out); `write_reports` writes each file
atomically (temp file + rename, world-readable) so an interrupted run never leaves half a report.

Every run writes its own folder, RESULTS/<run id>/, and points RESULTS/latest at it; a complete run of
the whole table also moves RESULTS/latest-full, so a subset or interrupted run never hides the last full
report. Every report names the tree it tested (commit, and the changed files when it was dirty), the
run and its logs, and whether it is partial.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path

from . import junit, skips, timing
from .arches import native
from .budgets import ASSUMES, CPYTHON, budget_for, kind_of, megabytes
from .compare import SinceLastFull
from .history import FLAKE_NAMED, FLAKE_WINDOW, FlakeRate
from .model import (
    SUITES,
    Cell,
    CellResult,
    Environment,
    FirstAnswer,
    Outcome,
    Suite,
    SuiteResult,
    TestFailure,
)
from .outcomes import BAD, counts
from .records import to_json, write_atomic
from .text import first, shorten

REPORT_FILES = ("results.json", "matrix.md", "junit.xml", "report.html")

# --- text renderings ---------------------------------------------------------------------------------

_MARK = {
    Outcome.PASSED: "✅",
    Outcome.FLAKY: "🔁",
    Outcome.FAILED: "❌",
    Outcome.ERROR: "💥",
    Outcome.TIMEOUT: "⏱",
    Outcome.UNAVAILABLE: "⚪",
    Outcome.CANCELLED: "🚫",
    Outcome.NOT_RUN: "▫️",
}


def suite_text(suite: SuiteResult | None) -> str:
    """What one grid cell says: counts for a verdict, the outcome otherwise."""
    if suite is None or suite.outcome is Outcome.NOT_RUN:
        return "—"
    if suite.over_budget and suite.tests:
        return f"{suite.counts}, over budget"
    if suite.outcome in (Outcome.PASSED, Outcome.FAILED) and suite.tests:
        return suite.counts
    if suite.outcome is Outcome.FLAKY:
        return f"flaky {suite.counts}"
    return str(suite.outcome.value)


def failure_lines(results: Sequence[CellResult]) -> list[tuple[CellResult, SuiteResult, str, TestFailure]]:
    """Every failing test of every attempt: (cell, suite, which attempt when the suite was rerun, failure)."""
    found = []
    for r in results:
        for s in r.suites:
            runs = len(s.earlier) + 1
            for n, earlier in enumerate(s.earlier, 1):
                found += [(r, s, f"run {n} of {runs}", f) for f in earlier.failures]
            found += [(r, s, f"run {runs} of {runs}" if s.earlier else "", f) for f in s.failures]
    return found


def interpreter_text(result: CellResult) -> str:
    """The implementation, the exact version and the build flavour: "CPython 3.11.2", "PyPy 7.3.19
    (3.11.11)", "CPython 3.14.2 free-threaded"."""
    if not result.python_version:
        return "—"
    name, _, own_version = (result.implementation or "Python").partition(" ")
    text = f"{name} {own_version} ({result.python_version})" if own_version else f"{name} {result.python_version}"
    return f"{text} {result.flavour}" if result.flavour else text


def word_bits(maxsize: int) -> int:
    """32 or 64: the width of a C pointer, from sys.maxsize (2**31 - 1 or 2**63 - 1)."""
    return maxsize.bit_length() + 1 if maxsize else 0


def arch_text(result: CellResult) -> str:
    """ "s390x (s390x, big-endian, 64-bit)": the architecture it was built for, then what its interpreter saw."""
    if not result.machine:
        return result.arch or "—"
    return f"{result.arch} ({result.machine}, {result.byteorder}-endian, {word_bits(result.maxsize)}-bit)"


def machine_facts(result: CellResult) -> str:
    """What the cell's interpreter said of its machine, as it said it: the proof its suites ran there."""
    if not result.machine:
        return ""
    return (f"platform.machine() {result.machine}, sys.byteorder {result.byteorder}, sys.maxsize {result.maxsize} "
            f"({word_bits(result.maxsize)}-bit)")


def first_answer_text(result: CellResult) -> str:
    return result.first_answer.text if result.first_answer else "—"


def reproduce_lines(results: Sequence[CellResult]) -> list[str]:
    """Every suite that did not pass: the line that reruns only it in only its cell (pasted, the `#` leaves the
    docker run into its image as a comment, to copy for debugging by hand)."""
    return [s.reproduce for r in results for s in r.suites if s.reproduce]


REPRODUCE_NOTE = ("To reproduce, each line reruns only that suite in only that cell (after the `#`: the docker run "
                  "into the same image with the same mounts, for debugging by hand):")


def warning_lines(results: Sequence[CellResult]) -> list[str]:
    """Every suite whose use came close to a limit it ran under, passed or not: the next run may cross it."""
    return [f"{r.cell} {s.suite.value}: {s.near_limit}" for r in results for s in r.suites if s.near_limit]


def nowhere_lines(results: Sequence[CellResult], env: Environment) -> list[str]:
    """The tests every cell that collected them skipped (skips.ran_nowhere): a heading, then one line each."""
    found = skips.ran_nowhere(results)
    if not found:
        return []
    if skips.judged(env):
        head = f"Ran nowhere ({len(found)}): skipped in every cell that collected them, which fails a whole run:"
    else:
        limited = env.subset or env.partial or f"shard {env.shard}"
        head = (f"Skipped in every cell of this run ({len(found)}; it was limited: {limited}), so perhaps run in none; "
                "a whole run fails on such a test:")
    return [head, *(t.text for t in found)]


def emulated_lines(results: Sequence[CellResult]) -> list[str]:
    """What each emulated cell ran: its declared part of each suite (budgets.UNDER_EMULATION), whole or cut to test
    files, and the suites it left out."""
    lines = []
    for r in results:
        if not any(s.scope for s in r.suites):
            continue
        ran = [f"{s.suite.value} ({', '.join(p.removeprefix(f'tests/{s.suite.value}/') for p in s.scope)})"
               if s.scope else f"{s.suite.value} (whole)" for s in r.suites if s.outcome is not Outcome.NOT_RUN]
        left = [s.suite.value for s in r.suites if s.outcome is Outcome.NOT_RUN and s.message]
        lines.append(f"{r.cell}: " + "; ".join(ran) + (f"; not run: {', '.join(left)}" if left else ""))
    if not lines:
        return []
    return ["What the emulated cells ran (what can differ by architecture; matrix/budgets.py UNDER_EMULATION, "
            "--suite NAME runs a suite whole):", *lines]  # fmt: skip


def host_only_lines(results: Sequence[CellResult]) -> list[str]:
    """The tests the cells left out as host-only (skips.host_only), named once: a heading, then one line each."""
    found = skips.host_only(results)
    if not found:
        return []
    return [f"Host-only ({len(found)}): not collected in any cell; `make test` runs them on the host:",
            *(f"{name}: {reason}" for name, reason in found.items())]


def skipped_lines(results: Sequence[CellResult]) -> list[str]:
    """Every skipped test, grouped by suite, reason and tests, with the cells that skipped them (one line for the
    same skip in many cells): a skip is reported with why, never only counted."""
    cells: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for r in results:
        for s in r.suites:
            reasons: dict[str, list[str]] = {}
            for skip in s.skips:
                reasons.setdefault(skip.reason or "no reason given", []).append(skip.test_id)
            for reason, ids in reasons.items():
                cells.setdefault((s.suite.value, reason, tuple(ids)), []).append(r.cell)
    lines = []
    for (suite, reason, tests), where in cells.items():
        lines.append(f"{', '.join(where)} {suite}: {len(tests)} skipped: {reason} ({first(tests, 3)})")
    return lines


def verdict(results: Sequence[CellResult]) -> str:
    """The cells that did not pass, each with why, in one line for the run's last words ('' when none)."""
    said = []
    for r in (r for r in results if r.outcome in BAD):
        tests = sorted({f.test_id for _, _, _, f in failure_lines([r])})
        said.append(f"{r.cell} {r.outcome.value} ({shorten(_why(r), 300)}{f': {first(tests, 3)}' if tests else ''})")
    return "; ".join(said)


def _why(result: CellResult) -> str:
    if result.message:
        return "; ".join((result.message, *result.notes))
    bad = [s for s in result.suites if s.outcome not in (Outcome.PASSED, Outcome.NOT_RUN)]
    return "; ".join([f"{s.suite.value}: {s.message or _failed_count(s)}" for s in bad] + list(result.notes))


def _failed_count(suite: SuiteResult) -> str:
    if suite.outcome is Outcome.FLAKY:
        said = "; ".join(f"run {n}: {e.message or e.summary}" for n, e in enumerate(suite.earlier, 1))
        return f"flaky: {said}; passed on run {len(suite.earlier) + 1}"
    if suite.outcome is Outcome.FAILED and suite.tests:
        return f"{suite.failed + suite.errors} of {suite.tests - suite.skipped} failed"
    return str(suite.outcome.value)


USAGE_NOTE = (
    "Peak memory and CPU time of each suite: in a container, what its cgroup counted (page cache included); on "
    "the host, getrusage of the suite's process tree (the largest process's peak). ⚠ marks a suite over its "
    "budget (matrix/budgets.py), which fails it, or one within 10% of its container's memory limit, a warning even "
    "when it passes."
)


def usage_text(suite: SuiteResult | None) -> str:
    """ "312 MB, 41s CPU" for a measured suite, '—' otherwise; ⚠ when it broke its budget."""
    if suite is None or not suite.usage.measured_by:
        return "—"
    text = f"{megabytes(suite.usage.peak_memory)}, {suite.usage.cpu_time:.0f}s CPU"
    if suite.near_limit:
        text += ", near the limit"
    return f"⚠ {text}" if suite.over_budget or suite.near_limit else text


def usage_rows(results: Sequence[CellResult], suites: Sequence[Suite]) -> list[list[str]]:
    """The usage table: a budget row for each kind of interpreter measured, then each cell that was."""
    measured = [r for r in results if any(s.usage.measured_by for s in r.suites)]
    kinds = sorted({kind_of(r) or CPYTHON for r in measured})
    rows = [[f"budget, {k}", *(budget_for(s, k).text for s in suites)] for k in kinds]
    return rows + [[r.cell, *(usage_text(r.suite(s)) for s in suites)] for r in measured]


def assumption_lines(results: Sequence[CellResult]) -> list[str]:
    """What the budgets of each kind of interpreter measured assume of it (budgets.ASSUMES)."""
    kinds = sorted({kind_of(r) or CPYTHON for r in results if any(s.usage.measured_by for s in r.suites)})
    return [f"{k} budgets assume: {ASSUMES[k]}" for k in kinds if k in ASSUMES]


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def flaky_lately(flakes: Sequence[FlakeRate]) -> str:
    """The summary's line naming every suite that flaked in FLAKE_NAMED or more of its last runs, passed or not this
    time ('' when none did)."""
    named = [f.text for f in flakes if f.named]
    if not named:
        return ""
    return f"Flaky lately ({FLAKE_NAMED} or more of a suite's last {FLAKE_WINDOW} runs): " + "; ".join(named)


def flake_lines(flakes: Sequence[FlakeRate]) -> list[str]:
    """The flake history section: each suite that flaked in its last runs, and how often."""
    if not flakes:
        return []
    return [f"Flake history (each suite's last {FLAKE_WINDOW} runs, from history.jsonl; every other suite: none):",
            *(f"- {f.text}" for f in flakes)]


def since_lines(since: SinceLastFull | None) -> list[str]:
    """The "since the last full run" section as lines of text ([] when there was no earlier full run)."""
    if since is None:
        return []
    return [f"{since.heading}:", *(f"- {shorten(line, 300)}" for line in since.lines())]


def to_markdown(results: Sequence[CellResult], env: Environment, *, suites: Sequence[Suite] = SUITES,
                since: SinceLastFull | None = None, flakes: Sequence[FlakeRate] = (), table: Sequence[Cell] = ()
                ) -> str:  # fmt: skip
    """The report as Markdown: a row per cell of `table` (those the run did not select say "not run"), then the
    findings, where the time went and what the run tested."""
    unselected = not_selected(table, results)
    lines = [
        "| cell | outcome | arch | python | " + " | ".join(s.value for s in suites)
        + " | first answer | time | notes |",
        "|---|---|---|---|" + "---|" * len(suites) + "---|---|---|",
    ]
    rank = {c.name: i for i, c in enumerate(table)}  # the table's order, the cells not selected in their places
    for r in sorted([*results, *unselected], key=lambda r: rank.get(r.cell, len(rank))):
        row = [f"`{r.cell}`", f"{_MARK[r.outcome]} {r.outcome.value.replace('-', ' ')}", arch_text(r),
               interpreter_text(r)]  # fmt: skip
        row += [suite_text(r.suite(s)) for s in suites]
        row += [first_answer_text(r), f"{r.duration:.0f}s" if r.duration else "", _md_escape(shorten(_why(r), 200))]
        lines.append("| " + " | ".join(row) + " |")
    tally = counts(results)
    summary = ", ".join(f"{n} {k}" for k, n in tally.items() if n)
    left = f" {len(unselected)} more in the table, not selected by this run." if unselected else ""
    lines += ["", f"{len(results)} cells: {summary}.{left}"]
    lines += ["", flaky_lately(flakes)] if flaky_lately(flakes) else []
    usage = usage_rows(results, suites)
    if usage:
        lines += ["", USAGE_NOTE, "", "| cell | " + " | ".join(s.value for s in suites) + " |",
                  "|---|" + "---|" * len(suites)]  # fmt: skip
        lines += [f"| {row[0] if row[0].startswith('budget') else '`' + row[0] + '`'} | " + " | ".join(row[1:]) + " |"
                  for row in usage]  # fmt: skip
        lines += ["", *(f"- {line}" for line in assumption_lines(results))]
    if since is not None:
        heading, *changes = since_lines(since)
        lines += ["", heading, "", *(_md_escape(change) for change in changes)]
    lines += _md_findings(results)
    for heading, *listed in (found for found in (nowhere_lines(results, env), host_only_lines(results)) if found):
        lines += ["", heading, "", *(f"- `{_md_escape(line)}`" for line in listed)]
    emulated = emulated_lines(results)
    lines += ["", emulated[0], "", *(f"- {_md_escape(line)}" for line in emulated[1:])] if emulated else []
    lines += ["", *flake_lines(flakes)] if flakes else []
    lines += _md_time(results, env)
    lines += ["", FIRST_ANSWER_NOTE, "", *provenance(env)]
    return "\n".join(lines) + "\n"


def _md_findings(results: Sequence[CellResult]) -> list[str]:
    """The Markdown report's lists: failing tests, how to reproduce each suite that did not pass, warnings, skips."""
    lines: list[str] = []
    failures = failure_lines(results)
    if failures:
        lines += ["", "Failing tests (a flaky suite's too, with the run they failed in):", ""]
        lines += [f"- `{r.cell}` {s.suite.value}{f' ({run})' if run else ''}: `{f.test_id}`: "
                  f"{_md_escape(shorten(f.message, 300))}" for r, s, run, f in failures]  # fmt: skip
    again = reproduce_lines(results)
    if again:
        lines += ["", REPRODUCE_NOTE, "", "```sh", *again, "```"]
    warnings = warning_lines(results)
    if warnings:
        lines += ["", "Warnings (whatever the outcome):", ""]
        lines += [f"- ⚠ {_md_escape(line)}" for line in warnings]
    skipped = skipped_lines(results)
    if skipped:
        lines += ["", "Skipped tests, with the reasons they gave:", ""]
        lines += [f"- {_md_escape(line)}" for line in skipped]
    return lines


def _md_time(results: Sequence[CellResult], env: Environment) -> list[str]:
    """Where the run's time went: its phases summed over the cells, each cell's, and the bases it made."""
    totals = timing.phase_totals(results)
    if not totals:
        return []
    lines = ["", f"Where the time went: {timing.summary(results, env)}.", "",
             "| phase | cells | seconds in all | longest |", "|---|---:|---:|---|"]  # fmt: skip
    lines += [f"| {t.name} | {t.cells} | {t.seconds:,.0f} | `{t.longest}` {t.longest_seconds:,.0f} s |" for t in totals]
    lines += ["", "| cell | " + " | ".join(timing.COLUMNS) + " |", "|---|" + "---:|" * len(timing.COLUMNS)]
    lines += [f"| `{row[0]}` | " + " | ".join(row[1:]) + " |" for row in timing.cell_rows(results)]
    made = timing.base_lines(env)
    lines += ["", "Bases made or fetched by this run:", "", *(f"- {_md_escape(line)}" for line in made)] if made else []
    used = timing.digest_lines(results)
    lines += ["", "Bases the cells were built from:", "", *(f"- {_md_escape(line)}" for line in used)] if used else []
    return lines


FIRST_ANSWER_NOTE = (
    "First answer: median milliseconds from spawning `python -m mcpserver demo.py` to its first tools/call answer in "
    "the cell's runtime, and in brackets that over the same interpreter's bare json line loop (a measurement, "
    "not a verdict)."
)


def provenance(env: Environment) -> list[str]:
    """What a report covers and where it came from, one fact a line."""
    tree = env.commit or "not a git checkout"
    if env.dirty:
        tree += f" plus uncommitted changes (dirty: {first(env.dirty, 20)})"
    lines = [f"Tested tree: {tree}."]
    if env.partial:
        lines.append(f"PARTIAL REPORT: {env.partial}.")
    lines.append(f"Run {env.run_id or '-'} at {env.date}; logs in {env.logs or '-'}.")
    lines.append(f"Engine {env.engine or '-'}, kernel {env.kernel or '-'}, host {env.host or '-'}"
                 f"{', shard ' + env.shard if env.shard else ''}.")  # fmt: skip
    return lines


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(*rows)]
    return ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]


def to_table(results: Sequence[CellResult], *, suites: Sequence[Suite] = SUITES, since: SinceLastFull | None = None,
             flakes: Sequence[FlakeRate] = (), env: Environment | None = None) -> str:  # fmt: skip
    """The plain-text table printed at the end of a run."""
    header = ["cell", "outcome", "arch", "python", *(s.value for s in suites), "first answer", "time"]
    rows = [
        [r.cell, r.outcome.value, r.arch or "—", interpreter_text(r), *(suite_text(r.suite(s)) for s in suites),
         first_answer_text(r), f"{r.duration:.0f}s"]
        for r in results
    ]  # fmt: skip
    out = _columns([header, *rows])
    usage = usage_rows(results, suites)
    if usage:
        out += ["", "peak memory and CPU time per suite:", *_columns([["cell", *(s.value for s in suites)], *usage])]
        out += assumption_lines(results)
    out += [f"warning: {line}" for line in warning_lines(results)]
    out += [f"skipped: {line}" for line in skipped_lines(results)]
    out += since_lines(since)
    out += [flaky_lately(flakes)] if flaky_lately(flakes) else []
    # What did not pass comes last, where a log's tail (all a CI page may show) has it.
    for r in results:
        if r.outcome is Outcome.PASSED:
            continue
        out.append(f"{r.cell}: {r.outcome.value}: {_why(r)}")
        out += [f"    {s.suite.value}{f' ({run})' if run else ''}: {f.test_id}: "
                f"{f.message.splitlines()[0] if f.message else ''}" for _, s, run, f in failure_lines([r])]  # fmt: skip
        out += [f"    {line}" for line in reproduce_lines([r])]
    nowhere = nowhere_lines(results, env or Environment())
    out += [nowhere[0], *(f"    {line}" for line in nowhere[1:])] if nowhere else []
    return "\n".join(out) + "\n"


# --- HTML ------------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:20px;margin:0 0 4px} .env{color:#57606a;margin-bottom:16px}
table{border-collapse:collapse;margin-bottom:20px}
th,td{border:1px solid #d0d7de;padding:6px 10px;text-align:left;vertical-align:top}
th{background:#f6f8fa} td.s{text-align:center;font-variant-numeric:tabular-nums;min-width:70px}
.passed{background:#dafbe1} .failed{background:#ffd7d5}
.error{background:#ffb3ad} .timeout{background:#fff1c2} .flaky{background:#fde2b8}
.unavailable{background:#eaeef2;color:#57606a} .cancelled{background:#e8e0f7} .not-run{color:#8c959f}
details{margin:6px 0 12px} summary{cursor:pointer;font-weight:600}
pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:360px;white-space:pre-wrap}
td.why{color:#57606a;font-size:12px;max-width:420px}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px;border:1px solid #d0d7de}
.panels,.charts{display:flex;flex-wrap:wrap;gap:16px;margin:12px 0}
.panel{border:1px solid #d0d7de;padding:4px 10px} .panel h3,.charts h3{margin:4px 0;font-size:14px}
table.grid{margin:0} table.grid th,table.grid td{border:none;padding:1px 3px;font-size:12px;text-align:center}
table.grid th:first-child{text-align:right}
.sq{display:inline-block;width:14px;height:14px;margin:1px;border:1px solid #8c959f;vertical-align:middle}
.sq.not-run,.legend span.not-run{background:#fff;border:1px dashed #8c959f;color:#57606a}
a.sq.passed{background:#2da44e} a.sq.failed{background:#cf222e} a.sq.error{background:#a40e26}
a.sq.timeout{background:#d4a72c} a.sq.flaky{background:#e16f24} a.sq.cancelled{background:#8250df}
a.sq.unavailable{background:#eaeef2}
svg.chart{font:11px system-ui,sans-serif} svg.chart rect{fill:#2da44e}
svg.chart rect.failed,svg.chart rect.error{fill:#cf222e} svg.chart rect.flaky,svg.chart rect.timeout{fill:#e16f24}
svg.chart rect.mem{fill:#54aeff} svg.chart rect.over{fill:#cf222e}
svg.chart line.budget{stroke:#1b1f24;stroke-dasharray:2 2}
p.lately{background:#fde2b8;padding:6px 10px;font-weight:600} details.gone{margin:16px 0}
"""


def _css(suite: SuiteResult | None) -> str:
    return suite.outcome.value if suite else Outcome.NOT_RUN.value


def to_html(results: Sequence[CellResult], env: Environment, *, suites: Sequence[Suite] = SUITES,
            since: SinceLastFull | None = None, flakes: Sequence[FlakeRate] = (), table: Sequence[Cell] = ()
            ) -> str:  # fmt: skip
    """One self-contained page: inline CSS and SVG, no scripts, no external assets. At the top the shape of the
    matrix (a square per cell of `table`, the cell table, each linking to its row; a cell this run did not select in
    its own colour, "not run") and the charts; then the cells that ran, the unavailable ones folded with their
    reasons, and every cell's details."""
    e = html.escape
    tally = counts(results)
    unselected = not_selected(table, results)
    if unselected:
        tally["not run (not selected)"] = len(unselected)
    ran = [r for r in results if r.outcome is not Outcome.UNAVAILABLE]
    lately = flaky_lately(flakes)
    head = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        "<title>mcpserver lab matrix</title><style>" + _CSS + "</style></head><body>",
        "<h1>mcpserver lab matrix</h1>",
        f"<div class=env>{len(results)} cells: " + e(", ".join(f"{n} {k}" for k, n in tally.items() if n)) + "<br>"
        + "<br>".join(e(line) for line in provenance(env)) + "</div>",
        f"<p class=lately>{e(lately)}</p>" if lately else "",
        "<div class=legend>"
        + "".join(f"<span class={o.value}>{o.value.replace('-', ' ')}</span>" for o in Outcome
                  if o is not Outcome.NOT_RUN or unselected)
        + "</div>",
        _html_grid([*results, *unselected]), _html_charts(ran, suites),
    ]  # fmt: skip
    body = [_html_table(ran, suites), f"<p class=env>{e(FIRST_ANSWER_NOTE)}</p>", _html_unavailable(results)]
    body += _html_sections(results, env, suites, since, flakes)
    details = ["<h2>Details</h2>"] + [_html_details(r) for r in results]
    return "\n".join(head + body + details) + "\n</body></html>\n"


def _html_table(ran: Sequence[CellResult], suites: Sequence[Suite]) -> str:
    """The cells that ran, a row each; every row links to its details."""
    e = html.escape
    rows = ["<table><tr><th>cell</th><th>outcome</th><th>arch</th><th>python</th>"
            + "".join(f"<th>{e(s.value)}</th>" for s in suites) + "<th>first answer</th><th>time</th><th>why</th></tr>"]
    for r in ran:
        cells = "".join(f"<td class='s {_css(r.suite(s))}'>{e(suite_text(r.suite(s)))}</td>" for s in suites)
        rows.append(
            f"<tr id='{e(r.cell)}'><td><a href='#d-{e(r.cell)}'>{e(r.cell)}</a></td>"
            f"<td class={r.outcome.value} title='{e(_why(r))}'>{r.outcome.value}</td><td>{e(arch_text(r))}</td>"
            f"<td>{e(interpreter_text(r))}</td>{cells}<td class=s>{e(first_answer_text(r))}</td>"
            f"<td>{r.duration:.0f}s</td><td class=why>{e(shorten(_why(r), 160))}</td></tr>"
        )
    return "\n".join(rows) + "</table>"


def _html_unavailable(results: Sequence[CellResult]) -> str:
    """The cells this machine cannot have, folded into one section: what most of a page was before."""
    e = html.escape
    gone = [r for r in results if r.outcome is Outcome.UNAVAILABLE]
    if not gone:
        return ""
    rows = "".join(f"<tr id='{e(r.cell)}'><td><a href='#d-{e(r.cell)}'>{e(r.cell)}</a></td><td>{e(r.arch)}</td>"
                   f"<td class=why>{e(r.message)}</td></tr>" for r in gone)  # fmt: skip
    return (f"<details class=gone><summary>{len(gone)} unavailable cells, with their reasons</summary><table><tr>"
            f"<th>cell</th><th>arch</th><th>why it cannot run here</th></tr>{rows}</table></details>")


def _html_sections(results: Sequence[CellResult], env: Environment, suites: Sequence[Suite],
                   since: SinceLastFull | None, flakes: Sequence[FlakeRate]) -> list[str]:  # fmt: skip
    e = html.escape
    body = []
    usage = usage_rows(results, suites)
    if usage:
        body.append(f"<h2>Peak memory and CPU time</h2><p class=env>{e(USAGE_NOTE)}</p><table><tr><th>cell</th>"
                    + "".join(f"<th>{e(s.value)}</th>" for s in suites) + "</tr>")  # fmt: skip
        body += ["<tr>" + "".join(f"<td{' class=s' if i else ''}>{e(c)}</td>" for i, c in enumerate(row)) + "</tr>"
                 for row in usage]  # fmt: skip
        body.append("</table>" + "".join(f"<p class=env>{e(line)}</p>" for line in assumption_lines(results)))
    again = reproduce_lines(results)
    if again:
        body.append(f"<h2>Reproduce</h2><p class=env>{e(REPRODUCE_NOTE)}</p><pre class=again>"
                    + "\n".join(e(line) for line in again) + "</pre>")  # fmt: skip
    sections = (nowhere_lines(results, env), host_only_lines(results), emulated_lines(results), since_lines(since),
                flake_lines(flakes))  # fmt: skip
    for heading, *lines in (section for section in sections if section):
        body.append(f"<h2>{e(heading.rstrip(':'))}</h2><ul>"
                    + "".join(f"<li>{e(c.removeprefix('- '))}</li>" for c in lines) + "</ul>")  # fmt: skip
    return body


def not_selected(table: Sequence[Cell], results: Sequence[CellResult]) -> list[CellResult]:
    """The cells of the table this run did not select, as records that say so: the grid shows every cell."""
    ran = {r.cell for r in results}
    return [CellResult(cell=c.name, outcome=Outcome.NOT_RUN, message="not selected by this run", family=c.family.value,
                       release=c.release, interpreter=c.slug, arch=c.arch or native())
            for c in table if c.name not in ran]  # fmt: skip


def _version_order(slug: str) -> tuple[int, ...]:
    """py3.9 < py3.13 < py3.13t < pypy3.11: columns by interpreter, then by version."""
    numbers = slug.lstrip("pyth").rstrip("t").split(".")
    return (slug.startswith("pypy"), *(int(n) for n in numbers if n.isdigit()), slug.endswith("t"))


def _html_grid(results: Sequence[CellResult]) -> str:
    """The shape of the matrix: a panel per architecture, rows by distribution and release, columns by Python,
    a coloured square per cell (variants share their cell's place), each linking to its row."""
    e = html.escape
    panels = []
    for arch in sorted({r.arch for r in results}, key=lambda a: (a != results[0].arch, a)):
        mine = [r for r in results if r.arch == arch]
        rows = sorted({(r.family, r.release) for r in mine})
        columns = sorted({r.interpreter for r in mine}, key=_version_order)
        head = "<tr><th></th>" + "".join(f"<th>{e(c.removeprefix('py') if c.startswith('py3') else c)}</th>"
                                         for c in columns) + "</tr>"  # fmt: skip
        body = []
        for family, release in rows:
            squares = ["".join(_square(r) for r in mine if (r.family, r.release, r.interpreter) == (family, release, c))
                       for c in columns]
            name = family if family == release else f"{family} {release}"
            body.append(f"<tr><th>{e(name)}</th>" + "".join(f"<td>{sq}</td>" for sq in squares) + "</tr>")
        panels.append(f"<div class=panel><h3>{e(arch or '?')}</h3><table class=grid>{head}{''.join(body)}</table>"
                      "</div>")
    return "<div class=panels>" + "".join(panels) + "</div>"


def _square(r: CellResult) -> str:
    """A cell's square in the grid: a link to its row, or for a cell the run did not select, a square saying so."""
    e = html.escape
    if r.outcome is Outcome.NOT_RUN:
        return f"<span class='sq not-run' title='{e(r.cell)}: not run (not selected)'></span>"
    return f"<a href='#{e(r.cell)}' class='sq {r.outcome.value}' title='{e(r.cell)}: {r.outcome.value}'></a>"


_BAR, _ROW = 360, 14  # the charts' bar length and row height, in pixels


def _html_charts(ran: Sequence[CellResult], suites: Sequence[Suite]) -> str:
    """Inline SVG: each cell's time, and each suite's peak memory against its budget (a dashed line at the budget;
    a bar past it is over)."""
    e = html.escape
    if not ran:
        return ""
    longest = max(r.duration for r in ran) or 1.0
    label = 230
    time_rows = [f"<text x='{label - 6}' y='{i * _ROW + 11}' text-anchor=end>{e(r.cell)}</text>"
                 f"<rect class={r.outcome.value} x='{label}' y='{i * _ROW + 2}' "
                 f"width='{r.duration / longest * _BAR:.1f}' "
                 f"height='{_ROW - 4}'><title>{e(r.cell)}: {r.duration:.0f}s</title></rect>"
                 f"<text x='{label + r.duration / longest * _BAR + 4:.1f}' y='{i * _ROW + 11}'>{r.duration:.0f}s</text>"
                 for i, r in enumerate(ran)]  # fmt: skip
    times = (f"<svg class=chart width='{label + _BAR + 60}' height='{len(ran) * _ROW + 4}' role=img>"
             f"<title>each cell's time</title>{''.join(time_rows)}</svg>")
    return (f"<div class=charts><div><h3>time per cell</h3>{times}</div><div><h3>peak memory per suite, against its "
            f"budget</h3>{_memory_chart(ran, suites, label)}</div></div>")


def _memory_chart(ran: Sequence[CellResult], suites: Sequence[Suite], label: int) -> str:
    e = html.escape
    width = 64  # a suite's share of a row: its budget is at 4/5 of it, so what goes past shows
    parts = [f"<text x='{label + i * width + width / 2}' y='10' text-anchor=middle>{e(s.value)}</text>"
             for i, s in enumerate(suites)]  # fmt: skip
    for row, r in enumerate(ran, 1):
        y = row * _ROW
        parts.append(f"<text x='{label - 6}' y='{y + 11}' text-anchor=end>{e(r.cell)}</text>")
        for i, s in enumerate(suites):
            found = r.suite(s)
            if found is None or not found.usage.measured_by:
                continue
            budget = budget_for(s, kind_of(r) or CPYTHON)
            share = min(found.usage.peak_memory / budget.memory, 1.25)
            x = label + i * width
            over = " over" if found.over_budget else ""
            parts.append(f"<rect class='mem{over}' x='{x}' y='{y + 2}' width='{share * 0.8 * width:.1f}' "
                         f"height='{_ROW - 4}'><title>{e(r.cell)} {s.value}: {usage_text(found)} of "
                         f"{e(budget.memory_text)}</title></rect><line class=budget x1='{x + 0.8 * width}' "
                         f"x2='{x + 0.8 * width}' y1='{y}' y2='{y + _ROW}'/>")  # fmt: skip
    return (f"<svg class=chart width='{label + len(suites) * width}' height='{(len(ran) + 1) * _ROW + 4}' role=img>"
            f"<title>each suite's peak memory against its budget</title>{''.join(parts)}</svg>")


def _html_details(r: CellResult) -> str:
    e = html.escape
    made = f"({r.base_image}, tarball sha256 {r.base_sha256})" if r.base_sha256 else ""
    base = " ".join(filter(None, (r.base, made)))
    facts = [("arch", r.arch), ("machine", machine_facts(r)),
             ("python", interpreter_text(r) if r.python_version else ""), ("base", base), ("image", r.image),
             ("first answer", _first_answer_details(r.first_answer)), ("time", f"{r.duration:.0f}s")]
    out = [f"<h3 id='d-{e(r.cell)}' class={r.outcome.value}>{e(r.cell)}: {r.outcome.value}</h3>",
           "<p>" + " · ".join(f"{k} {e(v)}" for k, v in facts if v) + "</p>"]  # fmt: skip
    if r.message:
        out.append(f"<p>{e(r.message)}</p>")
    if r.log_tail:
        out.append(f"<details><summary>log tail</summary><pre>{e(r.log_tail)}</pre></details>")
    for s in r.suites:
        if s.outcome is Outcome.NOT_RUN:
            continue
        where = f" (cached: passed in run {s.produced_by} at {s.produced_at})" if s.cached else ""
        where += f" (cut to {', '.join(s.scope)}, under emulation)" if s.scope else ""
        counted = s.counts if s.tests else ""
        used = f"; {usage_text(s)} ({s.usage.measured_by})" if s.usage.measured_by else ""
        out.append(f"<p><b>{e(s.suite.value)}</b>: {s.outcome.value} {e(counted)} in {s.duration:.0f}s"
                   f"{e(used)}{e(where)} {e(s.message)}</p>")  # fmt: skip
        if s.near_limit:
            out.append(f"<p>⚠ {e(s.near_limit)}</p>")
        if s.reproduce:
            out.append(f"<p>reproduce:</p><pre class=again>{e(s.reproduce)}</pre>")
        if s.repetitions:
            out.append(f"<p>stress: {s.repetitions} test cases were repetitions of the concurrency tests</p>")
        for n, earlier in enumerate(s.earlier, 1):
            out.append(f"<p>run {n} of {len(s.earlier) + 1}: {earlier.outcome.value} in {earlier.duration:.0f}s "
                       f"{e(earlier.message)}</p>")  # fmt: skip
            out += [_failure_html(f, f"run {n}: ") for f in earlier.failures]
        out += [_failure_html(f) for f in s.failures]
        if s.skips:
            listed = "".join(f"<li>{e(k.test_id)}: {e(k.reason)}</li>" for k in s.skips)
            out.append(f"<details><summary>{len(s.skips)} skipped, with the reasons</summary><ul>{listed}</ul>"
                       "</details>")  # fmt: skip
        if s.log_tail:
            out.append(f"<details><summary>{e(s.suite.value)} log tail</summary><pre>{e(s.log_tail)}</pre></details>")
    return "\n".join(out)


def _failure_html(failure: TestFailure, label: str = "") -> str:
    e = html.escape
    return (f"<details><summary>{e(label + failure.test_id)}</summary><p>{e(failure.message)}</p>"
            f"<pre>{e(failure.details)}</pre></details>")  # fmt: skip


def _first_answer_details(first: FirstAnswer | None) -> str:
    if first is None:
        return ""
    if first.error or not first.runs:
        return first.error or "not measured"
    where = f" (cached: measured in run {first.produced_by})" if first.cached else ""
    return (f"median {first.median_ms:.1f} ms over {first.runs} starts (min {min(first.samples_ms):.1f}, max "
            f"{max(first.samples_ms):.1f}); bare loop {first.bare_median_ms:.1f} ms; {first.ratio:.2f}x{where}")


# --- writing -----------------------------------------------------------------------------------------


def write_reports(
    results: Sequence[CellResult],
    env: Environment,
    out: Path,
    *,
    suites: Sequence[Suite] = SUITES,
    summary: bool = True,
    since: SinceLastFull | None = None,
    flakes: Sequence[FlakeRate] = (),
    table: Sequence[Cell] = (),
) -> dict[str, Path]:
    """Write the four reports; with `summary`, also append the Markdown to GITHUB_STEP_SUMMARY if set. `table`: the
    cell table, whose cells the run did not select the Markdown and the HTML grid show as not run."""
    files = {
        "results.json": to_json(results, env, suites=suites).encode(),
        "matrix.md": to_markdown(results, env, suites=suites, since=since, flakes=flakes, table=table).encode(),
        "junit.xml": junit.merged(results),
        "report.html": to_html(results, env, suites=suites, since=since, flakes=flakes, table=table).encode(),
    }
    written = {}
    for name, data in files.items():
        write_atomic(out / name, data)
        written[name] = out / name
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write("## mcpserver lab matrix\n\n" + files["matrix.md"].decode() + "\n")
    return written


def point(link: Path, run_folder: Path) -> None:
    """Make `link` a symlink to the run folder (relative, replaced atomically)."""
    temp = link.with_name(f".{link.name}.{os.getpid()}")
    temp.unlink(missing_ok=True)
    temp.symlink_to(run_folder.name)
    os.replace(temp, link)
