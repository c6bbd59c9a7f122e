"""The shipped content sits at the top of the tree (resources/, shaders/) and is mapped into the
wheel as package data of studio (studio/resources, studio/resources/shaders): the package list in
pyproject.toml names every code package under studio/ and the two data packages, and a checkout
finds its resources beside studio/."""
import subprocess
import tomllib
from pathlib import Path

from setuptools import find_packages

from studio.engine import resources

REPO = Path(__file__).resolve().parents[2]
DATA = {"studio.resources": "resources", "studio.resources.shaders": "shaders"}


def declared() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_the_wheel_carries_every_code_package_and_the_two_data_folders():
    conf = declared()
    code = set(find_packages(str(REPO), include=["studio", "studio.*", "scellis", "scellis.*"]))   # scellis: the public API
    assert set(conf["packages"]) == code | set(DATA), sorted(set(conf["packages"]) ^ (code | set(DATA)))
    assert conf["package-dir"] == DATA
    assert all((REPO / folder).is_dir() and not (REPO / "studio" / folder).exists() for folder in DATA.values())


def test_a_checkout_finds_the_top_level_folders():
    root, shaders = resources.resource_roots()
    assert (root, shaders) == (REPO / "resources", REPO / "shaders")
    assert (resources.GRAMMARS / "signature.lark").is_file() and (shaders / "bf16.wgsl").is_file()
    assert (REPO / "examples").resolve() == resources.EXAMPLES.resolve()


def test_a_new_package_missing_from_the_list_is_found(tmp_path):
    """The check above fails for a package someone adds under studio/ and forgets to declare."""
    (tmp_path / "studio" / "extra").mkdir(parents=True)
    for d in ("studio", "studio/extra"):
        (tmp_path / d / "__init__.py").write_text("")
    found = set(find_packages(str(tmp_path), include=["studio", "studio.*"]))
    assert found - set(declared()["packages"]) == {"studio.extra"}


def broken_links(root: Path) -> list[str]:
    tracked = subprocess.run(["git", "ls-files", "-s"], cwd=root, capture_output=True, text=True, check=True).stdout
    links = [line.split("\t", 1)[1] for line in tracked.splitlines() if line.startswith("120000 ")]
    return [p for p in links if not (root / p).exists()]


def test_every_link_in_the_tree_resolves(tmp_path):
    """A move leaves no link behind (the icon in packaging/ and examples/ point into resources/);
    the control: a link whose target moved away is named."""
    assert broken_links(REPO) == []
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "gone").symlink_to("nowhere/icon.svg")
    subprocess.run(["git", "add", "gone"], cwd=tmp_path, check=True)
    assert broken_links(tmp_path) == ["gone"]
