from libc.stdint cimport uint8_t

cdef enum PatternKind:
    PAT_NONE = 0      #: no pattern: the whole text is one piece
    PAT_REGEX = 1     #: any other pattern: the `regex` module finds the pieces
    PAT_CL100K = 2
    PAT_O200K = 3
    PAT_R50K = 4

cdef Py_ssize_t next_piece_end(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil
