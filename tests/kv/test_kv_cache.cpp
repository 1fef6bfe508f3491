// The paged KV cache on its own: block accounting in the ledger, F32 exact and
// Q8 within its stated error, prefix sharing by reference count with
// copy-on-write, cached prefixes recycled when the pool runs dry, and
// refusals that change nothing.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/ops.h"
#include "kv/kv_cache.h"
#include "memory/ledger.h"

using namespace strata;
using kv::KvCache;
using kv::KvCacheParams;

namespace {

KvCacheParams shape(int64_t blocks, kv::KvType type = kv::KvType::F32, int64_t bt = 16) {
    KvCacheParams p;
    p.n_layer = 3;
    p.n_head_kv = 2;
    p.head_dim = 8;
    p.block_tokens = bt;
    p.n_blocks = blocks;
    p.type = type;
    return p;
}

// This process's resident set (VmRSS), in bytes.
uint64_t resident_bytes() {
    QFile f("/proc/self/status");
    if (!f.open(QIODevice::ReadOnly)) return 0;
    for (const QByteArray& line : f.readAll().split('\n'))
        if (line.startsWith("VmRSS:")) return line.mid(6).trimmed().split(' ').first().toULongLong() * 1024;
    return 0;
}

std::vector<int32_t> ids(int n, int start = 0) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), start);
    return v;
}

// Deterministic K/V for (seq-independent) token id, layer: what a model would
// compute for the same prefix.
void kv_for(int32_t token, int64_t layer, int64_t pos, float* k, float* v, int64_t dim) {
    for (int64_t i = 0; i < dim; ++i) {
        k[i] = std::sin(0.37f * token + 0.11f * layer + 0.05f * i + 0.013f * pos) * (1.0f + (i % 5));
        v[i] = std::cos(0.21f * token - 0.07f * layer + 0.09f * i) * (0.5f + (i % 3));
    }
}

void fill(KvCache& c, kv::SeqId s, int64_t from) {
    const int64_t dim = c.params().n_head_kv * c.params().head_dim;
    std::vector<float> k(static_cast<size_t>(dim)), v(static_cast<size_t>(dim));
    const auto& toks = c.tokens(s);
    for (int64_t pos = from; pos < static_cast<int64_t>(toks.size()); ++pos)
        for (int64_t L = 0; L < c.params().n_layer; ++L) {
            kv_for(toks[static_cast<size_t>(pos)], L, pos, k.data(), v.data(), dim);
            c.write(s, L, pos, k.data(), v.data());
        }
}

float max_error(const KvCache& c, kv::SeqId s) {
    const int64_t dim = c.params().n_head_kv * c.params().head_dim;
    std::vector<float> k(static_cast<size_t>(dim)), v(static_cast<size_t>(dim)), ek(k), ev(v);
    float err = 0.0f;
    const auto& toks = c.tokens(s);
    for (int64_t pos = 0; pos < static_cast<int64_t>(toks.size()); ++pos)
        for (int64_t L = 0; L < c.params().n_layer; ++L) {
            c.read(s, L, pos, k.data(), v.data());
            kv_for(toks[static_cast<size_t>(pos)], L, pos, ek.data(), ev.data(), dim);
            for (int64_t i = 0; i < dim; ++i) err = std::max({err, std::fabs(k[i] - ek[i]), std::fabs(v[i] - ev[i])});
        }
    return err;
}

}  // namespace

