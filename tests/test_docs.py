"""The README is a front door and the configuration reference is complete: what the
docs promise about themselves, checked. (``make test`` also builds the site with
``mkdocs build --strict``: a broken link, page or include fails it.)"""

import re
import subprocess
import sys
from pathlib import Path

from stack import commands

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_is_at_most_300_lines_and_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert readme.count("\n") <= 300
    first_block = readme.split("```")[1]
    assert "make demo" in first_block and "make test" in first_block
    assert readme.index("```") < readme.index("\n## ")  # before any section


def _read_by_the_settings() -> set[str]:
    modules = [*(ROOT / "flashsale/settings").glob("*.py"), ROOT / "stack/config.py"]
    source = "".join(p.read_text() for p in modules)
    return set(re.findall(r'env(?:\.\w+)?\(\s*"([A-Z][A-Z0-9_]+)"', source))


def test_every_variable_the_settings_read_is_in_the_configuration_reference_and_no_other():
    # The apps' and the launcher's, before the variables of Docker's nginx (below).
    reference = (ROOT / "docs/reference/configuration.md").read_text().split("{#nginx-render}")[0]
    # The names in the first column of the reference's tables: what it documents.
    first_cells = [line.split("|")[1] for line in reference.splitlines() if line.startswith("| <a id=")]
    # (A default follows its name in brackets: "[`WARNING`]" is no name.)
    documented = {name for cell in first_cells for name in re.findall(r"(?<!\[)`([A-Z][A-Z0-9_]{2,})`", cell)}
    read = _read_by_the_settings()
    assert len(read) > 50  # the pattern still finds the settings' reads
    assert not read - documented, f"read by the settings, not documented: {sorted(read - documented)}"
    assert not documented - read, f"documented, read by no setting: {sorted(documented - read)}"


def test_every_results_page_shows_a_table_written_by_the_command_that_measured_it():
    """Figures are pasted by the command that measured them: each results page
    includes at least one file a benchmark's ``--docs`` wrote, and every file it
    includes is one of those (headed by its command and commit)."""
    include = re.compile(r'^--8<-- "(docs/results/measured/[^"]+)"$', re.MULTILINE)
    pages = sorted((ROOT / "docs" / "results").glob("*.md"))
    assert pages
    for page in pages:
        included = include.findall(page.read_text())
        assert included, f"{page.name} includes no measured file"
        for name in included:
            first = (ROOT / name).read_text().splitlines()[0]
            provenance = r"Measured by `python -m [\w.]+[^`]*` at commit `[0-9a-f]{4,}"
            assert re.match(provenance, first), (name, first)


def test_the_commands_reference_is_the_table_the_makefile_writes():
    page = commands.PAGE.read_text()
    assert page == commands.page_written(page, commands.MAKEFILE.read_text()), (
        "the Makefile or a management command changed: `make docs` (python -m stack commands) writes "
        "the page again")
    ours = sorted(path.stem for path in ROOT.glob("*/management/commands/[!_]*.py"))
    assert len(ours) > 5 and re.findall(r"^### `manage.py (\w+)`", page, re.MULTILINE) == ours
    documented = re.findall(r"^\| `make ([a-z-]+)`", page, re.MULTILINE)
    help_lines = re.findall(r"^([a-z][a-z-]*):[^#]*## ", commands.MAKEFILE.read_text(), re.MULTILINE)
    assert documented == help_lines and len(documented) > 30  # every target make help lists, once


def test_a_targets_row_says_its_detail_lines_or_else_its_help_line():
    makefile = """#: the long word,
#: with a [link](x.md)
up: install  ## start
\tcommand

install-test:
#: not this one's: a recipe line came between
\tcommand
down:  ## stop it
"""
    assert commands.targets(makefile) == [
        commands.Target("up", "start", "the long word, with a [link](x.md)"),
        commands.Target("down", "stop it", "")]
    assert commands.table(commands.targets(makefile)).splitlines()[2:] == [
        "| `make up` | the long word, with a [link](x.md) |", "| `make down` | stop it |"]


def test_every_make_command_the_readme_and_docs_name_is_a_target():
    targets = set(re.findall(r"^([a-z][a-z-]*):", commands.MAKEFILE.read_text(), re.MULTILINE))
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "deploy").rglob("*.md")]
    named = {(page.name, name) for page in pages
             for name in re.findall(r"`make ([a-z][a-z-]*)", page.read_text())}
    assert len(named) > 30
    assert not {pair for pair in named if pair[1] not in targets}


def test_the_sources_page_names_every_scenario_each_article_has():
    """Each source article's entry lists exactly the scenarios whose source names it,
    and no page says "seed" for an article any more: a reader has no seeds, only the
    sources page."""
    from scenarios.catalog import CATALOG

    page = (ROOT / "docs/reference/sources.md").read_text()
    entries = re.findall(r"\{#article-(\d{3})\}(.*?)Reproduced by: ([^.]*)\.", page, re.DOTALL)
    assert len(entries) == 5
    for number, _, listed in entries:
        named = [s.id for s in CATALOG.values() if re.search(rf"\b{number}\b", s.seed)]
        assert listed.split(", ") == sorted(named, key=lambda i: int(i[1:])), number
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    said = [(p.name, m) for p in pages for m in re.findall(r"\b[Ss]eeds? \d{3}", p.read_text())]
    assert not said


