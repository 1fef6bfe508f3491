// The ledger: per-tier accounting, budgets that hold under concurrency, errors
// that name the account and the numbers; AlignedBuffer's reservation lifetime.
#include <QtTest>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "common/error.h"
#include "error_of.h"
#include "memory/aligned_buffer.h"
#include "memory/ledger.h"

using namespace strata;
using namespace strata::memory;
using strata::test::error_of;

namespace {

constexpr uint64_t MiB = 1ull << 20;

#define EXPECT_ERROR_CONTAINS(msg, ...)                                                                   \
    do {                                                                                                  \
        const QString m_ = (msg);                                                                         \
        QVERIFY2(!m_.isEmpty(), "no strata::Error thrown");                                               \
        for (const char* part : {__VA_ARGS__})                                                            \
            QVERIFY2(m_.contains(QString::fromUtf8(part)), qPrintable("'" + m_ + "' lacks '" + part + "'")); \
    } while (0)

}  // namespace

class TestLedger : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void names() {
        QCOMPARE(QString(account_name(Account::WeightsShared)), QString("weights.shared"));
        QCOMPARE(QString(account_name(Account::WeightsRouter)), QString("weights.router"));
        QCOMPARE(QString(account_name(Account::ExpertsCache)), QString("experts.cache"));
        QCOMPARE(QString(account_name(Account::ExpertsPinned)), QString("experts.pinned"));
        QCOMPARE(QString(account_name(Account::KvPages)), QString("kv.pages"));
        QCOMPARE(QString(account_name(Account::Activations)), QString("activations"));
        QCOMPARE(QString(account_name(Account::TransferBuffers)), QString("transfer.buffers"));
        QCOMPARE(QString(account_name(Account::DraftModel)), QString("draft.model"));
        QCOMPARE(QString(account_name(Account::RuntimeReserve)), QString("runtime.reserve"));
        QCOMPARE(QString(account_name(Account::ExpertsHome)), QString("experts.home"));
        QCOMPARE(QString(tier_name(Tier::Fast)), QString("fast"));
        QCOMPARE(QString(tier_name(Tier::Slow)), QString("slow"));
        QCOMPARE(QString::fromStdString(format_bytes(1536)), QString("1.50 KiB"));
        QCOMPARE(QString::fromStdString(format_bytes(100)), QString("100 B"));
        Ledger l;
        QVERIFY(!l.description(Tier::Fast).empty());
        l.set_description(Tier::Fast, "VRAM of GPU 0");
        QCOMPARE(QString::fromStdString(l.description(Tier::Fast)), QString("VRAM of GPU 0"));
    }

    void arithmetic() {
        Ledger l;
        QCOMPARE(l.budget(Tier::Fast), Ledger::kUnlimited);
        QCOMPARE(l.free(Tier::Fast), Ledger::kUnlimited);
        l.set_budget(Tier::Fast, 100 * MiB);
        l.reserve(Account::WeightsShared, Tier::Fast, 30 * MiB);
        l.reserve(Account::KvPages, Tier::Fast, 20 * MiB);
        l.reserve(Account::KvPages, Tier::Fast, 5 * MiB);
        l.reserve(Account::ExpertsHome, Tier::Slow, 500 * MiB);
        QCOMPARE(l.reserved(Tier::Fast), 55 * MiB);
        QCOMPARE(l.reserved(Account::KvPages, Tier::Fast), 25 * MiB);
        QCOMPARE(l.reserved(Account::KvPages, Tier::Slow), uint64_t{0});
        QCOMPARE(l.reserved(Tier::Slow), 500 * MiB);
        QCOMPARE(l.free(Tier::Fast), 45 * MiB);
        QCOMPARE(l.free(Tier::Slow), Ledger::kUnlimited);
        l.set_used(Account::KvPages, Tier::Fast, 10 * MiB);
        l.adjust_used(Account::KvPages, Tier::Fast, 5 * MiB);
        l.adjust_used(Account::KvPages, Tier::Fast, -2 * static_cast<int64_t>(MiB));
        QCOMPARE(l.used(Account::KvPages, Tier::Fast), 13 * MiB);
        QCOMPARE(l.used(Tier::Fast), 13 * MiB);
        l.release(Account::KvPages, Tier::Fast, 20 * MiB);
        QCOMPARE(l.reserved(Account::KvPages, Tier::Fast), 5 * MiB);
        QCOMPARE(l.used(Account::KvPages, Tier::Fast), 5 * MiB);  // clamped to the reservation
        QCOMPARE(l.peak_reserved(Tier::Fast), 55 * MiB);
        l.reset_peak(Tier::Fast);
        QCOMPARE(l.peak_reserved(Tier::Fast), 35 * MiB);

        const std::vector<LedgerRow> rows = l.rows();
        QCOMPARE(rows.size(), size_t{3});
        QCOMPARE(rows[0].account, Account::WeightsShared);
        QCOMPARE(rows[1].account, Account::KvPages);
        QCOMPARE(rows[1].reserved, 5 * MiB);
        QCOMPARE(rows[1].used, 5 * MiB);
        QCOMPARE(rows[2].account, Account::ExpertsHome);
        QCOMPARE(rows[2].tier, Tier::Slow);

        // Exactly the budget fits; one byte more does not.
        l.reserve(Account::ExpertsCache, Tier::Fast, l.free(Tier::Fast));
        QCOMPARE(l.free(Tier::Fast), uint64_t{0});
        QVERIFY(!l.try_reserve(Account::ExpertsCache, Tier::Fast, 1));
        QVERIFY(l.try_reserve(Account::ExpertsCache, Tier::Fast, 0));
    }

    void budget_error_names_account_and_numbers() {
        Ledger l;
        l.set_budget(Tier::Fast, 1024 * MiB);
        l.reserve(Account::WeightsShared, Tier::Fast, 700 * MiB);
        l.reserve(Account::KvPages, Tier::Fast, 200 * MiB);
        const QString msg = error_of([&] { l.reserve(Account::ExpertsCache, Tier::Fast, 200 * MiB); });
        EXPECT_ERROR_CONTAINS(msg, "fast tier budget exceeded", "experts.cache", "200.00 MiB", "124.00 MiB",
                              "1.00 GiB", "weights.shared 700.00 MiB", "kv.pages 200.00 MiB");
        QCOMPARE(l.reserved(Tier::Fast), 900 * MiB);  // nothing changed
        QCOMPARE(l.reserved(Account::ExpertsCache, Tier::Fast), uint64_t{0});
        QCOMPARE(l.peak_reserved(Tier::Fast), 900 * MiB);

        // The slow tier has its own budget and its own message.
        l.set_budget(Tier::Slow, 10 * MiB);
        EXPECT_ERROR_CONTAINS(error_of([&] { l.reserve(Account::ExpertsHome, Tier::Slow, 11 * MiB); }),
                              "slow tier budget exceeded", "experts.home", "11.00 MiB", "10.00 MiB");
        // Overflowing the count is refused even without a budget.
        Ledger u;
        u.reserve(Account::ExpertsHome, Tier::Slow, 10);
        EXPECT_ERROR_CONTAINS(error_of([&] { u.reserve(Account::ExpertsHome, Tier::Slow, UINT64_MAX - 5); }),
                              "experts.home", "overflow");
    }

    void try_reserve_changes_nothing_on_failure() {
        Ledger l;
        l.set_budget(Tier::Fast, 10 * MiB);
        QVERIFY(l.try_reserve(Account::TransferBuffers, Tier::Fast, 6 * MiB));
        QVERIFY(!l.try_reserve(Account::TransferBuffers, Tier::Fast, 5 * MiB));
        QCOMPARE(l.reserved(Account::TransferBuffers, Tier::Fast), 6 * MiB);
        QVERIFY(l.try_reserve(Account::Activations, Tier::Fast, 4 * MiB));
        QCOMPARE(l.free(Tier::Fast), uint64_t{0});
    }

    void release_and_use_errors() {
        Ledger l;
        l.reserve(Account::KvPages, Tier::Fast, 4 * MiB);
        EXPECT_ERROR_CONTAINS(error_of([&] { l.release(Account::KvPages, Tier::Fast, 5 * MiB); }), "kv.pages",
                              "releases 5.00 MiB", "4.00 MiB");
        EXPECT_ERROR_CONTAINS(error_of([&] { l.release(Account::KvPages, Tier::Slow, 1); }), "kv.pages", "slow");
        QCOMPARE(l.reserved(Account::KvPages, Tier::Fast), 4 * MiB);
        EXPECT_ERROR_CONTAINS(error_of([&] { l.set_used(Account::KvPages, Tier::Fast, 5 * MiB); }), "kv.pages",
                              "5.00 MiB", "4.00 MiB");
        l.set_used(Account::KvPages, Tier::Fast, 4 * MiB);
        EXPECT_ERROR_CONTAINS(error_of([&] { l.adjust_used(Account::KvPages, Tier::Fast, 1); }), "kv.pages");
        l.set_used(Account::KvPages, Tier::Fast, 1);
        EXPECT_ERROR_CONTAINS(error_of([&] { l.adjust_used(Account::KvPages, Tier::Fast, -2); }), "kv.pages");
        QCOMPARE(l.used(Account::KvPages, Tier::Fast), uint64_t{1});
    }

    void set_budget_below_reserved_refused() {
        Ledger l;
        l.reserve(Account::WeightsShared, Tier::Fast, 3 * MiB);
        l.reserve(Account::ExpertsCache, Tier::Fast, 2 * MiB);
        EXPECT_ERROR_CONTAINS(error_of([&] { l.set_budget(Tier::Fast, 4 * MiB); }), "fast tier budget",
                              "4.00 MiB", "5.00 MiB", "weights.shared 3.00 MiB", "experts.cache 2.00 MiB");
        QCOMPARE(l.budget(Tier::Fast), Ledger::kUnlimited);
        l.set_budget(Tier::Fast, 5 * MiB);  // exactly what is held is fine
        QCOMPARE(l.free(Tier::Fast), uint64_t{0});
        l.set_budget(Tier::Fast, Ledger::kUnlimited);
        QCOMPARE(l.free(Tier::Fast), Ledger::kUnlimited);
    }

    // Threads reserve and release against one budget: the high-water mark never
    // exceeds it, every failure is a clean refusal, and all bytes come back.
    void concurrency_budget_holds() {
        Ledger l;
        const uint64_t budget = 512 * 1024;  // one thread alone (8 x up to 200 KiB) already hits it
        l.set_budget(Tier::Fast, budget);
        std::atomic<int64_t> refused{0}, granted{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t) {
            threads.emplace_back([&, t] {
                std::mt19937 rng(static_cast<uint32_t>(t));
                std::uniform_int_distribution<uint64_t> size(1, 200 * 1024);
                const Account acc = static_cast<Account>(t % 4);
                std::vector<uint64_t> held;
                for (int i = 0; i < 20000; ++i) {
                    if (held.size() < 8 && (rng() & 1)) {
                        const uint64_t b = size(rng);
                        bool ok;
                        if (i & 2) {
                            ok = l.try_reserve(acc, Tier::Fast, b);
                        } else {
                            try {
                                l.reserve(acc, Tier::Fast, b);
                                ok = true;
                            } catch (const Error&) {
                                ok = false;
                            }
                        }
                        if (ok) {
                            held.push_back(b);
                            ++granted;
                        } else {
                            ++refused;
                        }
                    } else if (!held.empty()) {
                        l.release(acc, Tier::Fast, held.back());
                        held.pop_back();
                    }
                }
                for (uint64_t b : held) l.release(acc, Tier::Fast, b);
            });
        }
        for (auto& th : threads) th.join();
        QVERIFY(granted > 0);
        QVERIFY2(refused > 0, "the test should push against the budget");
        QVERIFY(l.peak_reserved(Tier::Fast) <= budget);
        QVERIFY(l.peak_reserved(Tier::Fast) > budget / 2);
        QCOMPARE(l.reserved(Tier::Fast), uint64_t{0});
        QVERIFY(l.rows().empty());
    }

    void aligned_buffer_reserves_and_releases() {
        Ledger l;
        l.set_budget(Tier::Fast, 64 * MiB);
        {
            AlignedBuffer b(l, Account::ExpertsCache, Tier::Fast, 10000, false, true);
            QVERIFY(b.data() != nullptr);
            QCOMPARE(reinterpret_cast<uintptr_t>(b.data()) % 4096, uintptr_t{0});
            QCOMPARE(b.size(), uint64_t{10000});
            QCOMPARE(b.reserved_bytes(), uint64_t{12288});  // rounded up to whole pages
            QCOMPARE(l.reserved(Account::ExpertsCache, Tier::Fast), uint64_t{12288});
            for (uint64_t i = 0; i < b.size(); ++i) QCOMPARE(b.data()[i], uint8_t{0});
            b.data()[9999] = 7;
            b.fill_zero();
            QCOMPARE(b.data()[9999], uint8_t{0});
        }
        QCOMPARE(l.reserved(Tier::Fast), uint64_t{0});

        // Too big for the budget: the ledger's error, nothing allocated or reserved.
        EXPECT_ERROR_CONTAINS(error_of([&] { AlignedBuffer big(l, Account::KvPages, Tier::Fast, 65 * MiB); }),
                              "kv.pages", "65.00 MiB", "64.00 MiB");
        QCOMPARE(l.reserved(Tier::Fast), uint64_t{0});

        // An empty buffer holds nothing.
        AlignedBuffer none(l, Account::KvPages, Tier::Fast, 0);
        QVERIFY(!none);
        QCOMPARE(l.reserved(Tier::Fast), uint64_t{0});
    }

    void aligned_buffer_moves() {
        Ledger l;
        AlignedBuffer a(l, Account::TransferBuffers, Tier::Fast, 4096);
        uint8_t* p = a.data();
        p[0] = 42;
        AlignedBuffer b(std::move(a));
        QVERIFY(!a);
        QCOMPARE(a.size(), uint64_t{0});
        QCOMPARE(b.data(), p);
        QCOMPARE(b.data()[0], uint8_t{42});
        QCOMPARE(l.reserved(Account::TransferBuffers, Tier::Fast), uint64_t{4096});

        AlignedBuffer c(l, Account::Activations, Tier::Fast, 8192);
        QCOMPARE(l.reserved(Tier::Fast), uint64_t{4096 + 8192});
        c = std::move(b);  // c's own memory is released, b's moves in
        QCOMPARE(l.reserved(Account::Activations, Tier::Fast), uint64_t{0});
        QCOMPARE(l.reserved(Account::TransferBuffers, Tier::Fast), uint64_t{4096});
        QCOMPARE(c.account(), Account::TransferBuffers);
        QCOMPARE(c.data(), p);

        std::vector<AlignedBuffer> v;
        for (int i = 0; i < 10; ++i) v.emplace_back(l, Account::ExpertsCache, Tier::Fast, 4096);
        QCOMPARE(l.reserved(Account::ExpertsCache, Tier::Fast), uint64_t{10 * 4096});
        v.erase(v.begin(), v.begin() + 4);
        QCOMPARE(l.reserved(Account::ExpertsCache, Tier::Fast), uint64_t{6 * 4096});
        v.clear();
        c.reset();
        QCOMPARE(l.reserved(Tier::Fast), uint64_t{0});
    }

    void aligned_buffer_huge_pages() {
        Ledger l;
        {
            AlignedBuffer h(l, Account::ExpertsCache, Tier::Fast, 3 * MiB, true);
            QVERIFY(h.huge_pages());
            QCOMPARE(reinterpret_cast<uintptr_t>(h.data()) % (2 * MiB), uintptr_t{0});
            QCOMPARE(h.reserved_bytes(), 4 * MiB);  // whole huge pages
            QCOMPARE(l.reserved(Tier::Fast), 4 * MiB);
            QCOMPARE(h.data()[3 * MiB - 1], uint8_t{0});  // anonymous memory starts zeroed
            std::memset(h.data(), 1, h.size());
            AlignedBuffer moved = std::move(h);
            QVERIFY(moved.huge_pages());
            QCOMPARE(moved.data()[12345], uint8_t{1});
        }
        QCOMPARE(l.reserved(Tier::Fast), uint64_t{0});
        // Below one huge page the flag is ignored: an ordinary aligned allocation.
        AlignedBuffer small(l, Account::ExpertsCache, Tier::Fast, 100 * 1024, true);
        QVERIFY(!small.huge_pages());
        QCOMPARE(small.reserved_bytes(), uint64_t{100 * 1024});
    }
};

QTEST_GUILESS_MAIN(TestLedger)
#include "test_ledger.moc"
