"""Staged functions pickle like functools.wraps wrappers: by reference
when their module holds them, so process pools and spawned workers can
run them."""
import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

import aquaprof as ap


@ap.stage
def square(x):
    return x * x


@ap.stage("decode", items=4)
def decode(x):
    return -x


class Codec:
    @ap.stage
    def encode(self, x):
        return x + 1


def _plain(x):
    return x + 100


restaged = ap.stage("restaged", items=2)(_plain)


@pytest.mark.parametrize("func", [square, decode, Codec.encode])
def test_module_level_staged_functions_pickle_by_reference(func):
    assert pickle.loads(pickle.dumps(func)) is func


def test_a_staged_bound_method_pickles_with_its_object():
    method = pickle.loads(pickle.dumps(Codec().encode))
    assert method(1) == 2 and method.stage_name == "Codec.encode"


def test_a_staged_function_its_module_does_not_hold_is_staged_again():
    copy = pickle.loads(pickle.dumps(restaged))
    assert copy is not restaged
    assert copy.stage_name == "restaged" and copy(1) == 101
    with ap.Profiler() as prof:
        copy(1)
    assert prof.report()["restaged"].items == 2


def test_a_local_staged_function_fails_as_a_local_function_does():
    @ap.stage
    def local(x):
        return x

    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(local)


@pytest.mark.parametrize("method", ["spawn", "fork", "forkserver"])
def test_process_pools_run_staged_functions(method):
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        assert list(pool.map(square, range(5))) == [0, 1, 4, 9, 16]
        assert list(pool.map(restaged, range(2))) == [100, 101]


class Squares:
    """A dataset whose item is a staged method."""

    def __len__(self):
        return 6

    @ap.stage("getitem")
    def __getitem__(self, i):
        return i * i


def test_a_spawned_dataloader_worker_runs_a_staged_dataset():
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    loader = DataLoader(Squares(), batch_size=3, num_workers=1,
                        multiprocessing_context="spawn")
    batches = [b.tolist() for b in loader]
    assert batches == [[0, 1, 4], [9, 16, 25]]


@pytest.mark.parametrize("args,error", [
    ((_plain, 3, 0), TypeError),             # name not a str
    ((_plain, "a/b", 0), ValueError),        # a name stage() refuses
    ((_plain, "x", -1), ValueError),         # negative items
    ((42, "x", 0), TypeError),               # nothing to call
])
def test_restaging_refuses_what_stage_refuses(args, error):
    from aquaprof import _core
    with pytest.raises(error):
        _core._restage(*args)
