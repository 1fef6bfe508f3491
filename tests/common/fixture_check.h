// One fixture model against llama.cpp's reference logits
// (../shared/fixtures/models): teacher-forced logits at every prompt position,
// greedy continuations, and the tokenization of every prompt, with the
// fixtures README's tolerances. The context comes from make_context, so the
// same check runs on the CPU and on other devices (DeviceForward). Fails the
// calling Qt test through QVERIFY/QCOMPARE.
#pragma once

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "runner/context.h"
#include "model/model.h"
#include "reference_files.h"
#include "test_support.h"

namespace strata::test {

enum class Tolerance { F32, F16, Quantized };

using ContextFactory = std::function<std::unique_ptr<model::Context>(const model::Model&)>;

// tight: quantized models held to top-1 >= 0.98 and mean <= 0.02 x std (an
// engine that quantizes activations as the reference does); else the README's
// 0.90 and 0.05 (float activations).
// greedy_steps: how many of each prompt's greedy tokens to check (-1: all
// the reference has).
inline void check_fixture(const QString& name, Tolerance tolerance_kind, const ContextFactory& make_context,
                          bool tight = true, int greedy_steps = -1) {
    const int tolerance = int(tolerance_kind);
        const QString base = test::fixtures_dir() + "/models/" + name;
        auto m = model::Model::load((base + ".gguf").toStdString());
        const auto refs = read_refs(base + ".ref.jsonl");
        const auto ref_logits = read_floats(base + ".logits.f32");
        const int64_t V = m->config().n_vocab;
        QCOMPARE(V, int64_t{512});

        std::unique_ptr<model::Context> owned = make_context(*m);
        model::Context& ctx = *owned;
        double max_abs = 0, sum_abs = 0, sum_ref = 0, sum_ref2 = 0;
        int64_t n_pos = 0, top1_agree = 0, greedy_match = 0, greedy_total = 0;
        for (const RefPrompt& r : refs) {
            // The tokenizer reproduces the reference tokens.
            std::vector<int32_t> toks = m->vocab().encode(r.prompt.toStdString(), false);
            toks.insert(toks.begin(), m->vocab().bos());
            QCOMPARE(toks, r.tokens);

            ctx.clear();
            const float* got = ctx.decode(r.tokens, true);
            for (size_t p = 0; p < r.tokens.size(); ++p) {
                const float* want = ref_logits.data() + (r.offset_rows + static_cast<int64_t>(p)) * V;
                const float* have = got + p * V;
                for (int64_t i = 0; i < V; ++i) {
                    const double d = std::fabs(double(have[i]) - want[i]);
                    max_abs = std::max(max_abs, d);
                    sum_abs += d;
                    sum_ref += want[i];
                    sum_ref2 += double(want[i]) * want[i];
                }
                top1_agree += argmax(have, V) == argmax(want, V);
                ++n_pos;
            }
            // Greedy continuation, one token at a time. For each step, the margin
            // between our top two logits: a divergence from the reference is only
            // acceptable (quantized models) where that margin is a near-tie.
            std::vector<int32_t> greedy;
            std::vector<float> margin;
            const float* row = got + (r.tokens.size() - 1) * V;
            std::vector<int32_t> ref_greedy = r.greedy;
            if (greedy_steps >= 0 && ref_greedy.size() > size_t(greedy_steps)) ref_greedy.resize(size_t(greedy_steps));
            for (size_t i = 0; i < ref_greedy.size(); ++i) {
                const int32_t next = argmax(row, V);
                float second = -INFINITY;
                for (int64_t v = 0; v < V; ++v)
                    if (v != next) second = std::max(second, row[v]);
                greedy.push_back(next);
                margin.push_back(row[next] - second);
                if (i + 1 < ref_greedy.size()) row = ctx.decode({&next, 1}, false);
            }
            for (size_t i = 0; i < greedy.size(); ++i) greedy_match += greedy[i] == ref_greedy[i];
            greedy_total += static_cast<int64_t>(greedy.size());
            // Float activations (not tight) may take another expert after a
            // near-tie anywhere upstream: the README holds those runs to the
            // pooled bounds alone.
            if (tolerance == int(Tolerance::Quantized) && tight) {
                const auto d = std::mismatch(greedy.begin(), greedy.end(), ref_greedy.begin());
                if (d.first != greedy.end()) {
                    const size_t at = static_cast<size_t>(d.first - greedy.begin());
                    QVERIFY2(margin[at] < 0.1f, qPrintable(QString("greedy diverges at step %1 of '%2' where our top-2 "
                                                                   "margin is %3, not a near-tie")
                                                               .arg(at).arg(r.prompt).arg(margin[at])));
                }
            }
            if (tolerance != int(Tolerance::Quantized)) {
                QCOMPARE(greedy, ref_greedy);
                if (r.has_text && ref_greedy.size() == r.greedy.size())
                    QCOMPARE(QString::fromStdString(m->vocab().pieces_text(greedy)), r.greedy_text);
            }
        }
        const double n_vals = double(n_pos) * V;
        const double mean_abs = sum_abs / n_vals;
        const double std_ref = std::sqrt(sum_ref2 / n_vals - (sum_ref / n_vals) * (sum_ref / n_vals));
        const double agree = double(top1_agree) / n_pos;
        qInfo("%s: max|d| %.3g, mean|d| %.3g (%.4f x std %.3g), top-1 agreement %.3f, greedy ids %lld/%lld",
              qPrintable(name), max_abs, mean_abs, mean_abs / std_ref, std_ref, agree,
              static_cast<long long>(greedy_match), static_cast<long long>(greedy_total));
        switch (Tolerance(tolerance)) {
            case Tolerance::F32: QVERIFY2(max_abs <= 1e-3, qPrintable(QString("max |dlogit| %1 > 1e-3").arg(max_abs))); break;
            case Tolerance::F16: QVERIFY2(max_abs <= 2e-2, qPrintable(QString("max |dlogit| %1 > 2e-2").arg(max_abs))); break;
            case Tolerance::Quantized:
                // The README's bounds are top-1 >= 0.90 and mean <= 0.05 x std. The
                // CPU engine quantizes activations as the reference does
                // (Q8_0/Q8_1/Q8_K), so it is held tighter (tight = true); greedy
                // continuations may part from the reference only at a near-tie
                // (checked above), since summation order alone flips those.
                QVERIFY2(agree >= (tight ? 0.98 : 0.90), qPrintable(QString("top-1 agreement %1 too low").arg(agree)));
                QVERIFY2(mean_abs <= (tight ? 0.02 : 0.05) * std_ref,
                         qPrintable(QString("mean |dlogit| %1 too large for std %2").arg(mean_abs).arg(std_ref)));
                break;
        }
}

}  // namespace strata::test
