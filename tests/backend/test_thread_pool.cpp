// The compute thread pool: every item of every job runs exactly once, on any
// mix of the start and end paths (workers spinning or asleep, the caller
// spinning or asleep), and the pool shuts down with its workers asleep.
// OwnedRanges: every row taken exactly once, each part's own chunks in
// order and back to back, the others' taken from the back.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "platform/thread_pool.h"

using namespace strata;

namespace {

// Runs one job over n items and checks each was visited once.
bool visits_each_once(cpu::ThreadPool& pool, int64_t n, int64_t grain, std::chrono::microseconds per_chunk = {}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int thread) {
        if (thread < 0 || thread >= pool.size()) hits[0].fetch_add(100);  // a bad index fails the check
        if (per_chunk.count() > 0) std::this_thread::sleep_for(per_chunk);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (const auto& h : hits)
        if (h.load() != 1) return false;
    return true;
}

}  // namespace

class TestThreadPool : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // Back to back: the workers are still spinning when the next job comes.
    void back_to_back_jobs() {
        for (int threads : {1, 2, 3, 4}) {
            cpu::ThreadPool pool(threads);
            for (int job = 0; job < 2000; ++job)
                QVERIFY2(visits_each_once(pool, 1 + job % 97, 1 + job % 5), qPrintable(QString("threads %1 job %2").arg(threads).arg(job)));
        }
    }

    // A pause longer than the spin between jobs: the workers are asleep and
    // must be woken; a chunk longer than the spin: the caller sleeps until
    // the last worker is done.
    void sleeping_workers_and_caller() {
        cpu::ThreadPool pool(3);
        for (int job = 0; job < 20; ++job) {
            std::this_thread::sleep_for(std::chrono::milliseconds(job % 2 ? 5 : 0));
            QVERIFY(visits_each_once(pool, 64, 1, std::chrono::microseconds(job % 3 == 0 ? 2000 : 0)));
        }
    }

    // The workers share the work when each chunk is slow.
    void workers_take_part() {
        cpu::ThreadPool pool(2);
        std::atomic<int> by_worker{0};
        pool.parallel_for(16, 1, [&](int64_t, int64_t, int thread) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            if (thread != 0) by_worker.fetch_add(1);
        });
        QVERIFY(by_worker.load() > 0);
    }

    // One part alone takes its own stretch front to back, each chunk where
    // the last ended (halving, at least the grain), then the others' from
    // their backs; every row once.
    void owned_ranges_alone() {
        cpu::OwnedRanges split(3);
        split.reset(300, 16);  // stretches [0,100) [100,200) [200,300)
        std::vector<std::pair<int64_t, int64_t>> got;
        for (int64_t b, e; split.take(1, &b, &e);) got.emplace_back(b, e);
        QVERIFY(got.size() >= 3);
        QCOMPARE(got[0], std::make_pair(int64_t{100}, int64_t{150}));  // half of its own stretch
        QCOMPARE(got[1], std::make_pair(int64_t{150}, int64_t{175}));  // continues it
        int64_t own_end = 100;
        size_t i = 0;
        for (; i < got.size() && got[i].first == own_end; ++i) {
            QVERIFY(got[i].second - got[i].first >= 16 || got[i].second == 200);
            own_end = got[i].second;
        }
        QCOMPARE(own_end, int64_t{200});
        QVERIFY(i < got.size());
        QCOMPARE(got[i].second, int64_t{300});  // then part 2's stretch, from its back
        std::vector<int> hits(300, 0);
        for (auto [b, e] : got)
            for (int64_t r = b; r < e; ++r) ++hits[static_cast<size_t>(r)];
        for (int h : hits) QCOMPARE(h, 1);
        int64_t b, e;
        QVERIFY(!split.take(0, &b, &e));
    }

    // Parts taking at once (the pool's threads): every row exactly once,
    // any number of rows and parts, grains larger than a stretch too.
    void owned_ranges_concurrent() {
        cpu::ThreadPool pool(4);
        for (int parts : {1, 2, 3, 4})
            for (int64_t n : {1, 7, 48, 1000, 1536})
                for (int64_t grain : {1, 48, 5000}) {
                    cpu::OwnedRanges split(parts);
                    split.reset(n, grain);
                    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
                    pool.parallel_for(pool.size(), 1, [&](int64_t, int64_t, int thread) {
                        for (int64_t b, e; split.take(thread % parts, &b, &e);) {
                            if (b < 0 || e > n || b >= e) hits[0].fetch_add(100);
                            for (int64_t r = b; r < e; ++r) hits[static_cast<size_t>(r)].fetch_add(1);
                        }
                    });
                    for (const auto& h : hits) QCOMPARE(h.load(), 1);
                }
    }

    // Destroyed right after a job, and after its workers fell asleep.
    void shuts_down_from_any_state() {
        for (int wait_ms : {0, 20}) {
            cpu::ThreadPool pool(4);
            QVERIFY(visits_each_once(pool, 100, 3));
            std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
        }
        cpu::ThreadPool idle(4);  // never given a job
    }
};

QTEST_GUILESS_MAIN(TestThreadPool)
#include "test_thread_pool.moc"
