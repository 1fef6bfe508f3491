// Ops a device lacks computed on the CPU (model/op_fallback.h), with a CPU
// backend standing in for the device: the same kernels on both sides, so any
// activation that is stale, or moved the wrong way, shows as a changed bit.
// Every op that can fall back, alone and all at once, on every architecture
// make-model writes, over a prompt and single-token steps, gives the plain
// CPU pass's logits bit for bit; and the moves are as few as the cost model
// counts. (The CUDA pass with ops left to the CPU: test_cuda_forward's
// ops_on_the_cpu_match_the_gpu.)
#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "context_params.h"
#include "model/arch/arch.h"
#include "runner/context.h"
#include "backend/cpu/cpu_backend.h"
#include "model/expert_provider.h"
#include "model/make_model.h"
#include "model/model.h"
#include "model/op_fallback.h"
#include "small_moe.h"

using namespace strata;

namespace {

// A "device" that is one CPU backend, with a second behind it for the ops in
// `on_cpu`, run through OpFallback as the CUDA pass runs them.
class CpuPair final : public model::DeviceForward {
public:
    CpuPair(const model::Model& m, std::vector<model::Op> on_cpu, int64_t n_batch)
        : m_(m),
          experts_(m.weights()),
          device_(m.config(), params(n_batch)),
          host_(m.config(), params(n_batch)),
          ops_(device_, host_, m.config().n_embd, n_batch, std::move(on_cpu)) {}

    void run(const model::DeviceChunk& c, const kv::KvCache& kv, const model::RoutingObserver&,
             const model::LookaheadObserver&) override {
        // kv is host storage: the device side attends over it.
        model::Step s = model::chunk_step(c, kv, m_.config().n_expert_used);
        s.experts = &experts_;
        ops_.begin(s);
        model::arch::forward(ops_, m_.config(), m_.weights(), m_.config().n_layer, false);
        tokens_ += static_cast<uint64_t>(c.n);
    }
    std::string name() const override { return "cpu pair"; }

    uint64_t moved_bytes() const { return ops_.moved_bytes(); }
    uint64_t tokens() const { return tokens_; }

private:
    static model::CpuBackendParams params(int64_t n_batch) {
        model::CpuBackendParams p;
        p.n_batch = n_batch;
        p.n_ctx = 128;
        p.n_threads = 1;
        return p;
    }

    const model::Model& m_;
    model::MappedExperts experts_;
    model::CpuBackend device_, host_;
    model::OpFallback ops_;
    uint64_t tokens_ = 0;
};

// A prompt's logits (every position), then three single-token steps'.
std::vector<float> logits(model::Context& ctx, int64_t vocab) {
    const std::vector<int32_t> prompt = {1, 17, 42, 99, 7, 30, 5, 12, 50, 3};
    const float* l = ctx.decode(prompt, true);
    std::vector<float> out(l, l + prompt.size() * vocab);
    for (int32_t t : {11, 23, 37}) {
        l = ctx.decode({&t, 1}, false);
        out.insert(out.end(), l, l + vocab);
    }
    return out;
}

}  // namespace

class TestOpFallback : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void same_bits_data() {
        QTest::addColumn<QString>("arch");
        for (const char* arch : {"llama", "qwen2moe", "deepseek2", "gpt-oss", "glm4moe", "ernie4_5-moe", "llama4", "qwen35moe"})
            QTest::newRow(arch) << arch;
    }

    void same_bits() {
        QFETCH(QString, arch);
        QTemporaryDir dir;
        model::MakeModelSpec spec = test::small_arch_spec(arch.toStdString());
        spec.threads = 1;
        const std::string path = (dir.path() + "/m.gguf").toStdString();
        model::make_model(spec, path);
        auto m = model::Model::load(path);
        const int64_t V = m->config().n_vocab;
        const int64_t n_batch = 4;  // the prompt in three chunks
        model::Context plain(*m, test::context_params(128, n_batch, 1));
        const std::vector<float> want = logits(plain, V);

        std::vector<std::vector<model::Op>> cases;
        std::vector<model::Op> every;
        for (model::Op op : model::arch::ops_used(m->config(), m->weights()))
            if (model::can_fall_back(op)) {
                cases.push_back({op});
                every.push_back(op);
            }
        QVERIFY(every.size() >= 4);  // embedding, RMSNorm, residual add, output head at least
        cases.push_back(every);
        for (const std::vector<model::Op>& ops : cases) {
            auto pair = std::make_unique<CpuPair>(*m, ops, n_batch);
            CpuPair* p = pair.get();
            model::Context ctx(*m, test::context_params(128, n_batch, 1), nullptr, nullptr, nullptr, std::move(pair));
            const std::vector<float> got = logits(ctx, V);
            const std::string on_cpu = model::cpu_ops_cost(m->config(), m->weights(), ops).describe();
            QVERIFY2(got.size() == want.size() && std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0,
                     on_cpu.c_str());
            // The moves are the cost model's per token, for every token the pass computed.
            const model::CpuOpsCost cost = model::cpu_ops_cost(m->config(), m->weights(), ops);
            QCOMPARE(p->moved_bytes(), cost.moved_bytes * p->tokens());
        }
    }
};

QTEST_GUILESS_MAIN(TestOpFallback)
#include "test_op_fallback.moc"
