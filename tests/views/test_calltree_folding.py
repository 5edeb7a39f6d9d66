"""The folded call tree (aquaprof.views.calltree, fold=True) that `aquaprof
run` prints: library and import frames fold into "[N frames hidden]"
lines that name the libraries, the user's frames and the innermost
library frame where the time is stay, and the tree fits a terminal.
Planted samples first, shares worked out by hand; then `aquaprof run` on
a script that imports torch and trains a small model.

    PYTHONPATH=.:tests/support python tests/views/test_calltree_folding.py

prints the line counts and widest line of `aquaprof run` on that script,
folded and with --show-all."""
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from sampled_reports import MS, profile_stages, with_samples

from aquaprof.views.calltree import WIDTH, call_tree

SITE = "/env/lib/python3.11/site-packages"
STDLIB = sysconfig.get_paths()["stdlib"]

FRAMES = [
    ("<module>", "/app/train.py", 1),                               # 0
    ("train", "/app/train.py", 20),                                 # 1
    ("Module._wrapped_call_impl",
     f"{SITE}/torch/nn/modules/module.py", 1773),                   # 2
    ("Module._call_impl", f"{SITE}/torch/nn/modules/module.py", 1784),
    ("Net.forward", "/app/train.py", 10),                           # 4
    ("Conv2d.forward", f"{SITE}/torch/nn/modules/conv.py", 553),    # 5
    ("Conv2d._conv_forward", f"{SITE}/torch/nn/modules/conv.py", 537),
    ("_find_and_load", "<frozen importlib._bootstrap>", 1165),      # 7
    ("_load_unlocked", "<frozen importlib._bootstrap>", 666),       # 8
    ("exec_module", "<frozen importlib._bootstrap_external>", 934),
    ("<module>", f"{SITE}/torch/__init__.py", 1),                   # 10
    ("<module>", f"{SITE}/numpy/__init__.py", 1),                   # 11
    ("__init__", "<string>", 2),                                    # 12
    ("<module>", "/app/helpers.py", 1),                             # 13
    ("load_table", "/app/helpers.py", 5),                           # 14
    ("Thread.run", f"{STDLIB}/threading.py", 975),                  # 15
    ("relu", f"{SITE}/torch/nn/functional.py", 1500),               # 16
    ("submit", "/opt/tools/worker.py", 30),                         # 17
]


def tree(stacks, frames=FRAMES, **options):
    """The call tree of stacks [(frames, wall ms)], sampled in the stage
    load of a script /app/train.py, from its <module> down: a sample of
    the module's own as well, so that the tree starts there."""
    stacks = stacks + [((0,), 0)]
    rep = with_samples(profile_stages(), [
        (0, 1, "load", chain, 1, wall * MS, wall * MS)
        for chain, wall in stacks], frames=frames)
    options.setdefault("user_roots", ["/app"])
    return call_tree(rep, "load", start_file="/app/train.py", **options)


TRAINING = [
    ((0, 1, 2, 3, 4, 2, 3, 5, 6), 50),          # net(x): a convolution
    ((0, 1, 2, 3, 4, 16), 16),                  # F.relu in the forward
    ((0, 7, 8, 9, 10, 7, 8, 9, 11), 25),        # import torch, numpy
    ((0, 7, 8, 9, 10), 5),                      # torch's own module body
    ((0, 7, 8, 9, 13, 14), 4),                  # import helpers
]


def test_library_runs_fold_and_the_users_frames_stay():
    # the library function called, the frames between hidden, the
    # innermost where the time is; the user's forward that torch calls
    # back stays; two frames between are shown, as hiding one saves
    # nothing
    assert tree(TRAINING, fold=True) == [
        " total    own  function (file:line)",
        "100.0%   0.0%  <module> (train.py:1)",
        " 66.0%   0.0%    train (train.py:20)",
        " 66.0%   0.0%      Module._wrapped_call_impl (module.py:1773)",
        " 66.0%   0.0%        Module._call_impl (module.py:1784)",
        " 66.0%   0.0%          Net.forward (train.py:10)",
        " 50.0%   0.0%            Module._wrapped_call_impl (module.py:1773)",
        " 50.0%   0.0%              [2 frames hidden] torch",
        " 50.0%  50.0%                Conv2d._conv_forward (conv.py:537)",
        " 16.0%  16.0%            relu (functional.py:1500)",
        " 34.0%  30.0%    [5 frames hidden] torch, numpy, importlib",
        "  4.0%   0.0%      <module> (helpers.py:1)",
        "  4.0%   4.0%        load_table (helpers.py:5)",
    ]


def test_unfolded_the_tree_shows_every_frame():
    folded = tree(TRAINING, fold=True)
    unfolded = tree(TRAINING)
    assert len(unfolded) > len(folded)
    assert any("_find_and_load" in line for line in unfolded)
    assert not any("_find_and_load" in line for line in folded)
    assert not any("hidden]" in line for line in unfolded)


def test_code_made_by_exec_belongs_to_the_library_that_made_it():
    # "<string>" between torch frames (a dataclass's __init__) does not
    # break the run in two, nor show as the user's
    lines = tree([((0, 1, 2, 12, 3, 5, 6), 10)], fold=True)
    assert lines[3:] == [
        "100.0%   0.0%      Module._wrapped_call_impl (module.py:1773)",
        "100.0%   0.0%        [3 frames hidden] torch",
        "100.0% 100.0%          Conv2d._conv_forward (conv.py:537)",
    ]


