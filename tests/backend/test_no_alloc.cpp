// No allocation on the per-token path: this binary replaces the global
// operator new/delete with counting versions, warms a model up, then counts
// every allocation (on any thread: compute workers and transfer threads
// included) during N single-token decode steps of
//   (a) a bare model::Context,
//   (b) a core::Engine holding every expert,
//   (c) a core::Engine with half the experts cached and prefetch on (loads,
//       evictions and predictions on every token),
//   (d) a core::Engine on a q4_0 model made for the test: repacked weights,
//       and each KV head's Q/K/V and attention on one thread.
// Each must be zero.
#include <QtTest>

#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include <QTemporaryDir>

#include "core/engine.h"
#include "kernels/quant_types.h"
#include "model/make_model.h"
#include "small_moe.h"
#include "runner/context.h"
#include "model/model.h"
#include "test_support.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocs{0};
// Allocations made inside the KV cache (engine/kv/kv_cache.cpp), counted apart:
// see kvCacheBlocks below.
std::atomic<uint64_t> g_kv_allocs{0};

// STRATA_ALLOC_TRACE=N prints the stacks of the first N counted allocations
// (to find them: addr2line -e test_no_alloc, or run under gdb).
thread_local bool t_in_trace = false;
void trace_alloc(uint64_t index) {
    static const long limit = [] {
        const char* v = std::getenv("STRATA_ALLOC_TRACE");
        return v ? std::atol(v) : 0L;
    }();
    if (t_in_trace || static_cast<long>(index) >= limit) return;
    t_in_trace = true;
    void* frames[32];
    const int n = backtrace(frames, 32);
    static const char sep[] = "--- allocation on the per-token path:\n";
    (void)!write(2, sep, sizeof sep - 1);
    backtrace_symbols_fd(frames, n, 2);
    t_in_trace = false;
}

// Whether the allocation comes from strata::kv::KvCache (its symbols, exported
// by -rdynamic, on the stack). backtrace() and dladdr() do not use operator new.
bool from_kv_cache() {
    void* frames[24];
    const int n = backtrace(frames, 24);
    for (int i = 0; i < n; ++i) {
        Dl_info info;
        if (dladdr(frames[i], &info) && info.dli_sname && std::strstr(info.dli_sname, "2kv7KvCache")) return true;
    }
    return false;
}

void* counted_alloc(std::size_t n, std::size_t align) {
    if (g_counting.load(std::memory_order_relaxed) && !t_in_trace) {
        t_in_trace = true;
        const bool kv = from_kv_cache();
        t_in_trace = false;
        if (kv) g_kv_allocs.fetch_add(1, std::memory_order_relaxed);
        else trace_alloc(g_allocs.fetch_add(1, std::memory_order_relaxed));
    }
    if (n == 0) n = 1;
    void* p = nullptr;
    if (align <= alignof(std::max_align_t)) p = std::malloc(n);
    else if (posix_memalign(&p, align, n) != 0) p = nullptr;
    return p;
}
}  // namespace