class TestKvCache : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void ledger_accounts_every_block() {
        memory::Ledger ledger;
        ledger.set_budget(memory::Tier::Fast, 1 << 20);
        const KvCacheParams p = shape(10);
        KvCache c(p, &ledger);
        const uint64_t bb = p.block_bytes();
        QVERIFY(ledger.reserved(memory::Account::KvPages, memory::Tier::Fast) >= 10 * bb);
        QCOMPARE(ledger.used(memory::Account::KvPages, memory::Tier::Fast), uint64_t{0});
        const auto s = c.create_sequence();
        QVERIFY(c.append(s, ids(17)));  // 2 blocks
        QCOMPARE(ledger.used(memory::Account::KvPages, memory::Tier::Fast), 2 * bb);
        c.truncate(s, 16);
        QCOMPARE(ledger.used(memory::Account::KvPages, memory::Tier::Fast), 1 * bb);
        c.free_sequence(s);
        QCOMPARE(ledger.used(memory::Account::KvPages, memory::Tier::Fast), uint64_t{0});
        QVERIFY(ledger.used(memory::Tier::Fast) <= ledger.reserved(memory::Tier::Fast));
    }

    // The pool's pages are committed when the cache is made, not one fault at
    // a time in the decode steps that first write a block.
    void pool_pages_are_committed_at_creation() {
        if (resident_bytes() == 0) QSKIP("no /proc/self/status here to read the resident set from");
        KvCacheParams p = shape(16);
        p.n_layer = 16;
        p.n_head_kv = 8;
        p.head_dim = 128;  // 16 blocks of 2 MiB
        const uint64_t before = resident_bytes();
        KvCache c(p);
        const uint64_t grown = resident_bytes() - before;
        QVERIFY2(grown >= c.pool_bytes() * 9 / 10,
                 qPrintable(QString("resident set grew by %1 bytes for a %2-byte pool").arg(grown).arg(c.pool_bytes())));
    }

    // A recurrent model's state per sequence (recurrent.state): the planned
    // sequences' reserved with the cache, used as they live, more reserved as
    // more start, and a sequence the budget cannot hold refused with the
    // ledger's message, nothing changed.
    void recurrent_state_is_a_ledger_account() {
        memory::Ledger ledger;
        KvCacheParams p = shape(4);
        p.state_floats = 1000;
        p.state_sequences = 2;
        const uint64_t one = 4000;
        KvCache c(p, &ledger);
        ledger.set_budget(memory::Tier::Fast, ledger.reserved(memory::Tier::Fast) + one + 100);  // room for one more
        const auto held = [&] { return ledger.reserved(memory::Account::RecurrentState, memory::Tier::Fast); };
        const auto used = [&] { return ledger.used(memory::Account::RecurrentState, memory::Tier::Fast); };
        QCOMPARE(held(), 2 * one);
        QCOMPARE(used(), uint64_t{0});
        const auto a = c.create_sequence(), b = c.create_sequence();
        QCOMPARE(used(), 2 * one);
        const auto s3 = c.create_sequence();  // a third: reserved as it starts
        QCOMPARE(held(), 3 * one);
        QCOMPARE(c.state_bytes(), 3 * one);
        bool threw = false;
        try {
            (void)c.create_sequence();  // a fourth does not fit the budget
        } catch (const Error& e) {
            threw = QString(e.what()).contains("recurrent.state");
        }
        QVERIFY(threw);
        QCOMPARE(c.stats().sequences, int64_t{3});
        c.free_sequence(b);
        QCOMPARE(used(), 2 * one);
        const auto d = c.create_sequence();  // within what is held
        QCOMPARE(held(), 3 * one);
        for (auto s : {a, s3, d}) c.free_sequence(s);
        QCOMPARE(used(), uint64_t{0});
    }

    void pool_over_budget_is_refused() {
        memory::Ledger ledger;
        ledger.set_budget(memory::Tier::Fast, 4096);
        bool threw = false;
        try {
            KvCache c(shape(100), &ledger);
        } catch (const Error& e) {
            threw = true;
            QVERIFY2(QString(e.what()).contains("kv.pages"), e.what());
        }
        QVERIFY(threw);
        QCOMPARE(ledger.reserved(memory::Tier::Fast), uint64_t{0});
    }

    // A q8 cache attends over its rows as read() gives them back (int8 values
    // times the block's scale, as floats), bit for bit: the same as the f32
    // kernels over those rows in one piece. Key counts across block ends.
    void q8_attention_is_over_its_float_rows() {
        KvCache c(shape(8, kv::KvType::Q8));
        const auto s = c.create_sequence();
        QVERIFY(c.append(s, ids(40, 5)));
        fill(c, s, 0);
        const int64_t hd = 8, dim = 2 * hd, n_q = 2, layer = 2, head = 1;
        std::vector<float> q(static_cast<size_t>(n_q * hd));
        for (size_t i = 0; i < q.size(); ++i) q[i] = std::cos(0.7f * static_cast<float>(i)) * 1.5f;
        std::vector<float> K(static_cast<size_t>(40 * hd)), V(K), k(static_cast<size_t>(dim)), v(k);
        for (int64_t pos = 0; pos < 40; ++pos) {
            c.read(s, layer, pos, k.data(), v.data());
            std::copy(k.begin() + head * hd, k.begin() + (head + 1) * hd, K.begin() + pos * hd);
            std::copy(v.begin() + head * hd, v.begin() + (head + 1) * hd, V.begin() + pos * hd);
        }
        for (int64_t n_keys : {1, 16, 17, 40}) {
            std::vector<float> scores(static_cast<size_t>(n_q * n_keys)), got(static_cast<size_t>(n_q * hd));
            c.attend_group(s, layer, head, q.data(), n_q, n_keys, 0.4f, scores.data(), got.data());
            std::vector<float> p(static_cast<size_t>(n_q * n_keys)), want(static_cast<size_t>(n_q * hd), 0.0f);
            kernels::ops::attn_scores(q.data(), n_q, K.data(), n_keys, hd, 0.4f, p.data(), n_keys);
            for (int64_t h = 0; h < n_q; ++h) kernels::ops::softmax(p.data() + h * n_keys, n_keys);
            kernels::ops::attn_accumulate(p.data(), n_keys, n_q, V.data(), n_keys, hd, want.data());
            QVERIFY2(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0, qPrintable(QString("%1 keys").arg(n_keys)));
        }
    }

    // attend_group over a sequence whose blocks are scattered over the pool
    // (two sequences appended in turns, runs of 16 blocks, a freed block
    // reused) and many keys: the same bits as the kernels over its rows as
    // read() gives them back, in one piece. The f32 path reads back-to-back
    // pieces in one kernel call each (spans) and asks for memory ahead:
    // neither may change a bit; q8 reads piece by piece.
    void attention_over_scattered_blocks_is_over_its_rows() {
        for (kv::KvType type : {kv::KvType::F32, kv::KvType::Q8}) {
            KvCache c(shape(70, type, 4));  // runs of 16 blocks of 4 tokens
            const auto a = c.create_sequence(), b = c.create_sequence(), gone = c.create_sequence();
            for (int round = 0; round < 6; ++round) {
                QVERIFY(c.append(a, ids(9 + 7 * round, 1000 * round)));
                QVERIFY(c.append(round == 2 ? gone : b, ids(5, 500 + round)));
            }
            c.free_sequence(gone);
            QVERIFY(c.append(a, ids(30, 9000)));  // into the freed blocks, then new ones
            fill(c, a, 0);
            const int64_t n = static_cast<int64_t>(c.tokens(a).size());
            const int64_t hd = 8, dim = 2 * hd, n_q = 3, layer = 1, head = 1;
            std::vector<float> q(static_cast<size_t>(n_q * hd));
            for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.9f * static_cast<float>(i)) * 1.2f;
            std::vector<float> K(static_cast<size_t>(n * hd)), V(K), k(static_cast<size_t>(dim)), v(k);
            for (int64_t pos = 0; pos < n; ++pos) {
                c.read(a, layer, pos, k.data(), v.data());
                std::copy(k.begin() + head * hd, k.begin() + (head + 1) * hd, K.begin() + pos * hd);
                std::copy(v.begin() + head * hd, v.begin() + (head + 1) * hd, V.begin() + pos * hd);
            }
            for (int64_t n_keys : {int64_t{3}, int64_t{64}, int64_t{65}, n - 1, n}) {
                std::vector<float> scores(static_cast<size_t>(n_q * n_keys)), got(static_cast<size_t>(n_q * hd));
                c.attend_group(a, layer, head, q.data(), n_q, n_keys, 0.3f, scores.data(), got.data());
                std::vector<float> p(scores.size()), want(got.size(), 0.0f);
                kernels::ops::attn_scores(q.data(), n_q, K.data(), n_keys, hd, 0.3f, p.data(), n_keys);
                for (int64_t h = 0; h < n_q; ++h) kernels::ops::softmax(p.data() + h * n_keys, n_keys);
                kernels::ops::attn_accumulate(p.data(), n_keys, n_q, V.data(), n_keys, hd, want.data());
                const QString what = QString("%1, %2 of %3 keys").arg(kv::kv_type_name(type)).arg(n_keys).arg(n);
                QVERIFY2(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0, qPrintable(what));
                // The hints (the next head's first pieces asked for at the end;
                // this head's asked for before) change nothing.
                std::vector<float> hinted(got.size(), -1.0f);
                c.attend_group(a, layer, head, q.data(), n_q, n_keys, 0.3f, scores.data(), hinted.data(), 0, true);
                QVERIFY2(std::memcmp(hinted.data(), want.data(), want.size() * sizeof(float)) == 0, qPrintable(what + ", hinted"));
            }
        }
    }

    void bad_params() {
        KvCacheParams p = shape(0);
        QVERIFY(!p.validate().empty());
        p = shape(4, kv::KvType::F32, 0);
        QVERIFY(!p.validate().empty());
        p = shape(4);
        p.head_dim = kv::kMaxHeadDim + 1;  // attention's int8-to-float buffer holds one row at the most
        QVERIFY2(p.validate().find("head size") != std::string::npos, p.validate().c_str());
        QVERIFY_THROWS_EXCEPTION(Error, kv::parse_kv_type("fp8"));
        QCOMPARE(kv::parse_kv_type("int8"), kv::KvType::Q8);
    }

    void f32_round_trip_is_exact() {
        KvCache c(shape(8));
        const auto s = c.create_sequence();
        QVERIFY(c.append(s, ids(40, 3)));
        fill(c, s, 0);
        QCOMPARE(max_error(c, s), 0.0f);
    }

    // attend_group (a KV head's query heads together) gives each head what
    // attend gives it alone, bit for bit; head-by-head writes (write_head at
    // a resolved row) store what write stores. Key counts across block ends.
    void attend_group_and_write_head_equal_per_head_calls() {
        for (kv::KvType type : {kv::KvType::F32, kv::KvType::Q8}) {
            KvCache a(shape(8, type)), b(shape(8, type));
            const auto sa = a.create_sequence(), sb = b.create_sequence();
            QVERIFY(a.append(sa, ids(40, 3)) && b.append(sb, ids(40, 3)));
            fill(a, sa, 0);
            const int64_t hd = 8, heads = 2, dim = heads * hd;
            std::vector<float> k(static_cast<size_t>(dim)), v(k);
            for (int64_t pos = 0; pos < 40; ++pos)
                for (int64_t L = 0; L < 3; ++L) {
                    kv_for(3 + static_cast<int32_t>(pos), L, pos, k.data(), v.data(), dim);
                    const KvCache::Row r = b.row(sb, pos);
                    for (int64_t h = heads - 1; h >= 0; --h) b.write_head(r, L, h, k.data() + h * hd, v.data() + h * hd);
                }
            std::vector<float> ka(static_cast<size_t>(dim)), va(ka), kb(ka), vb(ka);
            for (int64_t pos = 0; pos < 40; ++pos) {
                a.read(sa, 1, pos, ka.data(), va.data());
                b.read(sb, 1, pos, kb.data(), vb.data());
                QVERIFY(ka == kb && va == vb);
            }
            QVERIFY_THROWS_EXCEPTION(Error, b.row(sb, 40));  // not appended
            const int64_t n_q = 3;
            std::vector<float> q(static_cast<size_t>(n_q * hd));
            for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.3f * static_cast<float>(i)) * 2.0f;
            for (int64_t n_keys : {1, 15, 16, 17, 33, 40}) {
                std::vector<float> scores(static_cast<size_t>(n_q * n_keys)), group(static_cast<size_t>(n_q * hd));
                a.attend_group(sa, 2, 1, q.data(), n_q, n_keys, 0.35f, scores.data(), group.data());
                for (int64_t h = 0; h < n_q; ++h) {
                    std::vector<float> one(static_cast<size_t>(hd)), sc(static_cast<size_t>(n_keys));
                    a.attend(sa, 2, 1, q.data() + h * hd, n_keys, 0.35f, sc.data(), one.data());
                    QVERIFY2(std::memcmp(one.data(), group.data() + h * hd, static_cast<size_t>(hd) * sizeof(float)) == 0,
                             qPrintable(QString("%1 keys, head %2").arg(n_keys).arg(h)));
                }
            }
        }
    }

    void q8_error_within_one_step_of_block_absmax() {
        KvCache c(shape(8, kv::KvType::Q8));
        const auto s = c.create_sequence();
        QVERIFY(c.append(s, ids(40, 3)));
        fill(c, s, 0);
        // Values reach |5|: one int8 step of a block whose absmax is 5 is
        // 5/127; requantizing on growth adds at most another half step.
        const float err = max_error(c, s);
        QVERIFY2(err <= 5.0f / 127.0f, qPrintable(QString::number(err)));
        QVERIFY(err > 0.0f);
        QVERIFY(shape(8, kv::KvType::Q8).block_bytes() * 3 < shape(8).block_bytes());
    }

    void append_without_room_changes_nothing() {
        KvCache c(shape(2));
        const auto a = c.create_sequence();
        QVERIFY(c.append(a, ids(20)));
        const auto b = c.create_sequence();
        QVERIFY(!c.append(b, ids(17)));  // needs 2, 0 left after a's 2
        QCOMPARE(c.n_tokens(b), int64_t{0});
        QCOMPARE(c.blocks_needed(a, 12), int64_t{0});
        QVERIFY(c.append(a, ids(12)));
        QVERIFY(!c.append(a, ids(1)));
        QCOMPARE(c.n_tokens(a), int64_t{32});
    }

    void prefix_is_shared_by_reference() {
        KvCache c(shape(8));
        const auto a = c.create_sequence();
        const auto prompt = ids(40, 100);
        QVERIFY(c.append(a, prompt));
        fill(c, a, 0);
        c.seal_full_blocks(a);
        const auto b = c.create_sequence();
        std::vector<int32_t> pb = prompt;
        pb.push_back(7);
        QCOMPARE(c.attach_prefix(b, pb), int64_t{32});  // two full blocks
        QCOMPARE(c.stats().shared_blocks, int64_t{2});
        QVERIFY(c.append(b, std::span<const int32_t>(pb).subspan(32)));
        fill(c, b, 32);
        QCOMPARE(max_error(c, b), 0.0f);
        // A prompt that differs inside the second block shares only the first.
        const auto d = c.create_sequence();
        std::vector<int32_t> pd = prompt;
        pd[20] = 9999;
        QCOMPARE(c.attach_prefix(d, pd), int64_t{16});
        // Never the whole prompt: its last token must still be computed.
        const auto e = c.create_sequence();
        QCOMPARE(c.attach_prefix(e, std::span<const int32_t>(prompt).first(32)), int64_t{16});
        c.free_sequence(a);
        QCOMPARE(max_error(c, b), 0.0f);  // b still holds the shared blocks
        QCOMPARE(c.stats().prefix_tokens_reused, uint64_t{64});
    }

    void truncating_into_a_shared_block_copies_before_writing() {
        KvCache c(shape(8));
        const auto a = c.create_sequence();
        QVERIFY(c.append(a, ids(32, 50)));
        fill(c, a, 0);
        c.seal_full_blocks(a);
        const auto b = c.create_sequence();
        QCOMPARE(c.attach_prefix(b, ids(33, 50)), int64_t{32});
        c.truncate(b, 20);                     // inside a's second block
        QCOMPARE(c.blocks_needed(b, 1), int64_t{1});  // the copy
        std::vector<int32_t> more{1, 2, 3};
        QVERIFY(c.append(b, more));
        fill(c, b, 20);
        QCOMPARE(max_error(c, a), 0.0f);       // a's block untouched
        QCOMPARE(max_error(c, b), 0.0f);
    }

    // A pool of several runs of blocks (the layout groups 16 blocks, the last
    // run shorter): every sequence's K/V round-trips wherever its blocks are,
    // sequences in other runs are not disturbed, and copy-on-write works
    // between runs, for f32 and q8 blocks.
    void blocks_in_every_run_of_the_pool() {
        for (kv::KvType type : {kv::KvType::F32, kv::KvType::Q8}) {
            // q8: one int8 step of a block whose absmax is 5, plus half a step
            // from requantizing when a block's scale grows.
            const float tol = type == kv::KvType::F32 ? 0.0f : 1.5f * 5.0f / 127.0f;
            KvCache c(shape(37, type, 4));  // runs of 16, 16 and 5 blocks of 4 tokens
            std::vector<kv::SeqId> seqs;
            for (int i = 0; i < 4; ++i) {
                seqs.push_back(c.create_sequence());
                QVERIFY(c.append(seqs.back(), ids(34, 100 * i)));  // 9 blocks each: 36 of 37 blocks
                fill(c, seqs.back(), 0);
            }
            for (const auto s : seqs) QVERIFY2(max_error(c, s) <= tol, qPrintable(QString("%1: %2").arg(kv::kv_type_name(type)).arg(max_error(c, s))));
            c.seal_full_blocks(seqs[3]);  // its blocks lie in the second and third runs
            c.free_sequence(seqs[0]);     // frees blocks of the first run
            const auto b = c.create_sequence();
            QCOMPARE(c.attach_prefix(b, ids(33, 300)), int64_t{32});
            c.truncate(b, 30);  // inside a shared block: the copy lands in a freed block of the first run
            std::vector<int32_t> more{7, 8};
            QVERIFY(c.append(b, more));
            fill(c, b, 30);
            QVERIFY(max_error(c, b) <= tol);
            for (size_t i = 1; i < seqs.size(); ++i) QVERIFY(max_error(c, seqs[i]) <= tol);
        }
    }

    void cached_prefixes_survive_until_the_pool_runs_dry() {
        KvCache c(shape(4));
        const auto a = c.create_sequence();
        QVERIFY(c.append(a, ids(33, 10)));
        fill(c, a, 0);
        c.seal_full_blocks(a);
        c.free_sequence(a);
        QCOMPARE(c.stats().cached_blocks, int64_t{2});
        QCOMPARE(c.available_blocks(), int64_t{4});
        // The next request with the same start reuses them.
        const auto b = c.create_sequence();
        QCOMPARE(c.attach_prefix(b, ids(40, 10)), int64_t{32});
        QCOMPARE(max_error(c, b), 0.0f);
        c.free_sequence(b);
        // A request that needs the whole pool recycles them.
        const auto d = c.create_sequence();
        QVERIFY(c.append(d, ids(64, 500)));
        QCOMPARE(c.stats().cached_blocks, int64_t{0});
        const auto e = c.create_sequence();
        QCOMPARE(c.attach_prefix(e, ids(40, 10)), int64_t{0});
    }

    void unknown_sequence_is_an_error() {
        KvCache c(shape(2));
        QVERIFY_THROWS_EXCEPTION(Error, c.n_tokens(3));
        const auto s = c.create_sequence();
        c.free_sequence(s);
        QVERIFY_THROWS_EXCEPTION(Error, c.append(s, ids(1)));
        QVERIFY_THROWS_EXCEPTION(Error, c.truncate(c.create_sequence(), 5));
    }
};

QTEST_APPLESS_MAIN(TestKvCache)
#include "test_kv_cache.moc"
