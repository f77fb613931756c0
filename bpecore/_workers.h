/* The thread pool of one batch call (bpecore/batch.pyx): texts claimed in order by native
   threads, published one by one by the caller. Declared for Cython in bpecore/_workers.pxd. */
#pragma once
#include <Python.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

typedef void (*bpe_task)(void*);

/* What the threads of one batch call share. Texts are claimed in order from next_; the
   caller, which prepares them under the GIL, says in ready_ how many are prepared; state_[i]
   is 0 until text i is finished, then 1 (result written) or 2 (lone surrogate: the caller
   redoes it). stop() ends the claiming and wakes waiters; the destructor stops and joins. */
class BpeWork {
  public:
    BpeWork() {}
    ~BpeWork() { stop(); join(); }
    void reset(Py_ssize_t n) {
        state_.reset(new std::atomic<unsigned char>[n > 0 ? n : 1]());
        size_ = n;
    }
    Py_ssize_t size() const { return size_; }
    Py_ssize_t claim() { return next_.fetch_add(1); }
    /* Wait until text i is prepared; false if the call was stopped first. */
    bool wait_ready(Py_ssize_t i) {
        if (ready_.load() > i) return true;
        std::unique_lock<std::mutex> lock(mutex_);
        ++waiting_;
        cv_.wait(lock, [&] { return ready_.load() > i || stopped_.load(); });
        --waiting_;
        return ready_.load() > i && !stopped_.load();
    }
    void publish(Py_ssize_t k) {
        ready_.store(k);
        if (waiting_.load()) {
            std::lock_guard<std::mutex> guard(mutex_);
            cv_.notify_all();
        }
    }
    void finish(Py_ssize_t i, unsigned char how) { state_[i].store(how, std::memory_order_release); }
    int state(Py_ssize_t i) const { return state_[i].load(std::memory_order_acquire); }
    void stop() {
        stopped_.store(true);
        next_.store(size_);
        std::lock_guard<std::mutex> guard(mutex_);
        cv_.notify_all();
    }
    bool failed() const { return failed_.load(); }
    /* fn(ctx), a C++ exception (bad_alloc) caught: the call fails and everyone stops. */
    int guarded(bpe_task fn, void* ctx) {
        try {
            fn(ctx);
            return 0;
        } catch (...) {
            failed_.store(true);
            stop();
            return -1;
        }
    }
    /* Start up to n threads running guarded(fn, ctx); returns how many started. */
    int start(int n, bpe_task fn, void* ctx) {
        try {
            threads_.reserve(n);
            for (int k = 0; k < n; ++k)
                threads_.emplace_back([this, fn, ctx] { guarded(fn, ctx); });
        } catch (...) {
        }
        return (int)threads_.size();
    }
    void join() {
        for (auto& t : threads_)
            if (t.joinable()) t.join();
        threads_.clear();
    }

  private:
    std::atomic<Py_ssize_t> next_{0}, ready_{0};
    std::atomic<int> waiting_{0};
    std::atomic<bool> stopped_{false}, failed_{false};
    Py_ssize_t size_ = 0;
    std::unique_ptr<std::atomic<unsigned char>[]> state_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<std::thread> threads_;
};
