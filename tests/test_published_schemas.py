"""The schemas published for editors (schemas/ at the repository's top; docs/configuration.md,
"Your editor"): generated from the package's, which the tool validates with, never stale; every
configuration and policy in the repository and its docs passes them under check-jsonschema, and a
wrong key is refused by check-jsonschema and by the tool alike."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubelint_ports.config import ConfigError, load_config
from kubelint_ports.docs import PUBLISHED_SCHEMAS, REPOSITORY, SCHEMA_BASE_URL, published_schemas
from kubelint_ports.policies import PolicyError, validate_policy

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.slow  # runs check-jsonschema on every file: not in the quick subset

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "schemas"
PACKAGE_SCHEMAS = ROOT / "kubelint_ports" / "schemas"
CONFIG_SCHEMA = SCHEMAS / "kubelint-ports-config.schema.json"
POLICY_SCHEMA = SCHEMAS / "kubelint-ports-policy.schema.json"
CONFIG_KEYS = set(json.loads((PACKAGE_SCHEMAS / "config.schema.json").read_text(encoding="utf-8"))["properties"])
# The JSON Schema keywords draft 7 knows, and `$defs` (a JSON pointer target to any draft): editors
# whose YAML support stops at draft 7 (VS Code's YAML extension) still check every rule of these.
DRAFT_7_KEYWORDS = {
    "$schema", "$id", "$ref", "$comment", "$defs", "title", "description", "default", "examples", "readOnly",
    "writeOnly", "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "items", "additionalItems", "maxItems", "minItems", "uniqueItems",
    "contains", "maxProperties", "minProperties", "required", "properties", "patternProperties",
    "additionalProperties", "dependencies", "propertyNames", "if", "then", "else", "allOf", "anyOf", "oneOf", "not",
    "format", "contentMediaType", "contentEncoding", "definitions",
}


def check_jsonschema() -> str:
    checker = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    if not Path(checker).exists():
        pytest.skip("this test needs `check-jsonschema`, which is not installed: pip install '.[test]'")
    return checker


def run_check(schema: Path, files: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run([check_jsonschema(), "--schemafile", str(schema), *map(str, files)],
                          check=False, capture_output=True, text=True, timeout=120)


def tracked(*patterns: str) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--", *patterns], cwd=ROOT, check=False,
                            capture_output=True, text=True)
    if listed.returncode != 0:  # an sdist: no git
        return sorted(path for pattern in patterns for path in ROOT.glob(pattern))
    return [ROOT / line for line in listed.stdout.splitlines()]


def yaml_blocks(path: Path):
    """(line, text) of each fenced ```yaml block of a Markdown file, list indentation removed."""
    text = path.read_text(encoding="utf-8")
    for match in re.finditer(r"^( *)```ya?ml\n(.*?)^\1```", text, re.DOTALL | re.MULTILINE):
        indent = len(match.group(1))
        body = "\n".join(line[indent:] for line in match.group(2).splitlines()) + "\n"
        yield text[:match.start()].count("\n") + 1, body


def is_policy(data) -> bool:
    return isinstance(data, dict) and {"id", "check"} <= set(data)


def is_config(data) -> bool:
    """A configuration: a mapping whose keys are all the configuration's (a manifest, a values file
    or a kubeconfig shares none of its keys, or at most some)."""
    return isinstance(data, dict) and bool(data) and set(map(str, data)) <= CONFIG_KEYS


ELIDED = '"..."'  # text the docs leave out (a policy's `docs.example`): a string too short for the schema


def doc_blocks(kind, tmp_path: Path) -> list[Path]:
    """The docs' YAML blocks of one kind, each written to a file named after its place, with what
    they leave out (`"..."`) filled in with a placeholder long enough for the schema."""
    written = []
    for markdown in tracked("*.md"):
        for line, body in yaml_blocks(markdown):
            body = body.replace(ELIDED, '"(left out in the docs)"')
            try:
                data = yaml.safe_load(body)
            except yaml.YAMLError:
                continue
            if kind(data):
                target = tmp_path / f"{markdown.relative_to(ROOT).as_posix().replace('/', '__')}-{line}.yaml"
                target.write_text(body, encoding="utf-8")
                written.append(target)
    return written


def repository_configs() -> list[Path]:
    """Every configuration file in the repository: `.kubelint-ports.yaml` anywhere, and any other
    tracked YAML (not a policy) that is all configuration keys."""
    found = []
    for path in tracked("*.yaml", "*.yml"):
        if path.name == ".kubelint-ports.yaml":
            found.append(path)
            continue
        try:
            documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        if len(documents) == 1 and is_config(documents[0]) and not is_policy(documents[0]):
            found.append(path)
    return found


def repository_policies() -> list[Path]:
    return tracked("policies/*.yaml", "examples/policies/*.yaml")


def test_the_published_schemas_are_up_to_date():
    expected = published_schemas()
    present = {path.name: path.read_text(encoding="utf-8") for path in SCHEMAS.glob("*")}
    stale = sorted(name for name in expected.keys() | present.keys() if expected.get(name) != present.get(name))
    assert not stale, f"schemas/ is stale ({', '.join(stale)}): run `python -m kubelint_ports.docs`"


def test_each_is_the_package_schema_byte_for_byte_but_its_id():
    for source, published in PUBLISHED_SCHEMAS.items():
        package = (PACKAGE_SCHEMAS / source).read_text(encoding="utf-8")
        text = (SCHEMAS / published).read_text(encoding="utf-8")
        differing = [(a, b) for a, b in zip(package.splitlines(), text.splitlines()) if a != b]
        assert len(package.splitlines()) == len(text.splitlines()) and len(differing) == 1, published
        assert differing[0][1].strip() == f'"$id": "{SCHEMA_BASE_URL}{published}",', differing
        assert json.loads(text)["$id"] == SCHEMA_BASE_URL + published
        assert json.loads(text)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_id_is_the_raw_url_of_the_file_in_the_projects_repository():
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    assert urls["Repository"] == REPOSITORY
    owner_name = REPOSITORY.removeprefix("https://github.com/")
    assert SCHEMA_BASE_URL == f"https://raw.githubusercontent.com/{owner_name}/main/{SCHEMAS.name}/"


def test_the_schemas_use_only_keywords_editors_on_draft_7_know():
    def keywords(node, names: set) -> set:
        if isinstance(node, dict):
            for key, value in node.items():
                names.add(key)
                children = value.values() if key in ("properties", "$defs", "patternProperties") else [value]
                for child in children:
                    keywords(child, names)
        elif isinstance(node, list):
            for item in node:
                keywords(item, names)
        return names

    for path in (CONFIG_SCHEMA, POLICY_SCHEMA):
        unknown = keywords(json.loads(path.read_text(encoding="utf-8")), set()) - DRAFT_7_KEYWORDS
        assert not unknown, f"{path.name} uses {sorted(unknown)}: an editor on draft 7 ignores them"


def test_the_schemas_are_valid_json_schemas():
    done = subprocess.run([check_jsonschema(), "--check-metaschema", str(CONFIG_SCHEMA), str(POLICY_SCHEMA)],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_configuration_in_the_repository_and_its_docs_passes(tmp_path):
    files = repository_configs()
    assert ROOT / "examples" / ".kubelint-ports.yaml" in files
    blocks = doc_blocks(is_config, tmp_path)
    assert any(path.name.startswith("docs__configuration.md-") for path in blocks), blocks
    assert any(path.name.startswith("README.md-") for path in blocks), blocks
    for path in files + blocks:  # the tool's own reading accepts each (paths are checked later, at use)
        load_config(str(path))
    done = run_check(CONFIG_SCHEMA, files + blocks)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_policy_in_the_repository_and_its_docs_passes(tmp_path):
    files = repository_policies()
    assert len(files) >= 40 and any(path.parent.name == "policies" and path.parent.parent.name == "examples"
                                    for path in files)
    blocks = doc_blocks(is_policy, tmp_path)
    assert blocks, "docs/configuration.md shows a policy"
    done = run_check(POLICY_SCHEMA, files + blocks)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_misspelled_key_is_refused_by_check_jsonschema_and_by_the_tool(tmp_path):
    config = tmp_path / ".kubelint-ports.yaml"
    config.write_text("fail-on: warning\nselcet: [KP1]\n", encoding="utf-8")
    done = run_check(CONFIG_SCHEMA, [config])
    assert done.returncode != 0
    assert "selcet" in done.stdout + done.stderr
    with pytest.raises(ConfigError) as refused:
        load_config(str(config))
    assert refused.value.line == 2 and "selcet: unknown key" in refused.value.message
    cli = subprocess.run([sys.executable, "-m", "kubelint_ports", "config", "--config", str(config)],
                         check=False, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert cli.returncode == 2 and "selcet" in cli.stderr, cli.stdout + cli.stderr


def test_a_nested_wrong_key_and_a_wrong_type_are_refused_too(tmp_path):
    nested = tmp_path / "nested.yaml"
    nested.write_text("exemptions:\n  - rule: host-port\n    reasn: typo\n", encoding="utf-8")
    typed = tmp_path / "typed.yaml"
    typed.write_text("fail-on: sometimes\n", encoding="utf-8")
    for path in (nested, typed):
        assert run_check(CONFIG_SCHEMA, [path]).returncode != 0, path.name
        with pytest.raises(ConfigError):
            load_config(str(path))


def test_a_policy_with_a_wrong_key_is_refused_by_check_jsonschema_and_by_the_tool(tmp_path):
    source = ROOT / "examples" / "policies" / "KP901-ingress-host-ports.yaml"
    policy = tmp_path / source.name
    policy.write_text(source.read_text(encoding="utf-8").replace("severity:", "severtiy:", 1), encoding="utf-8")
    done = run_check(POLICY_SCHEMA, [policy])
    assert done.returncode != 0 and "severtiy" in done.stdout + done.stderr
    with pytest.raises(PolicyError):
        validate_policy(yaml.safe_load(policy.read_text(encoding="utf-8")), policy)


def test_the_docs_show_both_ways_editors_use_them():
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = text[text.index("### Your editor"):]
    for published in PUBLISHED_SCHEMAS.values():
        assert f"# yaml-language-server: $schema={SCHEMA_BASE_URL}{published}" in section, published
    assert "# yaml-language-server: $schema=./schemas/kubelint-ports-config.schema.json" in section
    settings = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    assert settings, "the `yaml.schemas` setting"
    schemas = json.loads(settings.group(1))["yaml.schemas"]
    assert schemas[SCHEMA_BASE_URL + "kubelint-ports-config.schema.json"] == [".kubelint-ports.yaml"]
    assert SCHEMA_BASE_URL + "kubelint-ports-policy.schema.json" in schemas
