"""The rules' rooms (issue 33, "Folders show the pipeline"): `checks/manifest/` holds the rules
that read the manifests' model, `checks/node/` the rules that read node dumps, and each room's
`phrases` module tells its rules' stories. A check asks the model and passes names; no check
module writes a sentence about what traffic does (this scan replaced the one of test_datapath)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kubelint_ports import checks

PACKAGE = Path(__file__).resolve().parents[1] / "kubelint_ports"
CHECKS_DIR = PACKAGE / "checks"
ROOMS = {"manifest": "cluster", "node": "node-snapshot"}  # room -> what its rules read

# --- (a) each room holds the rules of one input ------------------------------------------------------


def test_every_check_lives_in_the_room_of_what_it_reads():
    wrong = []
    for name, check in checks.CHECKS.items():  # imports every family
        module = check.function.__module__.removeprefix("kubelint_ports.checks.")
        room = module.partition(".")[0]
        if room not in ROOMS or "." not in module:
            wrong.append(f"{name}: {check.function.__module__} is in no room ({sorted(ROOMS)})")
        elif check.reads != ROOMS[room]:
            wrong.append(f"{name}: reads {check.reads!r}, but lives in checks/{room}/ (rules reading {ROOMS[room]!r})")
    assert not wrong, "\n".join(wrong)


def test_every_placement_names_the_room_of_what_it_reads():
    """The same, said by the policies alone (what `lint` reads without importing a check)."""
    wrong = [f"{name}: module {place.module} reads {place.reads!r}"
             for name, place in checks.placements().items()
             if ROOMS.get(place.module.partition(".")[0]) != place.reads]
    assert not wrong, "\n".join(wrong)


def test_checks_holds_only_the_registry_and_its_rooms():
    top = sorted(path.name for path in CHECKS_DIR.glob("*.py"))
    assert top == ["__init__.py"], f"modules outside a room: {top}"
    assert sorted(path.name for path in CHECKS_DIR.iterdir() if path.is_dir() and path.name != "__pycache__") \
        == sorted(ROOMS)
    for room in ROOMS:
        face = ast.parse((CHECKS_DIR / room / "__init__.py").read_text(encoding="utf-8"))
        assert ast.get_docstring(face), f"checks/{room}/__init__.py says what the room holds"


# --- (b) no check tells a traffic story of its own ---------------------------------------------------

# Words of a packet's fate: the datapath's own (rule targets, iptables verbs, who takes what),
# then how a story says what a port does on nodes. These wordings live in the phrase modules.
TRAFFIC_WORDS = ("DNAT", "SNAT", "masquerad", "MASQUERADE", "REJECT", "DROP", "ACCEPT", "conntrack",
                 "takes the traffic", "take the traffic", "receives", "never sees", "gets it", " wins", "kube-proxy's rules",
                 "kube-proxy refuses", "connection refused", "times out", "captur", "shadow", "KUBE-SERVICES",
                 "KUBE-NODEPORTS", "CNI-HOSTPORT-DNAT", "PREROUTING", "hostPort rule", "traffic of",
                 # what a port does on the nodes
                 "collide", "on every node", "packet", "traffic", "forwarded", "routes nowhere", "reach a port")
# String literals of check modules that may hold such words: names of things, not stories.
ALLOWED_LITERALS = {
    ("node/kube_proxy.py", "nat KUBE-SERVICES masquerade"),  # a finding's field path in the dump (its identity)
    ("node/host_ports.py", "DNAT to "),  # related places' labels: the rule a line holds
    ("node/listeners.py", "hostPort DNAT "),
    ("node/host_ports.py", "live entry shadowed: "),
}
PHRASERS = (PACKAGE / "model" / "datapath" / "phrases.py", PACKAGE / "model" / "datapath" / "effects.py",
            CHECKS_DIR / "manifest" / "phrases.py", CHECKS_DIR / "manifest" / "network_phrases.py",
            CHECKS_DIR / "manifest" / "scheduling_phrases.py",
            CHECKS_DIR / "node" / "phrases.py")
# The generic schema check: its words are the user's policies'.
NOT_SCANNED = {CHECKS_DIR / "manifest" / "port_schema.py", *PHRASERS}


def story_literals(path: Path):
    """Every prose string literal (with a space) of a module, f-string parts included, docstrings
    left out (they say why, to developers)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value \
                and id(node) not in docstrings:
            yield node.lineno, node.value


def traffic_wording(path: Path, name: str) -> list[str]:
    found = []
    for line, text in story_literals(path):
        if (name, text) in ALLOWED_LITERALS:
            continue
        words = [word for word in TRAFFIC_WORDS if word in text]
        if words:
            found.append(f"{name}:{line}: {words} in {text!r}")
    return found


CHECK_MODULES = sorted(path for path in CHECKS_DIR.rglob("*.py") if path not in NOT_SCANNED)


def test_the_scan_reads_every_rule_module():
    scanned = {str(path.relative_to(CHECKS_DIR)) for path in CHECK_MODULES}
    assert {"manifest/host_ports.py", "node/host_ports.py", "manifest/network_config.py"} <= scanned


@pytest.mark.parametrize("path", CHECK_MODULES, ids=[str(path.relative_to(CHECKS_DIR)) for path in CHECK_MODULES])
def test_no_check_tells_a_traffic_story_of_its_own(path):
    """Checks ask the model and pass names; every sentence about a packet's fate is written in a
    phrase module (`model/datapath/phrases.py`, `checks/*/phrases.py`)."""
    offenders = traffic_wording(path, str(path.relative_to(CHECKS_DIR)))
    assert not offenders, "traffic wording outside the phrase modules:\n" + "\n".join(offenders)


def test_the_scan_catches_a_story_told_in_a_check(tmp_path):
    """The scan can fail: the sentence KP102 once wrote in its check is found."""
    probe = tmp_path / "probe.py"
    probe.write_text('def message(port):\n    return (f"a Service that gets nodePort {port} later, even one "\n'
                     '            f"allocated at random, collides with it on every node this pod runs on.")\n')
    found = traffic_wording(probe, "probe.py")
    assert len(found) == 1 and "['collide', 'on every node']" in found[0], found


def test_the_phrasers_hold_the_words_the_scan_looks_for():
    """The scan is not vacuous: the phrase modules use its vocabulary."""
    text = "".join(value for path in PHRASERS for _, value in story_literals(path))
    assert all(word in text for word in ("DNAT", "REJECT", "takes the traffic", "never sees", "conntrack",
                                         "collide", "on every node", "packet", "forwarded"))