def test_every_variable_nginx_render_reads_is_documented_with_an_anchor():
    script = (ROOT / "nginx/render.sh").read_text()
    read = set(re.findall(r"\$\{([A-Z][A-Z_]+)[:}]", script)) | set(re.findall(r"\$([A-Z][A-Z_]+)\b", script))
    section = (ROOT / "docs/reference/configuration.md").read_text().split("{#nginx-render}")[1]
    documented = set(re.findall(r"^\| <a id=\"[^\"]+\"></a>`([A-Z][A-Z_]+)`", section, re.MULTILINE))
    assert len(read) >= 12 and read == documented, (sorted(read - documented), sorted(documented - read))


def test_every_setting_in_the_configuration_reference_has_its_anchor():
    reference = (ROOT / "docs/reference/configuration.md").read_text()
    for row in (line for line in reference.splitlines() if line.startswith("| <a id=")):
        cell = row.split("|")[1]
        names = re.findall(r"(?<!\[)`([A-Z][A-Z0-9_]{2,})`", cell)
        anchors = [a.removeprefix("render-") for a in re.findall(r'<a id="([^"]+)"></a>', cell)]
        assert names and anchors == names, row
    assert not [line for line in reference.splitlines() if line.startswith("| `")]  # a row without one


def test_the_purchase_file_by_file_names_functions_its_files_hold():
    """The README's walk through a purchase names each file and, after it, the
    functions the purchase runs there: each is there, by that name."""
    import importlib

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### One purchase, file by file")[1].split("\n## ")[0]
    steps = re.findall(r"\*\*`([\w/]+)\.py`\*\*((?: · `\w+`)+)", section)
    assert len(steps) >= 12, steps
    for path, names in steps:
        module = importlib.import_module(path.replace("/", "."))
        for name in re.findall(r"`(\w+)`", names):
            assert callable(getattr(module, name, None)), f"{path}.py has no {name}"
    for lua in re.findall(r"`([\w/]+\.lua)`", section):
        assert (ROOT / lua).exists(), lua


def test_the_results_index_says_how_many_commits_behind_head_each_measured_file_is():
    from stack import mkdocs_hooks

    assert mkdocs_hooks.MARK in (ROOT / "docs/results/index.md").read_text()
    table = mkdocs_hooks.ages().splitlines()[2:]
    measured = sorted((ROOT / "docs/results/measured").glob("*.md"))
    assert [row.split("|")[1].strip().strip("`") for row in table] == [p.name for p in measured]
    assert all(row.split("|")[5].strip().isdigit() for row in table), table  # a clone has the history
    names = {name for name, _ in mkdocs_hooks.FEATURES}
    for row in table:
        before = row.split("|")[6].strip()
        assert before == "none" or set(before.split(", ")) <= names, row


def test_a_file_measured_before_a_feature_says_so():
    from stack import mkdocs_hooks

    first = min((commit for _, commit in mkdocs_hooks.FEATURES),
                key=lambda commit: int(subprocess.run(["git", "rev-list", "--count", commit], cwd=ROOT,
                                                      capture_output=True, text=True).stdout))
    everything = ", ".join(name for name, _ in mkdocs_hooks.FEATURES)
    assert mkdocs_hooks.predates(f"{first}~1") == everything
    assert mkdocs_hooks.predates("HEAD") == "none"
    assert mkdocs_hooks.predates("0" * 40) == "?"  # no such commit: git cannot say


def test_the_strict_build_refuses_a_broken_link_and_would_not_were_it_quiet(tmp_path):
    """``stack docs`` builds with ``DOCS_BUILD``. MkDocs' strict mode counts only the
    warnings it shows: ``--quiet`` hid 13 broken links from it."""
    from stack.control import DOCS_BUILD

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/index.md").write_text("# A page\n\n[a link](no-such-page.md)\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: t\nstrict: true\n")
    env = {"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"}

    def build(*extra: str) -> int:
        return subprocess.run([sys.executable, *DOCS_BUILD, *extra, "--site-dir", str(tmp_path / "site")],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120).returncode

    assert build() != 0
    assert build("--quiet") == 0  # the trap: strict, quiet, and the broken link passes


def _measured_under(monkeypatch, tmp_path, name: str, **environment: str) -> str:
    """A measured file ``name`` written as a benchmark under ``environment`` writes it."""
    from loadtest import measured

    monkeypatch.setattr(measured, "MEASURED", tmp_path)
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    with measured.recorded(name.removesuffix(".md"), "python -m benchmarks.x --docs", write=True):
        print("| row | req/s |\n|---|---:|\n| ping | 1,000 |")
    for variable in environment:
        monkeypatch.delenv(variable)
    return name


