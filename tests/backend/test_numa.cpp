// NUMA awareness and huge-page expert slot arenas on this machine: the
// topology, the policy's parsing and errors, bind really binding (thread
// affinity, memory policy of a buffer), placed buffers working and staying in
// the ledger, and the expert store's arenas (huge-page advice, ledger totals
// across resize cycles, memory given back).
#include <sys/syscall.h>
#include <unistd.h>

#include <QtTest>

#include <fstream>
#include <sstream>
#include <thread>

#include "platform/numa.h"
#include "platform/thread_pool.h"
#include "common/error.h"
#include "core/engine.h"
#include "memory/aligned_buffer.h"
#include "plan/plan.h"
#include "test_support.h"

using namespace strata;

namespace {
std::string demo_model() { return strata::test::demo_model_path(); }

// get_mempolicy(MPOL_F_ADDR) of one address: the policy and node mask (raw syscall, no libnuma needed).
int mempolicy_of(const void* p, unsigned long* mask) {
    int mode = -1;
    unsigned long m[16] = {};  // maxnode must cover the kernel's node bits (1024 here)
    if (syscall(SYS_get_mempolicy, &mode, m, 8 * sizeof m, p, 2 /*MPOL_F_ADDR*/) != 0) {
        qWarning("get_mempolicy: %s", std::strerror(errno));
        return -1;
    }
    *mask = m[0];
    return mode;
}
constexpr int kMpolBind = 2, kMpolInterleave = 3;

// AnonHugePages (kB) of the mapping holding p, from /proc/self/smaps.
long anon_huge_kb(const void* p) {
    std::ifstream in("/proc/self/smaps");
    const auto a = reinterpret_cast<uintptr_t>(p);
    bool inside = false;
    for (std::string line; std::getline(in, line);) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
            inside = a >= lo && a < hi;
            continue;
        }
        if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::atol(line.c_str() + 14);
    }
    return -1;
}
}  // namespace

