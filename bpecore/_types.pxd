# Types shared by every compiled module.
from libc.stdint cimport uint8_t, uint32_t, uint64_t

ctypedef uint32_t token_t
ctypedef uint8_t byte_t

#: "no token": empty hash slot, missing prefix, end of a chain.
cdef enum:
    NO_TOKEN = 0xFFFFFFFF
