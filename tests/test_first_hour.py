"""The first hour with the project (issue 35): the README's test command passes on a machine with
or without the system tools, a missing tool skips with one sentence naming its package, the README
names a quick subset, no message sends users to a package index that has no release yet, and
shell completion offers the rules where an option takes them."""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import external_tools
from external_tools import missing_tools_reason, require_tools

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
QUICK = 'python -m pytest -q -m "not lab and not browser and not slow"'


@pytest.fixture
def bare_machine(tmp_path, monkeypatch):
    """A PATH with nothing on it, and no system directory holding the tool either."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(external_tools, "SYSTEM_BIN_DIRECTORIES", ())
    monkeypatch.delenv("CI", raising=False)
    return empty


# --- a missing tool: one sentence naming its package --------------------------------------------


def test_a_missing_tool_is_one_sentence_naming_its_package(bare_machine):
    assert (missing_tools_reason(("conntrack", "conntrack"), who="the datapath lab")
            == "the datapath lab needs `conntrack`, which is not installed: apt-get install conntrack")


def test_several_missing_tools_share_one_install_command(bare_machine):
    assert (missing_tools_reason(("node", "nodejs"), ("npm", "npm"))
            == "this test needs `node` and `npm`, which are not installed: apt-get install nodejs npm")
    assert (missing_tools_reason(("iptables", "iptables"), ("iptables-save", "iptables"), ("nft", "nftables"))
            == "this test needs `iptables`, `iptables-save` and `nft`, which are not installed: "
               "apt-get install iptables nftables")


def test_a_tool_off_path_says_where_it_is(bare_machine, tmp_path, monkeypatch):
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    (sbin / "conntrack").write_text("#!/bin/sh\n")
    (sbin / "conntrack").chmod(0o755)
    monkeypatch.setattr(external_tools, "SYSTEM_BIN_DIRECTORIES", (str(sbin),))
    assert (missing_tools_reason(("conntrack", "conntrack"), ("nft", "nftables"), who="the datapath lab")
            == f"the datapath lab needs `nft`, which is not installed: apt-get install nftables; and `conntrack`, "
               f"which is installed in {sbin} but {sbin} is not on PATH (PATH={bare_machine})")


def test_a_tool_on_path_is_not_missing(bare_machine):
    tool = bare_machine / "conntrack"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert missing_tools_reason(("conntrack", "conntrack")) is None
    require_tools(("conntrack", "conntrack"))  # no skip


def test_require_tools_skips_with_the_sentence_and_fails_under_ci(bare_machine, monkeypatch):
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_tools(("npm", "npm"), who="installing the SARIF multitool")
    assert str(skipped.value.msg) == "installing the SARIF multitool needs `npm`, which is not installed: apt-get install npm"
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        require_tools(("npm", "npm"))
    assert "this test needs `npm`, which is not installed: apt-get install npm" in str(failed.value.msg)


def test_the_lab_names_every_missing_tool_by_the_real_path_lookup(bare_machine, monkeypatch):
    """Not simulated (tests/test_datapath.py simulates the lookup): an empty PATH, the real lookup."""
    sys.path.insert(0, str(ROOT / "tests" / "lab"))
    import netlab

    monkeypatch.setattr(netlab.sys, "platform", "linux")
    monkeypatch.setattr(netlab.os, "geteuid", lambda: 0)
    reason = netlab.missing_requirements()
    assert reason == ("the datapath lab needs `ip`, `iptables`, `iptables-save`, `iptables-restore`, `nft`, `ipset`, "
                      "`ss`, `sysctl` and `conntrack`, which are not installed: "
                      "apt-get install iproute2 iptables nftables ipset procps conntrack")
    assert not re.search(r"needs `[^`]+` is", reason)


# --- the quick subset --------------------------------------------------------------------------


def load_conftest(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Item(SimpleNamespace):
    def add_marker(self, marker) -> None:
        self.markers.append(marker.name)


def test_lab_and_browser_tests_are_marked_and_the_markers_registered():
    lab = load_conftest(ROOT / "tests" / "lab" / "conftest.py", "lab_conftest_under_test")
    top = load_conftest(ROOT / "tests" / "conftest.py", "top_conftest_under_test")
    items = [Item(path=ROOT / "tests" / "lab" / "test_lab_datapath.py", fixturenames=["lab_ready"], markers=[]),
             Item(path=ROOT / "tests" / "test_html_browser.py", fixturenames=["browser"], markers=[]),
             Item(path=ROOT / "tests" / "test_hostile_reports.py", fixturenames=["browser_available"], markers=[]),
             Item(path=ROOT / "tests" / "test_datapath.py", fixturenames=["tmp_path"], markers=[])]
    lab.pytest_collection_modifyitems(None, items)
    top.pytest_collection_modifyitems(None, items)
    assert [item.markers for item in items] == [["lab"], ["browser"], ["browser"], []]
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert {marker.split(":")[0] for marker in markers} >= {"lab", "browser", "slow"}
    assert all(marker.split(":", 1)[1].strip() for marker in markers)  # each with its description


def module_marks(path: Path) -> set[str]:
    """The `pytest.mark.NAME`s of a test module's `pytestmark` (one mark or a list), read without
    running the module."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == "pytestmark" for target in node.targets):
            return {found.attr for found in ast.walk(node.value)
                    if isinstance(found, ast.Attribute) and isinstance(found.value, ast.Attribute)
                    and found.value.attr == "mark"}
    return set()