def test_stdlib_and_files_outside_the_users_folders_are_libraries():
    chain = ((0, 1, 15, 17, 2, 3, 6), 10)
    folded = tree([chain], fold=True)
    assert "Thread.run (threading.py:975)" in folded[3]
    hidden = folded[4].split("] ")[1].split(", ")
    assert "[3 frames hidden]" in folded[4]
    assert sorted(hidden) == ["tools", "torch"]
    assert "Conv2d._conv_forward" in folded[5]
    # with no user folders given, only site-packages, the standard
    # library and frozen modules are libraries: /opt/tools is shown
    mine = tree([chain], fold=True, user_roots=[])
    assert any("submit (worker.py:30)" in line for line in mine)


def test_no_line_is_wider_than_a_terminal():
    # a recursion 40 deep of long names: indentation stops at 20 levels
    # and says the depth; names are cut in the middle
    frames = FRAMES + [(f"step_{i}_" + "x" * 120, "/app/train.py", 100 + i)
                       for i in range(60)]
    chain = (0,) + tuple(range(len(FRAMES), len(frames)))
    for fold in (True, False):
        lines = tree([(chain, 10)], frames=frames, fold=fold)
        assert len(lines) == 41             # max_depth 40, and the header
        assert max(len(line) for line in lines) <= WIDTH
        assert "[depth 39] step_38_" in lines[-1]
        assert lines[-1].endswith("(train.py:138)")


def test_max_lines_raises_the_prune_share_and_says_so():
    frames = FRAMES + [(f"leaf_{i}", "/app/train.py", 200 + i)
                       for i in range(50)]
    stacks = [((0, len(FRAMES) + i), 2) for i in range(50)]
    assert len(tree(stacks, frames=frames, fold=True)) == 52
    lines = tree(stacks, frames=frames, fold=True, max_lines=30)
    assert lines[2:] == [f"{'':>6} {'':>6}    (50 more under 5%)"]


def test_max_lines_cuts_a_tree_no_share_can_prune():
    frames = FRAMES + [(f"step_{i}", "/app/train.py", 100 + i)
                       for i in range(30)]
    chain = (0,) + tuple(range(len(FRAMES), len(frames)))
    lines = tree([(chain, 10)], frames=frames, fold=True, max_lines=10)
    assert len(lines) == 10
    # the header and 31 frames: 9 lines shown, 23 left out
    assert lines[-1].strip() == "(23 more lines)"


# ------------------------------------------------------- aquaprof run

from repo_paths import ROOT  # noqa: E402

#: a small CNN trained for about 1.5 s, its layers in a module of the
#: script's own, with an optimizer whose first use imports torch._dynamo
TORCH_SCRIPT = '''
import time

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.head(x.flatten(1))


def train(seconds):
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(0)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        x = torch.randn(32, 3, 32, 32, generator=gen)
        y = torch.randint(0, 10, (32,), generator=gen)
        opt.zero_grad()
        loss_fn(net(x), y).backward()
        opt.step()


train(1.5)
'''


def run_torch_script(folder, *options):
    """stdout of `aquaprof run` on TORCH_SCRIPT written into folder."""
    script = Path(folder) / "train.py"
    script.write_text(TORCH_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "aquaprof", "run", *options, str(script)],
        capture_output=True, text=True, cwd=folder, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def tree_lines(stdout):
    return stdout.split("call tree of 'run train.py'")[1].split(
        "\nreport: ")[0].strip().splitlines()


@pytest.fixture(scope="module")
def torch_runs(tmp_path_factory):
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("torch_run")
    return run_torch_script(folder), run_torch_script(folder, "--show-all")


def test_run_folds_a_torch_training_script_into_60_lines(torch_runs):
    folded, _ = torch_runs
    assert len(folded.splitlines()) <= 60, folded
    lines = tree_lines(folded)
    assert max(len(line) for line in lines) <= WIDTH
    hidden = [line for line in lines if "hidden]" in line]
    # `import torch` at the top of the script: one line, under the
    # script's module, naming torch and the import machinery
    assert any("torch" in line and line.rstrip().endswith("importlib")
               for line in hidden), folded
    assert not any("_find_and_load" in line for line in lines)
    # the user's frames, torch calling back into the model's forward
    for own in ("<module> (train.py:1)", "train (train.py:21)",
                "Net.forward (train.py:15)"):
        assert any(own in line for line in lines), (own, folded)
    # where the time is: torch's innermost Python frame of a layer
    assert any("_conv_forward (conv.py" in line for line in lines), folded


def test_show_all_prints_every_frame(torch_runs):
    folded, every = torch_runs
    lines = tree_lines(every)
    assert len(lines) > 2 * len(tree_lines(folded))
    assert any("_find_and_load" in line for line in lines)
    assert not any("hidden]" in line for line in lines)


if __name__ == "__main__":
    import tempfile
    with tempfile.TemporaryDirectory() as where:
        for options in ([], ["--show-all"]):
            out = run_torch_script(where, *options)
            name = " ".join(["aquaprof run", *options, "train.py"])
            print(f"{name}: {len(out.splitlines())} lines, the call tree "
                  f"{len(tree_lines(out))}, widest tree line "
                  f"{max(len(line) for line in tree_lines(out))} columns")
