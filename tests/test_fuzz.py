"""A short fuzz campaign in every test run: bounded, seeded and deterministic (hypothesis with
`derandomize`, no example database). The long campaign is `python tests/fuzzing.py` (README)."""

from __future__ import annotations

import random

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the `test` extra: pip install '.[test]'")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fuzzing  # noqa: E402 (tests/ is on sys.path under pytest)

CORPUS = fuzzing.seed_corpus()
SHORT = settings(max_examples=300, derandomize=True, database=None, deadline=None,
                 suppress_health_check=list(HealthCheck))


def test_the_seed_corpus_is_the_projects_own_files():
    assert len(CORPUS) > 50


@SHORT
@given(st.sampled_from(range(len(CORPUS))), st.randoms(use_true_random=False))
def test_mutated_examples_and_fixtures_never_break_the_linter(index, rng):
    fuzzing.check_in_process(fuzzing.mutate(CORPUS[index], rng, CORPUS))


@SHORT
@given(st.randoms(use_true_random=False), st.integers(min_value=1, max_value=4))
def test_generated_kubernetes_documents_never_break_the_linter(rng, documents):
    text = "".join(f"---\n{fuzzing.generated_document(rng)}" for _ in range(documents))
    fuzzing.check_in_process(text.encode())


@settings(max_examples=100, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_fuzzed_node_inventories_never_break_the_linter(tmp_path_factory, rng):
    nodes = tmp_path_factory.mktemp("nodes") / "nodes.yaml"
    nodes.write_bytes(fuzzing.make_input(rng, CORPUS))
    fuzzing.check_in_process(fuzzing.make_input(rng, CORPUS), nodes)


@settings(max_examples=100, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_fuzzed_configuration_files_and_policies_are_clear_errors(tmp_path_factory, rng):
    fuzzing.check_settings(fuzzing.make_input(rng, CORPUS), tmp_path_factory.mktemp("settings"))


@pytest.mark.parametrize("seed", range(10))
def test_the_cli_exits_0_1_or_2_on_fuzzed_input(seed):
    """Through the command line in its own process: never exit 3, never a signal."""
    rng = random.Random(seed)
    fuzzing.check_cli(fuzzing.make_input(rng, CORPUS), fuzzing.FORMATS[seed % len(fuzzing.FORMATS)])


def test_a_short_campaign_of_the_long_runner_finds_nothing():
    result = fuzzing.campaign(300, seed=20240, cli_every=0, save=None, progress=False)
    assert result["failures"] == 0, result["examples"]
