"""The docs stand alone: every module of studio/ is named in docs/architecture.md ("Every module",
one line per package), every package folder appears in its diagram, and no doc, docstring or
comment cites a file that is not in the repository (the requirements live in
docs/requirements.md, not in files outside it). Each check has its negative control."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STUDIO = REPO / "studio"
ARCH = REPO / "docs" / "architecture.md"

# files a reader of this repository does not have: cited by name, they point nowhere
OUTSIDE = re.compile(r"\.\./shared|\b(?:LEARNER|DESIGN|STORY)\.md|\b(?:LEARNER|DESIGN|STORY) §|(?<![\w/.-])seeds/")
# a path into the repository, as docs and docstrings cite them
CITED = re.compile(r"(?<![\w./$<-])((?:docs|studio|tests|scripts|packaging|benchmarks)/[\w./-]*[\w/])")
MD = re.compile(r"(?<![\w./$<-])([\w-]+\.md)\b")


def modules(root: Path = STUDIO) -> set[str]:
    """Every module under studio/ (package __init__ files and the op packages' own code aside)."""
    return {str(p.relative_to(root.parent)) for p in root.rglob("*.py")
            if p.name != "__init__.py" and "resources" not in p.relative_to(root).parts
            and "__pycache__" not in p.parts}


def listed(text: str) -> set[str]:
    """The modules docs/architecture.md's "Every module" names: lines "- `studio/pkg/`: a · b · c",
    continued on indented lines."""
    section = text[text.index("## Every module"):]
    out, pkg = set(), None
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        m = re.match(r"- `(studio/[\w/]*)`:(.*)", line)
        if m:
            pkg, rest = m[1], m[2]
        elif pkg and line.startswith("  ") and line.strip():
            rest = line
        else:
            pkg = None if not line.strip() else pkg
            continue
        out |= {f"{pkg.rstrip('/')}/{name.strip()}.py" for name in rest.split("·") if name.strip()}
    return out


def module_problems(text: str, root: Path = STUDIO) -> str | None:
    have, named = modules(root), listed(text)
    missing, stale = sorted(have - named), sorted(named - have)
    if not missing and not stale:
        return None
    return ("docs/architecture.md, \"Every module\": "
            + (f"missing {len(missing)} module(s): {', '.join(missing)}" if missing else "")
            + ("; " if missing and stale else "")
            + (f"names {len(stale)} module(s) that do not exist: {', '.join(stale)}" if stale else ""))


def test_every_module_is_named_in_the_architecture_doc():
    problem = module_problems(ARCH.read_text())
    assert problem is None, problem


def test_the_module_check_names_exactly_the_missing_module(tmp_path):
    pkg = tmp_path / "studio" / "engine" / "widgets"
    pkg.mkdir(parents=True)
    (pkg / "gadget.py").write_text("")
    (tmp_path / "studio" / "cli.py").write_text("")
    text = "## Every module\n\n- `studio/`: cli\n- `studio/engine/old/`: gone\n"
    assert module_problems(text, tmp_path / "studio") == (
        'docs/architecture.md, "Every module": missing 1 module(s): studio/engine/widgets/gadget.py; '
        "names 1 module(s) that do not exist: studio/engine/old/gone.py")
    assert module_problems(text.replace("- `studio/engine/old/`: gone", "- `studio/engine/widgets/`: gadget"),
                           tmp_path / "studio") is None


def test_every_package_folder_appears_in_the_diagram():
    text = ARCH.read_text()
    diagram = text[text.index("```"):text.index("```", text.index("```") + 3)]
    folders = sorted({p.parent for p in STUDIO.rglob("*.py") if "resources" not in p.relative_to(STUDIO).parts
                      and "__pycache__" not in p.parts and p.parent != STUDIO})
    absent = [str(f.relative_to(REPO)) for f in folders
              if f"{f.name}/" not in diagram and str(f.relative_to(REPO)) not in diagram]
    assert absent == [], f"docs/architecture.md's diagram does not show: {', '.join(absent)}"


def texts():
    """The repository's own prose: docs, the README, and every source, workflow and op file of the product."""
    yield from sorted((REPO / "docs").rglob("*.md"))
    yield REPO / "README.md"
    yield REPO / "pyproject.toml"
    for ext in ("py", "toml", "wgsl", "md", "lark", "sh", "spec"):
        yield from (p for p in sorted(STUDIO.rglob(f"*.{ext}")) if "__pycache__" not in p.parts)
    for folder in ("scripts", "packaging"):
        yield from (p for p in sorted((REPO / folder).rglob("*")) if p.is_file() and p.suffix in (".sh", ".py", ".spec", ".md"))


def citation_problems(path: Path, text: str) -> list[str]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in OUTSIDE.finditer(line):
            out.append(f"{path.relative_to(REPO)}:{n}: cites {m[0]!r}, which is not in the repository")
        for m in CITED.finditer(line):
            cited = m[1].rstrip("./")
            if line[m.end():m.end() + 1] in ("*", "<", "{") or not cited:
                continue                                  # a pattern, not a file
            if not (REPO / cited).exists():
                out.append(f"{path.relative_to(REPO)}:{n}: cites {cited}, which does not exist")
        for m in MD.finditer(line):
            if OUTSIDE.search(m[1]):
                continue                                  # named above
            if not ((REPO / m[1]).exists() or (REPO / "docs" / m[1]).exists() or (path.parent / m[1]).exists()):
                out.append(f"{path.relative_to(REPO)}:{n}: cites {m[1]}, which does not exist")
    return out


def test_no_doc_or_docstring_cites_a_file_outside_the_repository():
    problems = [p for path in texts() if path.is_file() for p in citation_problems(path, path.read_text(errors="replace"))]
    assert problems == [], "\n".join(problems)


def test_the_citation_check_finds_each_kind():
    here = REPO / "docs" / "x.md"
    text = ("see ../shared/LEARNER.md §6\nDESIGN.md sketched it\nSTORY §15\nseeds/000.txt\n"
            "docs/nowhere.md and studio/engine/nowhere.py\nmissing.md\n"
            "fine: docs/workflows.md, studio/engine/arrays.py, docs/bf16.md, resources/ops/core/conv1d_bf16*\n")
    found = citation_problems(here, text)
    assert [p.split(":")[1] for p in found] == ["1", "1", "2", "3", "4", "5", "5", "6"], found
    assert "docs/nowhere.md" in found[5] and "studio/engine/nowhere.py" in found[6] and "missing.md" in found[7]
