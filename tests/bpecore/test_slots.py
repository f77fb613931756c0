"""bpecore._slots.Maker4: instances of a frozen slots dataclass made without its __init__ must be
the class's own instances in every respect (the chunker makes its Chunk objects with it)."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import sys

import pytest

from bpecore._slots import Maker4
from bpecore.chunker import Chunk, _new_chunk


def test_made_chunks_are_chunks():
    text = "".join(["a chunk's text ", "é"])  # a str of its own, for its reference count
    made, built = _new_chunk(3, 19, text, 5), Chunk(3, 19, text, 5)
    assert type(made) is Chunk
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert (made.start, made.end, made.text, made.tokens) == (3, 19, text, 5)
    assert dataclasses.asdict(made) == dataclasses.asdict(built)
    assert dataclasses.replace(made, tokens=6) == Chunk(3, 19, text, 6)
    assert pickle.loads(pickle.dumps(made)) == built
    assert copy.deepcopy(made) == built
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.tokens = 1  # type: ignore[misc]
    # fields that hold no other object: no cycle can pass through it, the collector skips it
    assert not gc.is_tracked(made)
    assert gc.is_tracked(_new_chunk(3, 19, [text], 5))


def test_references_are_counted():
    text = "".join(["a", "b" * 40])
    before = sys.getrefcount(text)
    made = [_new_chunk(1, 2, text, 3) for _ in range(100)]
    assert sys.getrefcount(text) == before + 100
    del made
    assert sys.getrefcount(text) == before
    # a cycle through a made instance is collected
    made = _new_chunk(1, 2, [], 3)
    made.text.append(made)
    del made
    assert gc.collect() >= 1


def test_only_plain_slot_classes():
    @dataclasses.dataclass
    class WithDict:
        a: int
        b: int
        c: int
        d: int

    @dataclasses.dataclass(slots=True)
    class Slots:
        a: int
        b: int
        c: int
        d: int

    class OwnNew:
        __slots__ = ("a", "b", "c", "d")

        def __new__(cls):
            return super().__new__(cls)

    with pytest.raises(TypeError):
        Maker4(WithDict, ("a", "b", "c", "d"))  # fields in the instance dict, not slots
    with pytest.raises(TypeError):
        Maker4(OwnNew, ("a", "b", "c", "d"))
    with pytest.raises(TypeError):
        Maker4(Slots, ("a", "b", "c", "x"))
    with pytest.raises(ValueError):
        Maker4(Slots, ("a", "b", "c"))
    assert Maker4(Slots, ("d", "c", "b", "a"))(1, 2, 3, 4) == Slots(4, 3, 2, 1)
