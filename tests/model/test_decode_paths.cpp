// One-token decode takes fused paths from 2 threads on (backend/cpu/cpu_backend.h:
// the one-region attention, each expert's whole FFN on one thread) and the
// general one on 1 thread (a region per product, serial work between); so
// does a prompt whose expert rows fit a forward chunk (each expert's FFN on
// one thread, experts of any token counts, biggest first), here the
// 10-token prompt with chunks of 64 (with chunks of 32 it takes the
// per-expert regions on any thread count). Their
// comments promise the same bits: gemm_q is batch-invariant and every fused
// step computes each value as the general path does. This holds them to it,
// on every architecture make-model writes (biases, per-head and whole-vector
// Q/K norms, a shared expert) and on the weight types with fast kernels.
#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <string>
#include <vector>

#include "context_params.h"
#include "kernels/quant_types.h"
#include "runner/context.h"
#include "model/make_model.h"
#include "model/model.h"
#include "small_moe.h"

using namespace strata;

namespace {

// Logits of a prompt and then `steps` one-token decodes, all concatenated.
std::vector<float> decode_logits(const model::Model& m, int threads, int steps, int64_t n_batch) {
    model::Context ctx(m, test::context_params(128, n_batch, threads));
    const std::vector<int32_t> prompt = {1, 17, 42, 99, 7, 300, 5, 12, 250, 3};
    const int64_t V = m.config().n_vocab;
    const float* l = ctx.decode(prompt, false);
    std::vector<float> out(l, l + V);
    for (int i = 0; i < steps; ++i) {
        const int32_t t = static_cast<int32_t>((20 + 37 * i) % V);
        l = ctx.decode({&t, 1}, false);
        out.insert(out.end(), l, l + V);
    }
    return out;
}

}  // namespace

class TestDecodePaths : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void fused_paths_equal_the_general_path_data() {
        QTest::addColumn<QString>("arch");
        QTest::addColumn<int>("type");
        QTest::addColumn<int>("shared_ff");
        using kernels::WeightType;
        for (const QString& arch : {QStringLiteral("llama"), QStringLiteral("qwen3moe"), QStringLiteral("olmoe")})
            for (WeightType t : {WeightType::Q4_0, WeightType::Q8_0, WeightType::F16}) {
                const QString row = arch + " " + kernels::type_traits(t)->name;
                QTest::newRow(qPrintable(row)) << arch << int(t) << 0;
            }
        QTest::newRow("qwen2moe q4_0, shared expert") << QStringLiteral("qwen2moe") << int(WeightType::Q4_0) << 64;
        QTest::newRow("qwen2moe q8_0, shared expert") << QStringLiteral("qwen2moe") << int(WeightType::Q8_0) << 64;
    }

    void fused_paths_equal_the_general_path() {
        QFETCH(QString, arch);
        QFETCH(int, type);
        QFETCH(int, shared_ff);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        model::MakeModelSpec spec = test::small_moe_spec(static_cast<kernels::WeightType>(type), arch.toStdString());
        spec.shared_ff = shared_ff;
        const std::string path = (dir.path() + "/m.gguf").toStdString();
        model::make_model(spec, path);
        auto m = model::Model::load(path);
        const int steps = 6;
        for (int64_t n_batch : {32, 64}) {
            const std::vector<float> general = decode_logits(*m, 1, steps, n_batch);
            for (int threads : {2, 3, 4}) {
                const std::vector<float> fused = decode_logits(*m, threads, steps, n_batch);
                QCOMPARE(fused.size(), general.size());
                size_t first_diff = 0;
                while (first_diff < general.size() && std::memcmp(&general[first_diff], &fused[first_diff], sizeof(float)) == 0)
                    ++first_diff;
                QVERIFY2(first_diff == general.size(),
                         qPrintable(QString("%1 threads, chunks of %6: logit %2 (step %3) is %4, 1 thread gives %5")
                                        .arg(threads)
                                        .arg(first_diff)
                                        .arg(first_diff / m->config().n_vocab)
                                        .arg(double(fused[first_diff]), 0, 'g', 9)
                                        .arg(double(general[first_diff]), 0, 'g', 9)
                                        .arg(n_batch)));
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestDecodePaths)
#include "test_decode_paths.moc"
