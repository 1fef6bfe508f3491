// The device setting and choice: parsing, what auto picks with and without a
// usable GPU, the errors of an impossible cuda[:N], and this machine's probe
// (which must answer, GPU or not, without throwing).
#include <QtTest>

#include "backend/device.h"

using namespace strata::backend;

namespace {
DeviceProbe probe_with_gpus(int n) {
    DeviceProbe p;
    p.cuda_built = true;
    p.runtime = "CUDA runtime 13.0, driver 13.0";
    for (int i = 0; i < n; ++i) {
        GpuInfo g;
        g.index = i;
        g.name = "Test GPU " + std::to_string(i);
        g.total_bytes = 24ull << 30;
        g.free_bytes = 23ull << 30;
        g.cc_major = 8;
        g.cc_minor = 9;
        g.multiprocessors = 128;
        p.gpus.push_back(g);
    }
    if (n == 0) p.why_none = "the driver reports no CUDA device";
    return p;
}
}  // namespace

class TestDevice : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void parses_settings() {
        DeviceRequest r;
        QCOMPARE(QString::fromStdString(parse_device("auto", &r)), QString());
        QVERIFY(r.mode == DeviceMode::Auto);
        QCOMPARE(QString::fromStdString(parse_device("cpu", &r)), QString());
        QVERIFY(r.mode == DeviceMode::Cpu);
        QCOMPARE(QString::fromStdString(parse_device("cuda", &r)), QString());
        QVERIFY(r.mode == DeviceMode::Cuda && r.index == 0);
        QCOMPARE(QString::fromStdString(parse_device("cuda:3", &r)), QString());
        QVERIFY(r.mode == DeviceMode::Cuda && r.index == 3);
        QCOMPARE(QString::fromStdString(device_text(r)), QStringLiteral("cuda:3"));
        for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1234", "CPU", "cuda:0 "}) {
            const std::string err = parse_device(bad, &r);
            QVERIFY2(err.find("use auto, cpu, cuda or cuda:N") != std::string::npos, bad);
        }
    }

    void auto_takes_a_gpu_only_when_it_can_compute_there() {
        const DeviceProbe two = probe_with_gpus(2);
        // GPUs found, but no CUDA forward pass: the CPU, and the reason names the GPU.
        DeviceChoice c = choose_device({}, two, false);
        QVERIFY(c.kind == DeviceMode::Cpu);
        QVERIFY(c.error.empty());
        QVERIFY2(c.reason.find("Test GPU 0") != std::string::npos, c.reason.c_str());
        QVERIFY2(c.reason.find("CPU") != std::string::npos, c.reason.c_str());
        // With the forward pass, auto takes cuda:0.
        c = choose_device({}, two, true);
        QVERIFY(c.kind == DeviceMode::Cuda && c.index == 0);
        QVERIFY2(c.reason.find("cuda:0 Test GPU 0, 24.0 GiB VRAM (23.0 GiB free), compute 8.9") != std::string::npos,
                 c.reason.c_str());
        // No GPU: the CPU, saying why.
        c = choose_device({}, probe_with_gpus(0), true);
        QVERIFY(c.kind == DeviceMode::Cpu && c.error.empty());
        QVERIFY2(c.reason.find("no CUDA device") != std::string::npos, c.reason.c_str());
    }

    void explicit_requests() {
        const DeviceProbe two = probe_with_gpus(2);
        DeviceChoice c = choose_device({DeviceMode::Cpu, 0}, two, true);
        QVERIFY(c.kind == DeviceMode::Cpu && c.error.empty());
        c = choose_device({DeviceMode::Cuda, 1}, two, true);
        QVERIFY(c.kind == DeviceMode::Cuda && c.index == 1 && c.error.empty());
        c = choose_device({DeviceMode::Cuda, 2}, two, true);
        QVERIFY2(c.error.find("no GPU cuda:2 (found 2: cuda:0..cuda:1)") != std::string::npos, c.error.c_str());
        QVERIFY(c.error.find("--device cpu") != std::string::npos);
        c = choose_device({DeviceMode::Cuda, 0}, probe_with_gpus(0), true);
        QVERIFY2(c.error.find("no CUDA device") != std::string::npos, c.error.c_str());
        c = choose_device({DeviceMode::Cuda, 0}, two, false);
        QVERIFY2(c.error.find("computes on the CPU only") != std::string::npos, c.error.c_str());
    }

    // This machine: a GPU or a reason for none, and auto always answers.
    void this_machine() {
        const DeviceProbe& p = probe_devices();
        QCOMPARE(&p, &probe_devices());  // probed once
        QVERIFY(!p.gpus.empty() || !p.why_none.empty());
#ifdef STRATA_HAVE_CUDA
        QVERIFY(p.cuda_built);
        QVERIFY(p.runtime.find("CUDA runtime") == 0);
#else
        QVERIFY(!p.cuda_built);
#endif
        for (const GpuInfo& g : p.gpus) {
            QVERIFY(g.total_bytes > 0);
            QVERIFY(g.free_bytes <= g.total_bytes);
            QVERIFY(g.cc_major >= 3);
        }
        const DeviceChoice c = choose_device({}, p, cuda_forward_built());
        QVERIFY(c.error.empty());
        QVERIFY(!c.reason.empty());
        const std::string text = describe_probe(p);
        QVERIFY(text.find(p.gpus.empty() ? "no GPU: " : "cuda:0 ") != std::string::npos);
        qInfo("%s\n%s", text.c_str(), c.reason.c_str());
    }
};

QTEST_GUILESS_MAIN(TestDevice)
#include "test_device.moc"
