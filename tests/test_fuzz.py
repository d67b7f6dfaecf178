"""A short fuzz campaign in every test run: bounded, seeded and deterministic (hypothesis with
`derandomize`, no example database). The long campaign is `python tests/fuzzing.py` (README)."""

from __future__ import annotations

import random

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the `test` extra: pip install '.[test]'")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fuzzing  # noqa: E402 (tests/ is on sys.path under pytest)
import fuzzing_generators as generators  # noqa: E402

pytestmark = pytest.mark.slow  # hypothesis campaigns: not in the quick subset

CORPUS = fuzzing.seed_corpus()
NODE_CORPUS = generators.node_seed_corpus()
SHORT = settings(max_examples=300, derandomize=True, database=None, deadline=None,
                 suppress_health_check=list(HealthCheck))


def test_the_seed_corpus_is_the_projects_own_files():
    """Every example and fixture, each once, read as it is on disk: a fixture added for a rule is
    fuzzed from then on, and nothing from outside the repository seeds the campaign."""
    root = fuzzing.ROOT
    expected = sorted([*root.glob("examples/**/*.yaml"), *root.glob("tests/policies/**/*.yaml"),
                       *root.glob("tests/charts/*.yaml")])
    assert CORPUS == [path.read_bytes() for path in expected]
    assert (root / "examples" / "nginx-hostport-nodeport.yaml").read_bytes() in CORPUS
    assert any(path.parts[-3] == "policies" and path.name.startswith("fail-") for path in expected)


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


def test_the_node_seed_corpus_covers_every_dump_format():
    from kubelint_ports.loading.snapshot import KINDS, detect

    kinds = {detect(data.decode("utf-8", "replace"))[0] for _, data in NODE_CORPUS}
    generated = {detect(make(random.Random(seed)))[0] for make in generators.NODE_DUMPS.values() for seed in range(5)}
    assert generated - {None} == set(KINDS), generated
    assert {"iptables-save", "nft", "nft-json", "crictl-pods", "ss", "ipvsadm"} <= kinds, kinds


@settings(max_examples=150, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_fuzzed_node_dumps_never_break_the_node_command(tmp_path_factory, rng):
    """Generated and shipped dumps of every format, mutated, as one node's snapshot next to a clean
    node: no exception, no internal error, every formatter writes, the clean node keeps its finding."""
    fuzzing.check_node(fuzzing.node_input(rng, NODE_CORPUS), tmp_path_factory.mktemp("node"), rng)


@settings(max_examples=60, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_fuzzed_port_schema_policies_are_refused_clearly_or_run(tmp_path_factory, rng):
    policy = generators.policy_file(rng).encode()
    fuzzing.check_policy(policy, rng.choice(CORPUS), tmp_path_factory.mktemp("policy"))


@pytest.mark.parametrize("seed", range(3))
def test_a_fuzzed_kustomize_directory_never_breaks_the_linter(tmp_path, seed):
    """A few only: each builds with kubectl or kustomize, which takes a while."""
    import shutil

    if not (shutil.which("kubectl") or shutil.which("kustomize")):
        pytest.skip("neither kubectl nor kustomize is on PATH")
    rng = random.Random(seed)
    documents = [rng.choice(CORPUS).decode("utf-8", "replace") for _ in range(3)]
    fuzzing.check_kustomize(rng, tmp_path, documents)


@pytest.mark.parametrize("seed", range(10))
def test_the_cli_exits_0_1_or_2_on_fuzzed_input(seed):
    """Through the command line in its own process: never exit 3, never a signal."""
    rng = random.Random(seed)
    fuzzing.check_cli(fuzzing.make_input(rng, CORPUS), fuzzing.FORMATS[seed % len(fuzzing.FORMATS)])


def test_a_short_campaign_of_the_long_runner_finds_nothing():
    result = fuzzing.campaign(300, seed=20240, cli_every=0, save=None, progress=False, kustomize_every=0,
                              untrusted_every={name: 0 for name in fuzzing.UNTRUSTED})
    assert result["failures"] == 0, result["examples"]
    assert result["node-dumps"] == 75 and result["policies"] == 15, result


# The untrusted-repository surfaces (issue 31): git metadata, chart archives, repository
# configurations with limits, policies with patterns and message templates, `--fix`. Each check
# raises Bug when something from the tree ran, a budget was passed, or the tool failed.
UNTRUSTED_EXAMPLES = {"git": 25, "archive": 40, "repository-config": 60, "policy-budget": 15, "fix": 25}


@pytest.mark.parametrize("surface", sorted(UNTRUSTED_EXAMPLES))
def test_fuzzed_untrusted_repository_surfaces_never_break_the_linter(tmp_path_factory, surface):
    assert set(UNTRUSTED_EXAMPLES) == set(fuzzing.UNTRUSTED)

    @settings(max_examples=UNTRUSTED_EXAMPLES[surface], derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.randoms(use_true_random=False))
    def check(rng):
        scratch = tmp_path_factory.mktemp(surface)
        fuzzing.check_untrusted(surface, rng, scratch, CORPUS)

    check()


def test_the_long_runner_drives_every_untrusted_surface():
    result = fuzzing.campaign(40, seed=31, cli_every=0, save=None, progress=False, node_every=0, policy_every=0,
                              kustomize_every=0, untrusted_every={name: 20 for name in fuzzing.UNTRUSTED})
    assert result["failures"] == 0, result["examples"]
    assert all(result[name] == 2 for name in fuzzing.UNTRUSTED), result