def test_a_page_including_a_file_measured_under_other_settings_is_flagged_and_the_build_warned(
        monkeypatch, tmp_path, caplog):
    from loadtest.measured import settings_not_default, settings_unrecorded
    from stack import mkdocs_hooks

    monkeypatch.setattr(mkdocs_hooks, "MEASURED", tmp_path)
    for variable in ("FLASHSALE_SERVER", "FLASHSALE_STRATEGY", "WORKERS", "REDIS_GATE_APPENDFSYNC",
                     "PAYPROVIDER_WORKERS"):
        monkeypatch.delenv(variable, raising=False)
    today = _measured_under(monkeypatch, tmp_path, "today.md")
    other = _measured_under(monkeypatch, tmp_path, "other.md", FLASHSALE_SERVER="granian",
                            REDIS_GATE_APPENDFSYNC="everysec")
    (tmp_path / "old.md").write_text(
        "Measured by `python -m benchmarks.x` at commit `abc1234` on 2026-01-01.\n\n| row |\n")
    # Written before payprovider_workers joined the settings a file records.
    before = (tmp_path / today).read_text().replace(" `payprovider_workers=4`", "")
    (tmp_path / "before.md").write_text(before)
    names = (today, other, "old.md", "before.md")
    page = "".join(f'--8<-- "docs/results/measured/{name}"\n\n' for name in names)

    with caplog.at_level("WARNING", logger="mkdocs.hooks.measured"):
        flagged = mkdocs_hooks.flagged(page, "concepts/x.md")
    assert flagged.count("!!! warning") == 1
    said = "server granian (today gunicorn); redis_gate_appendfsync everysec (today always)"
    assert f"!!! warning \"Measured under other settings than today's defaults\"\n    {said}:" in flagged
    assert [r.getMessage() for r in caplog.records] == [
        f"concepts/x.md includes other.md, measured under other settings than today's defaults: {said}; "
        "run its command again"]
    assert [mkdocs_hooks.settings_said(settings_not_default(text := (tmp_path / n).read_text()),
                                       settings_unrecorded(text))
            for n in names] == \
        ["the defaults", said, "not recorded", "payprovider_workers not recorded"]


def test_an_included_file_outside_docs_links_from_the_page_that_includes_it():
    from stack import mkdocs_hooks

    source, page = ROOT / "deploy/k8s/README.md", ROOT / "docs/guides/kubernetes.md"
    text = ("[metrics](../../docs/reference/metrics.md#alerts), "
            "[`flashsale/serve.py`](../../flashsale/serve.py), "
            "[the start](../../flashsale/settings/processes.py), [Stripe](https://stripe.com), [up](#up)")
    assert mkdocs_hooks.linked_from(text, source, page) == (
        "[metrics](../reference/metrics.md#alerts), `flashsale/serve.py`, "
        "the start (`flashsale/settings/processes.py`), [Stripe](https://stripe.com), [up](#up)")


def test_a_count_of_the_scenarios_on_a_page_is_the_catalogs():
    from scenarios.catalog import CATALOG

    pages = [page for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
             if "measured" not in page.parts and page.name != "changelog.md"]
    counts = [(page.name, int(n)) for page in pages
              for n in re.findall(r"\b(\d+) (?:scenarios|pitfalls)\b", page.read_text())]
    assert all(n == len(CATALOG) for _, n in counts), (len(CATALOG), counts)


def test_the_strategy_tables_describe_redissons_lock_as_the_string_its_scripts_write():
    """``locking/tests/test_redisson.py`` holds the code to ``"<count>:<holder>"`` (a
    Redis string, not a hash); this holds the tables that describe it to the same."""
    script = (ROOT / "locking/backends/redis/held_by.lua").read_text()
    assert "string.match(value, '^(%d+):(.+)$')" in script  # "<count>:<holder>"
    for page in (ROOT / "README.md", ROOT / "docs/strategies/index.md"):
        [row] = [line for line in page.read_text().splitlines() if re.match(r"\| \[?`redisson`", line)]
        assert 'one Redis string `"<count>:<holder>"`' in row and "hash" not in row, (page.name, row)


def test_no_page_or_module_calls_a_source_article_a_seed():
    """The articles are named as the sources page names them ("article 003", linked
    there on the pages), never by the project's first word for them; the changelog
    and the decisions keep the words of their day."""
    history = {"CHANGELOG.md", "docs/changelog.md", "docs/development/decisions.md"}
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    seed = re.compile(r"\bseeds? \d{3}\b", re.IGNORECASE)
    found = [f"{name}:{n}" for name in tracked
             if name.endswith((".py", ".md", ".html", ".js", ".lua", ".sql", ".txt")) and name not in history
             for n, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1)
             if seed.search(line)]
    assert len(tracked) > 500 and not found, found