void* operator new(std::size_t n) {
    if (void* p = counted_alloc(n, 0)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
    if (void* p = counted_alloc(n, 0)) return p;
    throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
    if (void* p = counted_alloc(n, static_cast<std::size_t>(a))) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
    if (void* p = counted_alloc(n, static_cast<std::size_t>(a))) return p;
    throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace strata;

namespace {

std::string demo_model() { return strata::test::demo_model_path(); }

int32_t argmax(const float* l, int64_t n) {
    int32_t best = 0;
    for (int64_t i = 1; i < n; ++i)
        if (l[i] > l[best]) best = static_cast<int32_t>(i);
    return best;
}

constexpr int kWarmup = 48;  // decode steps before counting
constexpr int kSteps = 64;   // decode steps counted

struct Counts {
    uint64_t other = 0;  // everything outside the KV cache
    uint64_t kv = 0;     // inside KvCache
};

// Counted apart so a failure says which side allocates: the KV cache keeps
// its hash index, block token ids and per-sequence tables preallocated.
void check(const char* what, const Counts& c) {
    qInfo("%s: %llu allocations in %d decode steps outside the KV cache, %llu inside it", what,
          static_cast<unsigned long long>(c.other), kSteps, static_cast<unsigned long long>(c.kv));
    QCOMPARE(c.other, uint64_t{0});
    QCOMPARE(c.kv, uint64_t{0});
}

// Warms up with a prompt and kWarmup greedy steps, then returns the
// allocations made during kSteps more.
Counts allocations_per_run(model::Context& ctx, const tok::Vocab& vocab, int64_t n_vocab,
                             const std::function<void()>& settle = {}) {
    ctx.clear();
    const auto toks = vocab.encode("And God said, Let there be light: and there was light.", true);
    const float* l = ctx.decode(toks, false);
    int32_t next = argmax(l, n_vocab);
    for (int i = 0; i < kWarmup; ++i) next = argmax(ctx.decode({&next, 1}, false), n_vocab);
    if (settle) settle();
    g_allocs.store(0);
    g_kv_allocs.store(0);
    g_counting.store(true);
    for (int i = 0; i < kSteps; ++i) next = argmax(ctx.decode({&next, 1}, false), n_vocab);
    g_counting.store(false);
    if (settle) settle();
    return {g_allocs.load(), g_kv_allocs.load()};
}

}  // namespace

class TestNoAlloc : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        void* frames[4];
        (void)backtrace(frames, 4);  // loads the unwinder now, not inside a counted allocation
    }

    void counterWorks() {
        g_allocs.store(0);
        g_counting.store(true);
        auto* v = new std::vector<int>(100);
        g_counting.store(false);
        delete v;
        QVERIFY(g_allocs.load() >= 2);  // the vector and its storage
    }

    void bareContext() {
        auto m = model::Model::load(demo_model());
        model::ContextParams cp;
        cp.n_ctx = 512;
        cp.n_threads = 2;
        model::Context ctx(*m, cp);
        check("bare context", allocations_per_run(ctx, m->vocab(), m->config().n_vocab));
    }

    void engineResident() {
        EngineSettings s;
        s.n_ctx = 512;
        s.threads = 2;
        auto e = core::Engine::load(demo_model(), s);
        e->expert_store()->fill_free_slots();
        e->wait_idle();
        check("resident engine", allocations_per_run(e->context(), e->vocab(), e->model().config().n_vocab));
    }

    void engineOffloadedWithPrefetch() {
        EngineSettings s;
        s.n_ctx = 512;
        s.threads = 2;
        s.expert_cache_fraction = 0.5;
        s.prefetch = true;
        auto e = core::Engine::load(demo_model(), s);
        const uint64_t loads0 = e->expert_store()->stats().demand_loads + e->expert_store()->stats().prefetch_loads;
        const Counts n = allocations_per_run(e->context(), e->vocab(), e->model().config().n_vocab,
                                             [&] { e->wait_idle(); });
        const auto st = e->expert_store()->stats();
        qInfo("offloaded engine: %llu loads in all, hit rate %.2f",
              static_cast<unsigned long long>(st.demand_loads + st.prefetch_loads - loads0), st.hit_rate());
        // The run really exercised loading and prefetching.
        QVERIFY(st.demand_loads > 0);
        QVERIFY(st.prefetch_loads > 0);
        check("offloaded engine", n);
    }

    void engineQ4RepackedPerHeadAttention() {
        QTemporaryDir dir;
        const std::string path = (dir.path() + "/q4.gguf").toStdString();
        model::make_model(test::small_moe_spec(kernels::WeightType::Q4_0), path);
        EngineSettings s;
        s.n_ctx = 512;
        s.threads = 2;
        auto e = core::Engine::load(path, s);
        e->expert_store()->fill_free_slots();
        e->wait_idle();
        check("q4_0 engine", allocations_per_run(e->context(), e->vocab(), e->model().config().n_vocab));
    }
};

QTEST_GUILESS_MAIN(TestNoAlloc)
#include "test_no_alloc.moc"