class TestNuma : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void topology() {
        const cpu::NumaTopology t = cpu::numa_topology();
        QCOMPARE(t.nodes.size(), size_t{1});  // this machine: one node
        QCOMPARE(t.cpus, static_cast<int>(std::thread::hardware_concurrency()));
        QVERIFY(t.memory_bytes > 0);
        QVERIFY(t.nodes[0].memory_bytes > 0);
        const cpu::NumaDecision d = cpu::decide_numa({}, t, 1ull << 30);
        QCOMPARE(d.mode, cpu::NumaMode::Off);  // auto on one node: nothing to do
        const std::string line = cpu::numa_summary(t, d);
        QVERIFY2(line.find("NUMA: ") == 0 && line.find("1 node") != std::string::npos &&
                     line.find("no placement needed") != std::string::npos, line.c_str());
#ifdef STRATA_HAVE_NUMA
        QVERIFY(t.built);
#else
        QVERIFY(!t.built);
        QVERIFY(line.find("not built") != std::string::npos);
#endif
    }

    void policy_parsing() {
        cpu::NumaPolicy p;
        QCOMPARE(cpu::parse_numa_policy("auto", &p), std::string());
        QCOMPARE(p.mode, cpu::NumaMode::Auto);
        QCOMPARE(cpu::parse_numa_policy("bind:1", &p), std::string());
        QCOMPARE(p.mode, cpu::NumaMode::Bind);
        QCOMPARE(p.node, 1);
        QCOMPARE(cpu::parse_numa_policy("interleave", &p), std::string());
        QCOMPARE(cpu::parse_numa_policy("off", &p), std::string());
        QVERIFY(cpu::parse_numa_policy("bind:", &p).find("must be a number") != std::string::npos);
        QVERIFY(cpu::parse_numa_policy("bind:x", &p).find("must be a number") != std::string::npos);
        QVERIFY(cpu::parse_numa_policy("spread", &p).find("use auto, off, bind, bind:N or interleave") != std::string::npos);
        EngineSettings s;
        s.numa = "nope";
        QVERIFY(s.validate().find("numa 'nope' is unknown") != std::string::npos);
        s.numa = "bind:0";
        QCOMPARE(s.validate(), std::string());
        // A node this machine lacks: the plan says so and loading refuses.
        const cpu::NumaTopology t = cpu::numa_topology();
        cpu::parse_numa_policy("bind:7", &p);
        const cpu::NumaDecision d = cpu::decide_numa(p, t, 0);
        QVERIFY2(d.error.find("no such node") != std::string::npos || d.error.find("NUMA support") != std::string::npos,
                 d.error.c_str());
        s.numa = "bind:7";
        bool threw = false;
        try {
            core::Engine::load(demo_model(), s);
        } catch (const Error& e) {
            threw = true;
            QVERIFY2(std::string(e.what()).find("bind:7") != std::string::npos, e.what());
        }
        QVERIFY(threw);
    }

    void bind_really_binds() {
#ifndef STRATA_HAVE_NUMA
        QSKIP("built without libnuma: bind is refused (NUMA: not built)");
#else
        const cpu::NumaTopology t = cpu::numa_topology();
        if (!t.available) QSKIP("the kernel reports no NUMA support");
        const std::vector<int> before = cpu::current_thread_cpus();
        {
            EngineSettings s;
            s.numa = "bind:0";
            s.threads = 2;
            auto e = core::Engine::load(demo_model(), s);
            QCOMPARE(e->plan().numa.mode, cpu::NumaMode::Bind);
            QCOMPARE(cpu::current_thread_cpus(), t.nodes[0].cpus);  // the computing thread runs on node 0
            QVERIFY(e->plan().to_table().find("policy bind to node 0") != std::string::npos);
            // The expert slots' arena and the KV pool (an AlignedBuffer made in
            // kv_cache.cpp, which knows nothing of NUMA) are bound to node 0.
            unsigned long mask = 0;
            QCOMPARE(mempolicy_of(e->expert_store()->slot_data(0), &mask), kMpolBind);
            QCOMPARE(mask, 1ul);
        }
        QCOMPARE(cpu::current_thread_cpus(), before);  // restored with the engine

        // The pool pins its workers to the CPU set it is given.
        cpu::ThreadPool pool(2, {t.nodes[0].cpus.front()});
        std::vector<int> seen;
        std::mutex mu;
        pool.parallel_for(64, 1, [&](int64_t, int64_t, int thread) {
            if (thread == 0) return;
            std::lock_guard<std::mutex> lock(mu);
            seen = cpu::current_thread_cpus();
        });
        if (!seen.empty()) QCOMPARE(seen, std::vector<int>{t.nodes[0].cpus.front()});
#endif
    }

    void placed_buffers_work() {
#ifndef STRATA_HAVE_NUMA
        QSKIP("built without libnuma");
#else
        for (auto kind : {memory::Placement::Bind, memory::Placement::Interleave}) {
            memory::Ledger l;
            l.set_placement(memory::Tier::Fast, {kind, 0});
            {
                memory::AlignedBuffer b(l, memory::Account::KvPages, memory::Tier::Fast, 10000, false, true);
                QCOMPARE(l.reserved(memory::Tier::Fast), uint64_t{12288});
                QCOMPARE(reinterpret_cast<uintptr_t>(b.data()) % 4096, uintptr_t{0});
                for (int i = 0; i < 10000; ++i) QCOMPARE(b.data()[i], uint8_t{0});
                std::memset(b.data(), 7, 10000);
                unsigned long mask = 0;
                QCOMPARE(mempolicy_of(b.data(), &mask), kind == memory::Placement::Bind ? kMpolBind : kMpolInterleave);
                memory::AlignedBuffer h(l, memory::Account::WeightsShared, memory::Tier::Fast, 3 << 20, true);
                QVERIFY(h.huge_pages());
                std::memset(h.data(), 1, 3 << 20);
                QCOMPARE(l.reserved(memory::Tier::Fast), uint64_t{12288 + (4 << 20)});
            }
            QCOMPARE(l.reserved(memory::Tier::Fast), uint64_t{0});
        }
#endif
    }

    void slot_arenas() {
        EngineSettings s;
        s.threads = 1;
        s.expert_cache_fraction = 1.0;
        auto e = core::Engine::load(demo_model(), s);
        experts::ExpertStore* st = e->expert_store();
        QVERIFY(st->huge_page_arenas());  // the demo model's 13.5 MiB of experts pays for arenas
        QVERIFY(st->slots_per_arena() > 1);
        QCOMPARE(reinterpret_cast<uintptr_t>(st->slot_data(0)) % (2u << 20), uintptr_t{0});
        QCOMPARE(st->slot_data(1), st->slot_data(0) + st->slot_bytes());
        // Ledger = plan, exactly.
        const memory::Ledger& l = e->ledger();
        QCOMPARE(l.reserved(memory::Account::ExpertsCache, memory::Tier::Fast),
                 e->plan().bytes(memory::Account::ExpertsCache) + e->plan().bytes(memory::Account::ExpertsPinned));
        st->fill_free_slots();
        e->wait_idle();
        const std::string thp = memory::transparent_huge_pages();
        const long huge_kb = anon_huge_kb(st->slot_data(0));
        qInfo("THP %s; arena AnonHugePages %ld kB", thp.c_str(), huge_kb);
        if (thp == "always" || thp == "madvise") QVERIFY2(huge_kb > 0, "the slot arena got no huge page");
        else qInfo("THP is '%s': the AnonHugePages check is skipped", thp.c_str());

        // Resize cycles: the ledger returns to the same totals, shrinking gives memory back.
        const uint64_t fast0 = l.reserved(memory::Tier::Fast);
        const int64_t n = st->slots();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 3; ++i) {
            e->set_expert_slots(4);
            QCOMPARE(l.reserved(memory::Account::ExpertsCache, memory::Tier::Fast),
                     memory::expert_slots_bytes(st->slot_bytes(), st->experts_total(), 4));
            QVERIFY(l.reserved(memory::Tier::Fast) < fast0);
            e->set_expert_slots(n);
            QCOMPARE(l.reserved(memory::Tier::Fast), fast0);
        }
        qInfo("3 shrink/grow cycles of %lld slots: %.3f ms", static_cast<long long>(n),
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        // Still computes after the cycles.
        auto& ctx = e->context();
        ctx.clear();
        const auto toks = e->vocab().encode("In the beginning", true);
        QVERIFY(ctx.decode(toks, false) != nullptr);
    }
};

QTEST_GUILESS_MAIN(TestNuma)
#include "test_numa.moc"
