"""The kind classifier, measured on hand-written requests (tests/data; bench/classifier.py prints the figures).

``requests_heldout.jsonl`` was written after the rules were tuned and never used to tune them: keep it
so. To improve the rules, add requests to ``requests.jsonl``; write new held-out ones only after the
tuning is done, and replace the held-out set rather than tuning on it.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import DATA, REPO

from acr_cli.context import KIND_PRECISION, KINDS, classify, classify_kind

ROOT = REPO

# Held-out agreement: the current rules reach 0.78 (63/81); the rules before they were measured reached 0.54.
HELD_OUT_FLOOR = 0.70
# On the requests the rules were tuned on: 0.97 now, 0.40 before. A floor against regressions, not a
# measure of how well the rules generalise (the held-out set says that).
TUNED_FLOOR = 0.90
# Long requests (pasted issues, specs, lab handouts), held out: 0.60 (27/45) now; the rules that read every word
# alike (before _ask) reached 0.42 (19/45). Tuned: 0.74 now (53/72), 0.61 before.
LONG_HELD_OUT_FLOOR = 0.55
LONG_TUNED_FLOOR = 0.70


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def accuracy(rows: list[dict], classify=classify_kind) -> float:
    return sum(1 for r in rows if classify(r["text"])[0] == r["kind"]) / len(rows)


def rules_before():
    spec = importlib.util.spec_from_file_location("kind_rules_before", ROOT / "bench" / "kind_rules_before.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.classify_kind


def test_the_sets_are_labelled_requests_of_every_kind():
    tuned, held_out = load("requests.jsonl"), load("requests_heldout.jsonl")
    long_tuned, long_held_out = load("requests_long.jsonl"), load("requests_long_heldout.jsonl")
    assert len(tuned) >= 200 and len(held_out) >= 60 and len(long_tuned) >= 60 and len(long_held_out) >= 40
    for rows, least in ((tuned, 15), (held_out, 8), (long_tuned, 8), (long_held_out, 5)):
        for r in rows:
            assert set(r) == {"text", "kind", "style"} and r["kind"] in KINDS and r["text"].strip()
        for kind in KINDS:
            assert sum(1 for r in rows if r["kind"] == kind) >= least, kind
    assert all(len(r["text"]) >= 600 for r in long_tuned + long_held_out)
    texts = [r["text"] for r in tuned + held_out + long_tuned + long_held_out]
    assert len(set(texts)) == len(texts)  # no request in two sets, none twice


def test_held_out_agreement_reaches_the_floor():
    assert accuracy(load("requests_heldout.jsonl")) >= HELD_OUT_FLOOR


def test_the_rules_before_did_not_reach_the_floor():
    """The floor means something: the rules before they were measured stay below it."""
    assert accuracy(load("requests_heldout.jsonl"), rules_before()) < HELD_OUT_FLOOR


def test_tuned_set_agreement():
    assert accuracy(load("requests.jsonl")) >= TUNED_FLOOR


def test_long_requests_are_read_by_what_they_ask():
    """A pasted spec, issue or handout carries every kind's words in its background; read alike, most read as
    bug fixes. Read by their ask, the held-out long requests reach the floor, which the shipped rules before
    did not (their reading, with every word counted alike, is BACKGROUND_WORDS set beyond any request)."""
    assert accuracy(load("requests_long_heldout.jsonl")) >= LONG_HELD_OUT_FLOOR
    assert accuracy(load("requests_long.jsonl")) >= LONG_TUNED_FLOOR


def test_reading_every_word_alike_stays_below_the_long_floor(monkeypatch):
    import acr_cli.context as context

    monkeypatch.setattr(context, "BACKGROUND_WORDS", 10**9)
    assert accuracy(load("requests_long_heldout.jsonl")) < LONG_HELD_OUT_FLOOR


def test_a_long_requests_background_counts_less_than_its_ask():
    """A lab handout whose background is all about crashes and bugs asks for a feature."""
    background = " ".join(
        f"In lab {n} a student found that the old allocator would crash and leak memory when a bug in the free list "
        f"corrupted it; the fix came late and the failing tests stayed red for a week." for n in range(30))
    handout = (f"Lab 5: a slab allocator\n\n## Background\n\n{background}\n\n## Your task\n\n"
               "You will implement a new slab allocator with per-size caches and add a kmem_stats system call.")
    kind, reasons = classify_kind(handout)
    assert kind == "feature", reasons
    assert any(r.startswith("the background (") for r in reasons)
    assert any("first asking to 'implement'" in r for r in reasons)
    # the same words as a short report are a bug report: short requests are read as before
    assert classify_kind(background.split(";")[0])[0] == "bug_fix"


# The shapes that matter, each written for this test (none is in the data sets).
@pytest.mark.parametrize("kind, prompt", [
    # a pasted stack trace is a bug report, whatever verbs are around it
    ("bug_fix", "Adding a webhook from the settings page fails:\n\nTraceback (most recent call last):\n"
                "  File \"/srv/app/hooks.py\", line 40, in add_hook\n    url = form[\"url\"].strip()\n"
                "KeyError: 'url'\n"),
    ("bug_fix", "add_item throws\n\nTypeError: Cannot read properties of null (reading 'id')\n"
                "    at addItem (cart.js:31:9)\n"),
    # a test that fails is a bug report; a request for a test is not
    ("bug_fix", "the integration test for checkout fails since the last release"),
    ("test_generation", "write a test that reproduces the crash in parse_header"),
    ("test_generation", "the billing module has no tests; add unit tests for proration"),
    # a description of what goes wrong, with no bug words, asks for a fix
    ("bug_fix", "the invoice total shows 0 when a line has a discount"),
    # a question about code is explain; a polite request ending in "?" is the work it asks for
    ("explain", "how does the job queue decide which worker gets a task?"),
    ("explain", "why does parse_date return None for \"2024-02-30\"?"),
    ("feature", "can you add a --limit option to the list command?"),
    # "fix" or "explain" inside docs work
    ("docs", "add a CHANGELOG entry for 1.2: fixed the crash when the config is empty"),
    ("docs", "explain in the README how the cache is invalidated"),
    # statistics words that are also bug words
    ("data_science", "fit a linear regression of sales on ad spend and plot the residuals"),
    ("refactor", "split the 600-line handlers.py into one module per resource, no behaviour change"),
    ("algorithm", "implement an LRU cache with O(1) get and put"),
    ("multi_file", "rename UserProfile to Account everywhere"),
])
def test_shapes(kind, prompt):
    got, reasons = classify_kind(prompt)
    assert got == kind, reasons


def test_reasons_name_the_evidence():
    kind, reasons = classify_kind("please add this\n\nTraceback (most recent call last):\n  File \"a.py\"\nKeyError: 1")
    assert kind == "bug_fix" and any("pasted error output" in r for r in reasons)


def test_a_huge_request_is_read_by_its_ends():
    """A request may be 4 MiB of pasted output: the middle is not read, the ask at the end is."""
    log = "INFO step ok\n" * 400_000
    kind, _ = classify_kind(log + "\nwrite unit tests for the step runner covering the retry path")
    assert kind == "test_generation"


def test_the_routers_trust_in_a_guessed_kind_is_the_rules_held_out_precision():
    # the learned router weighs a profile's per-kind prior by KIND_PRECISION: it must be what the rules measure
    rows = load("requests_heldout.jsonl") + load("requests_long_heldout.jsonl")
    read = [classify_kind(r["text"])[0] for r in rows]
    for kind in KINDS:
        as_kind = [r["kind"] for r, k in zip(rows, read) if k == kind]
        assert as_kind, kind
        assert KIND_PRECISION[kind] == pytest.approx(as_kind.count(kind) / len(as_kind), abs=0.0005), kind
    assert classify("fix the failing parser test").kind_sure == KIND_PRECISION["bug_fix"]
    assert classify("fix the failing parser test", kind="refactor").kind_sure == 1.0


_UPLOADER = ("Our uploader sends the nightly reports to the storage bucket. Sometimes the link drops for a few seconds, "
             "the upload stops with a timeout and the job exits. The reports are then missing until someone reruns the "
             "job by hand the next morning, which is tedious and easy to forget. ") * 5


@pytest.mark.parametrize("ask", ["Please add a retry option to the uploader.", "Please add a retry option to the uploader",
                                 "Add a retry option to the uploader"])
def test_an_ask_without_a_full_stop_is_not_taken_for_a_heading(ask):
    kind, reasons = classify_kind(f"Nightly uploader\n\n{_UPLOADER}\n\n{ask}\n")
    assert kind == "feature", reasons


def test_a_numbered_list_of_asks_is_not_a_list_of_headings():
    history = ("Last spring the refund calculator had a bug, a regression and a crash on negative amounts, and the fix "
               "broke the rounding. The service has run for three years and serves forty thousand requests a day. ") * 4
    asks = ["Write unit tests for the refund calculator", "Write tests for the currency rounding helper",
            "Add tests for the ledger export"]
    for items in ("\n".join(f"{n}. {a}" for n, a in enumerate(asks, 1)), "\n".join(f"- {a}" for a in asks)):
        kind, reasons = classify_kind(f"Payments service\n\n{history}\n\nWhat to do:\n\n{items}")
        assert kind == "test_generation", reasons


def test_a_code_block_left_open_does_not_swallow_the_ask():
    kind, reasons = classify_kind(f"Nightly uploader\n\n```\n{_UPLOADER}\n\nPlease add a retry option to the uploader.\n")
    assert kind == "feature", reasons


def test_a_request_cut_inside_a_code_block_reads_its_tail_as_prose():
    """Past 20,000 characters the middle is not read; a code block the cut leaves open is closed there."""
    code = "```\n" + "\n".join(f"    value_{i} = parse_line(lines[{i}])  # entry {i}" for i in range(420)) + "\n```\n\n"
    middle = ("The manifests grew when we merged the regional configs, and the parser now holds the whole file in "
              "memory while it resolves the includes. ") * 30
    tail = ("\n\nPlease add a streaming mode to the parser so that it reads one entry at a time, as a new option.\n\n"
            "Thanks, we would love this.\n")
    prompt = "Config parser\n\nThe parser reads the deployment manifests of every service.\n\n" + code + middle + tail
    assert len(prompt) > 20_000
    kind, reasons = classify_kind(prompt)
    assert kind == "feature", reasons


def test_a_request_a_little_over_a_paragraph_keeps_all_its_evidence():
    """Over BACKGROUND_WORDS words in all but not in its background, a request is read whole, as before: the
    pasted traceback below is not dropped for being outside the asking sentences."""
    asks = ("Update the export job so it writes one file per day. Keep the file names of old exports. Add a flag for "
            "the output directory. Make sure the scheduler still runs it at midnight. Log how many rows each file "
            "gets. Keep the CSV header as it is. Write the files atomically. Use the settings module for the paths. "
            "Document the new flag in the usage text. Keep the retry logic as it is today. Avoid new dependencies. "
            "Run the linters before you push. ")
    trace = ("\n\nThe last run printed:\n\n```\nTraceback (most recent call last):\n  File \"export.py\", line 88, in "
             "main\n    write(rows)\nValueError: I/O operation on closed file.\n```\n")
    kind, reasons = classify_kind(asks + trace)
    assert any("pasted error output" in r and "background" not in r for r in reasons), reasons
