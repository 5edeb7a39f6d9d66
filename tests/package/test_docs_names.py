"""The names the documentation tells users to type exist, and the public
names exist in the documentation: the drift a user meets first when the
code moves on and a page does not (a renamed attribute, a command line
option the parser no longer takes, a public name no page mentions)."""
import importlib
import re
from pathlib import Path

import pytest

import aquaprof
from aquaprof.integrations import cli

ROOT = Path(__file__).resolve().parents[2]
# what a user reads: benchmarks.md is a log of commands and their figures
PAGES = [ROOT / "README.md"] + sorted(
    p for p in (ROOT / "docs").glob("*.md") if p.name != "benchmarks.md")

# short forms the pages use for classes a user holds
CLASSES = {"Report": "aquaprof.Report", "StageStats": "aquaprof.StageStats",
           "Profiler": "aquaprof.Profiler", "Snapshot": "aquaprof.Snapshot",
           "Comparison": "aquaprof.analysis.compare.Comparison",
           "Finding": "aquaprof.analysis.diagnose.Finding",
           "RunFigures": "aquaprof.analysis.verdict.RunFigures",
           "Camera": "aquaprof.mvs.camera.Camera"}
# the package's rooms, named without the package in front
ROOMS = ("analysis", "views", "common", "model", "record", "live",
         "integrations", "mvs", "_core", "_mvs")
DOTTED = re.compile(r"(?<![\w./-])((?:aquaprof|ap|%s)(?:\.\w+)+)"
                    % "|".join([*CLASSES, *ROOMS]))
FILE_ENDINGS = re.compile(
    r"\.(py|md|json|pyi|so|h|c|cu|svg|html|txt|toml|folded)$")
# names that need what a checkout may lack (pytest), and torch's
# `model.compile()`, which reads like the model room
NOT_CHECKED = {"aquaprof.pytest_plugin", "aquaprof.model.compile"}


def page_text() -> str:
    return "\n".join(p.read_text() for p in PAGES)


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
            break
        except ImportError:
            continue
    else:
        return False
    for i, part in enumerate(parts[k:], start=k):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        elif isinstance(obj, type) and i == len(parts) - 1:
            # an attribute each instance sets: found in the class's code
            return instance_attribute(obj, part)
        else:
            return False
    return True


def instance_attribute(cls: type, name: str) -> bool:
    import inspect
    fields = getattr(cls, "__dataclass_fields__", {})
    return name in fields or any(
        re.search(rf"\bself\.{name}\s*[:=]", inspect.getsource(c))
        for c in cls.__mro__ if c.__module__.startswith("aquaprof"))


def documented_names():
    names = set()
    for page in PAGES:
        for match in DOTTED.finditer(page.read_text()):
            name = match.group(1).rstrip(".")
            head, _, rest = name.partition(".")
            if (not rest or "__main__" in name or FILE_ENDINGS.search(name)
                    or name.endswith((".aquaprof", ".gpu_"))):
                continue
            full = ("aquaprof" if head == "ap" else CLASSES.get(head)
                    or (f"aquaprof.{head}" if head in ROOMS else head))
            full = f"{full}.{rest}"
            if not any(full == n or full.startswith(n + ".")
                       for n in NOT_CHECKED):
                names.add((page.name, name, full))
    return sorted(names)


def test_the_pages_name_some_names():
    # the pattern finds what it is meant to: a check over nothing passes
    found = {full for _, _, full in documented_names()}
    assert {"aquaprof.Report.load", "aquaprof.diff_flamegraph",
            "aquaprof.analysis.anomaly.TAIL_SHARE"} <= found


@pytest.mark.parametrize("page,name,full", documented_names())
def test_every_name_the_pages_give_exists(page, name, full):
    assert resolves(full), f"{page} names {name}, which does not exist"


@pytest.mark.parametrize("name", aquaprof.__all__)
def test_every_public_name_is_documented(name):
    text = page_text()
    assert re.search(rf"(`|\bap\.|\baquaprof\.){re.escape(name)}\b", text), \
        f"aquaprof.{name} is in __all__ but no page names it"


def command_options():
    """(command, option) for each long option a page shows with a
    command: in a `aquaprof CMD ...` span, or in the command line table's
    row for CMD."""
    commands = set(cli.parser()._subparsers._group_actions[0].choices)
    pairs = set()
    span = re.compile(r"`(?:python -m )?aquaprof (\w+)([^`]*)`")
    row = re.compile(r"^\| `(\w+)([^`]*)` \|", re.M)
    for page in PAGES:
        text = page.read_text()
        for match in [*span.finditer(text), *row.finditer(text)]:
            command, rest = match.groups()
            if command in commands:
                pairs.update((command, option) for option in
                             re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest))
    return sorted(pairs)


def test_the_pages_show_some_options():
    assert {("compare", "--measure"), ("run", "--no-sample"),
            ("history", "--add")} <= set(command_options())


def demo_help(capsys) -> str:
    # the demo parses its own arguments, past the command line's parser
    from aquaprof.integrations.demo import main
    with pytest.raises(SystemExit):
        main(["--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("command,option", command_options())
def test_every_option_the_pages_show_is_taken(command, option, capsys):
    if command == "demo":
        taken = re.findall(r"--[a-z][a-z-]*", demo_help(capsys))
    else:
        sub = cli.parser()._subparsers._group_actions[0].choices[command]
        taken = sub._option_string_actions
    assert option in taken, \
        f"the pages show `aquaprof {command} {option}`, which it refuses"
