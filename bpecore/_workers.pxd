# The thread pool of one batch call (bpecore/_workers.h).

cdef extern from "bpecore/_workers.h" nogil:
    ctypedef void (*bpe_task)(void*) noexcept nogil
    cdef cppclass BpeWork:
        BpeWork()
        void reset(Py_ssize_t n) except +
        Py_ssize_t size()
        Py_ssize_t claim()
        bint wait_ready(Py_ssize_t i)
        void publish(Py_ssize_t k)
        void finish(Py_ssize_t i, unsigned char how)
        int state(Py_ssize_t i)
        void stop()
        bint failed()
        int guarded(bpe_task fn, void* ctx)
        int start(int n, bpe_task fn, void* ctx)
        void join()