@pytest.mark.parametrize("name", ["test_action", "test_precommit", "test_new_rule", "test_fuzz", "test_hostile",
                                  "test_hostile_budgets"])
def test_the_slowest_modules_are_left_out_of_the_quick_subset(name):
    assert "slow" in module_marks(ROOT / "tests" / f"{name}.py")


@pytest.mark.parametrize("name", ["test_policies", "test_snapshots", "test_cli", "test_report_formats"])
def test_rules_policies_snapshots_the_cli_and_formats_stay_in_the_quick_subset(name):
    assert "slow" not in module_marks(ROOT / "tests" / f"{name}.py")


def test_the_readme_names_the_quick_subset():
    assert README.count(QUICK) >= 1
    assert "python -m pytest -q\n" in README  # the whole suite stays the README's test command


# --- no package index before the first release; the README's Action as docs/integrations.md's ---


def test_no_helm_engine_names_an_install_that_works_before_the_first_release(monkeypatch):
    from kubelint_ports.engine import LintOptions, lint_paths
    from kubelint_ports.loading.helm import charts

    monkeypatch.setattr(charts, "in_process_engine", lambda: None)
    monkeypatch.setenv("PATH", "")
    report = lint_paths(["tests/charts/web"], LintOptions())
    message = report.diagnostics[0].message
    assert "pip install '.[helm]'" in message
    assert "pip install 'kubelint-ports[helm] @ git+https://github.com/kubelint-ports/kubelint-ports@COMMIT'" in message
    assert "pip install 'kubelint-ports[helm]'" not in message  # PyPI has no release yet


def upload_condition(text: str) -> str:
    conditions = re.findall(r"- uses: github/codeql-action/upload-sarif@v\d+\n(?:\s+#.*\n)*\s+(if: .*)\n", text)
    assert len(conditions) == 1, conditions
    return conditions[0]


def test_the_readme_action_skips_the_upload_on_pull_requests_from_forks():
    integrations = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    condition = upload_condition(README)
    assert condition == upload_condition(integrations)
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition


def test_the_readme_does_not_name_incidents_by_number():
    assert not re.search(r"incident 0\d", README, re.IGNORECASE)


# --- shell completion: rule ids and names --------------------------------------------------------


def completions(*words: str) -> list[str]:
    """What the program offers for the last of `words`, asked as bash asks (typer's completion
    variables: the program reads them and prints one value a line)."""
    from kubelint_ports.cli import make_app

    environment = {"_KUBELINT_PORTS_COMPLETE": "complete_bash",
                   "COMP_WORDS": " ".join(("kubelint-ports", *words)), "COMP_CWORD": str(len(words))}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environment.items():
            patch.setenv(name, value)
        output = io.StringIO()
        patch.setattr(sys, "stdout", output)
        with pytest.raises(SystemExit) as done:
            make_app()(prog_name="kubelint-ports", args=[])
    assert done.value.code == 0
    return output.getvalue().splitlines()


def takes(command: str, option: str) -> bool:
    import typer

    from kubelint_ports.cli import make_app

    return any(option in param.opts for param in typer.main.get_command(make_app()).commands[command].params)


def test_explain_completes_rule_names_and_ids():
    assert completions("explain", "host-port-c") == ["host-port-conflict"]
    assert completions("explain", "KP30")[:2] == ["KP301", "KP302"]
    assert completions("explain", "kp101") == ["kp101"]  # ids in any case, as explain takes them
    offered = completions("explain", "")
    assert "KP101" in offered and "host-port" in offered


@pytest.mark.parametrize("option", ["--select", "--ignore"])
@pytest.mark.parametrize("command", ["lint", "ports", "node", "config"])
def test_select_and_ignore_complete_rules_after_a_comma(command, option):
    assert takes(command, option)
    assert completions(command, option, "host-port-con") == ["host-port-conflict"]
    assert completions(command, option, "KP101,host-port-con") == ["KP101,host-port-conflict"]
    assert completions(command, option, "KP10") == ["KP101", "KP102", "KP103", "KP104", "KP105", "KP106"]


def test_completion_offers_only_what_the_rule_options_take():
    from kubelint_ports.cli_options import rule_completions
    from kubelint_ports.policies import builtin_policies, find_policy

    offered = rule_completions("")
    assert len(offered) == 2 * len(builtin_policies())
    assert all(find_policy(value) is not None for value, _ in offered)
    assert all(help for _, help in offered)
