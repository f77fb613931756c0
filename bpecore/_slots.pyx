"""Instances of a frozen slots dataclass, made without its ``__init__``.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` from Python
(about 1 us for four fields), and ``object.__new__`` plus four ``object.__setattr__`` calls still
cost a Python call each: the chunker makes one ``Chunk`` per chunk, thousands per MB. ``Maker4``
allocates the instance as ``object.__new__`` does (``tp_alloc``: zeroed, tracked by the garbage
collector) and writes the fields into their slots, at the offsets of the class's member
descriptors. Only for classes whose fields are all plain slots (checked when the maker is
built); tests compare its instances with the class's own, field by field, in equality, hash,
repr and pickling. An instance whose fields are all atomic (int, str, float, bool, None) is not
tracked by the garbage collector, as CPython does for such tuples: it can be in no cycle, and
the chunker's lists of thousands of chunks triggered full collections.
"""

from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    # object.__new__'s allocation (tp_alloc of every class made by a class statement): zeroed,
    # tracked by the garbage collector; a new reference, NULL on error
    object PyType_GenericAlloc(type cls, Py_ssize_t nitems)
    void PyObject_GC_UnTrack(void* op)

_MEMBER = type(type("_Probe", (), {"__slots__": ("x",)}).__dict__["x"])


cdef class Maker4:
    """``Maker4(cls, names)(a, b, c, d)``: an instance of ``cls`` with its fields ``names`` (four
    slots, in that order) set to ``a, b, c, d``, as ``cls(a, b, c, d)`` would make it when its
    ``__init__`` only stores its arguments."""

    cdef type cls
    cdef Py_ssize_t offsets[4]

    def __init__(self, type cls, names):
        if len(names) != 4:
            raise ValueError(f"Maker4 takes four field names, got {names!r}")
        if cls.__new__ is not object.__new__:
            raise TypeError(f"{cls.__name__} has a __new__ of its own")
        for k, name in enumerate(names):
            member = cls.__dict__.get(name)
            if type(member) is not _MEMBER:
                raise TypeError(f"{cls.__name__}.{name} is not a slot")
            self.offsets[k] = (<PyMemberDescrObject*>member).d_member.offset
        self.cls = cls

    def __call__(self, a, b, c, d):
        cdef object obj = PyType_GenericAlloc(self.cls, 0)
        cdef char* o = <char*><PyObject*>obj
        Py_INCREF(a)
        (<PyObject**>(o + self.offsets[0]))[0] = <PyObject*>a
        Py_INCREF(b)
        (<PyObject**>(o + self.offsets[1]))[0] = <PyObject*>b
        Py_INCREF(c)
        (<PyObject**>(o + self.offsets[2]))[0] = <PyObject*>c
        Py_INCREF(d)
        (<PyObject**>(o + self.offsets[3]))[0] = <PyObject*>d
        if _atomic(a) and _atomic(b) and _atomic(c) and _atomic(d):
            # Holding no container, the instance can be in no reference cycle: the collector
            # need not track it (CPython untracks such tuples and dicts too). Thousands of chunks
            # kept in a list otherwise bring on full collections of the whole heap.
            PyObject_GC_UnTrack(o)
        return obj


cdef inline bint _atomic(object v):
    """An object that holds no reference to another (no cycle can pass through it)."""
    return type(v) is int or type(v) is str or v is None or type(v) is float or type(v) is bool
