// The CUDA-on-CPU runtime catches the bugs it exists for: each kernel of
// planted_bugs.cu has one, and each must be reported, naming its source line.
//  - The runtime itself: a divergent __syncthreads (both lines), a shuffle
//    after a lane returned, a deadlock, launch limits (2048-thread blocks,
//    gridDim.y 70000), host and misaligned pointers as kernel arguments, a
//    missing barrier (the 0xFF bytes shared memory starts with read as NaN),
//    the "fail the n-th launch" hook.
//  - The sanitizers, in a child process (a report ends it): ASan a read past
//    a device buffer, UBSan a __shared__ index out of bounds, TSan a missing
//    barrier and non-atomic += between blocks and between warps (atomicAdd is
//    clean). Each runs in the build with that sanitizer and says so elsewhere.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QFile>
#include <QRegularExpression>
#include <QtTest>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_on_cpu/control.h"
#include "planted_bugs.h"
#include "sanitizers.h"

namespace {

// The line marked "// plant: <name>" in planted_bugs.cu.
int plant_line(const char* name) {
    QFile f(QStringLiteral(STRATA_SOURCE_DIR "/tests/cuda_on_cpu/planted_bugs.cu"));
    if (!f.open(QIODevice::ReadOnly)) return -1;
    int line = 0;
    while (!f.atEnd()) {
        ++line;
        if (QString::fromUtf8(f.readLine()).contains(QStringLiteral("// plant: ") + QLatin1String(name))) return line;
    }
    return -1;
}

QString at(const char* name) { return QStringLiteral("planted_bugs.cu:%1").arg(plant_line(name)); }

struct DeviceFloats {
    float* p = nullptr;
    explicit DeviceFloats(size_t n, float fill = 0.0f) {
        if (cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)) != cudaSuccess) std::abort();
        std::vector<float> v(n, fill);
        cudaMemcpy(p, v.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    }
    ~DeviceFloats() { cudaFree(p); }
    float get(size_t i = 0) const {
        float v = 0;
        cudaMemcpy(&v, p + i, sizeof v, cudaMemcpyDeviceToHost);
        return v;
    }
};

// The child side: runs one planted bug (CUDA_ON_CPU_PLANT) and exits 0; a
// sanitizer's report ends it first.
int run_plant(const QByteArray& name) {
    DeviceFloats out(256), x(100, 1.0f);
    if (name == "read past buffer") planted::read_past_buffer(x.p, 100, out.p);
    else if (name == "shared out of bounds") planted::shared_out_of_bounds(out.p);
    else if (name == "missing barrier") planted::missing_barrier(x.p, 100, out.p);
    else if (name == "race between blocks") planted::race_between_blocks(out.p);
    else if (name == "race between warps") planted::race_between_warps(out.p);
    else if (name == "atomic between blocks") planted::atomic_between_blocks(out.p);
    else return 2;
    cudaDeviceSynchronize();
    return 0;
}

}  // namespace

class TestCudaOnCpuSelfcheck : public QObject {
    Q_OBJECT

    // Runs a planted bug in a child process; its exit status and stderr.
    // posix_spawn, not QProcess: TSan (LLVM 14) fails a CHECK after the
    // clone() QProcess makes.
    static std::pair<int, QString> child(const char* plant) {
        int fds[2];
        if (pipe(fds) != 0) return {-1, QStringLiteral("pipe failed")};
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
        posix_spawn_file_actions_addclose(&actions, fds[0]);
        posix_spawn_file_actions_addclose(&actions, fds[1]);
        std::vector<std::string> env;
        for (char** e = environ; *e; ++e) env.emplace_back(*e);
        env.push_back(std::string("CUDA_ON_CPU_PLANT=") + plant);
        std::vector<char*> envp;
        for (std::string& e : env) envp.push_back(e.data());
        envp.push_back(nullptr);
        const QByteArray self = QCoreApplication::applicationFilePath().toLocal8Bit();
        char* argv[] = {const_cast<char*>(self.constData()), nullptr};
        pid_t pid = 0;
        const int err = posix_spawn(&pid, self.constData(), &actions, nullptr, argv, envp.data());
        posix_spawn_file_actions_destroy(&actions);
        close(fds[1]);
        QByteArray out;
        char buf[4096];
        for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, n);
        close(fds[0]);
        if (err != 0) return {-1, QStringLiteral("posix_spawn failed: ") + QString::fromUtf8(std::strerror(err))};
        int status = 0;
        waitpid(pid, &status, 0);
        return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), QString::fromUtf8(out)};
    }

    static void expect_fault(int code, cudaError_t want, const QStringList& mentions) {
        QCOMPARE(code, int(want));
        const QString fault = QString::fromStdString(cuda_on_cpu::last_fault());
        for (const QString& m : mentions)
            QVERIFY2(fault.contains(m), qPrintable("the fault says: " + fault + "\nmissing: " + m));
        QCOMPARE(int(cudaDeviceSynchronize()), int(want));  // sticky, as on a GPU
        cuda_on_cpu::clear_fault();
        QCOMPARE(int(cudaDeviceSynchronize()), int(cudaSuccess));
    }

private Q_SLOTS:
    void init() { cuda_on_cpu::clear_fault(); }

    // --- sanitizers (child processes) ------------------------------------------

    void read_past_a_device_buffer() {
#if !defined(CUDA_ON_CPU_ASAN)
        QSKIP("built without AddressSanitizer: the ASan build of packaging/test.sh runs this");
#endif
        const auto [code, err] = child("read past buffer");
        QVERIFY2(code != 0 && err.contains(QStringLiteral("heap-buffer-overflow")) && err.contains(at("read past buffer")),
                 qPrintable(err.right(3000)));
    }

    void shared_index_out_of_bounds() {
#if !defined(CUDA_ON_CPU_ASAN)
        QSKIP("built without UBSan: the ASan+UBSan build of packaging/test.sh runs this");
#endif
        const auto [code, err] = child("shared out of bounds");
        QVERIFY2(code != 0 && err.contains(QRegularExpression(QStringLiteral("index 32 out of bounds for type 'float ?\\[32\\]'"))) &&
                     err.contains(at("shared out of bounds")),
                 qPrintable(err.right(3000)));
    }

    void races_are_reported() {
#if !defined(CUDA_ON_CPU_TSAN)
        QSKIP("built without ThreadSanitizer: the TSan build of packaging/test.sh runs this");
#endif
        for (const char* plant : {"missing barrier", "race between blocks", "race between warps"}) {
            const auto [code, err] = child(plant);
            QVERIFY2(code != 0 && err.contains(QStringLiteral("ThreadSanitizer: data race")) && err.contains(at(plant)),
                     qPrintable(QLatin1String(plant) + QStringLiteral(": ") + err.right(3000)));
        }
        const auto [code, err] = child("atomic between blocks");
        QVERIFY2(code == 0 && !err.contains(QStringLiteral("ThreadSanitizer")), qPrintable(err.right(3000)));
    }

    // --- the runtime's own checks ------------------------------------------------

    void divergent_barrier_names_both_lines() {
        DeviceFloats out(64);
        expect_fault(planted::divergent_barrier(out.p), cudaErrorIllegalInstruction,
                     {QStringLiteral("divergent __syncthreads"), at("divergent barrier (then)"),
                      at("divergent barrier (else)")});
    }

    void shuffle_after_a_lane_returned() {
        DeviceFloats out(32);
        expect_fault(planted::shuffle_after_return(out.p), cudaErrorLaunchFailure,
                     {QStringLiteral("lane 5"), QStringLiteral("returned"), at("shuffle after return")});
    }

    void deadlock_is_detected() {
        DeviceFloats out(32);
        expect_fault(planted::deadlock(out.p), cudaErrorLaunchFailure,
                     {QStringLiteral("deadlock"), QStringLiteral("__shfl_xor_sync"), QStringLiteral("__syncthreads")});
    }

    void launch_limits_are_the_drivers() {
        DeviceFloats out(64);
        const uint64_t launches = cuda_on_cpu::counters().launches;
        QCOMPARE(planted::block_of_2048(out.p), int(cudaErrorInvalidConfiguration));
        QCOMPARE(int(cudaGetLastError()), int(cudaSuccess));  // not sticky
        QCOMPARE(planted::grid_y_70000(out.p), int(cudaErrorInvalidConfiguration));
        QCOMPARE(cuda_on_cpu::counters().launches, launches);  // neither ran
    }

    void host_and_misaligned_pointers_are_refused() {
        DeviceFloats x(64, 2.0f), y(64);
        std::vector<float> host(64);
        expect_fault(planted::copy(host.data(), y.p, 64), cudaErrorIllegalAddress,
                     {QStringLiteral("copy_kernel"), QStringLiteral("argument 1 'x'"),
                      QStringLiteral("not in any device allocation")});
        expect_fault(planted::copy(x.p, reinterpret_cast<float*>(reinterpret_cast<char*>(y.p) + 2), 8),
                     cudaErrorMisalignedAddress, {QStringLiteral("argument 2 'y'"), QStringLiteral("aligned")});
        expect_fault(planted::copy(x.p, y.p + 64, 1), cudaErrorIllegalAddress,
                     {QStringLiteral("argument 2 'y'"), QStringLiteral("just past the end of the 256-byte allocation")});
        QCOMPARE(planted::copy(x.p, y.p, 64), int(cudaSuccess));
        QCOMPARE(y.get(63), 2.0f);
    }

    void missing_barrier_reads_nan() {
        DeviceFloats x(100, 1.0f), out(1);
        QCOMPARE(planted::block_sum(x.p, 100, out.p), int(cudaSuccess));
        QCOMPARE(out.get(), 100.0f);
        if (cuda_on_cpu::kThreadSanitizer) QSKIP("under ThreadSanitizer the race itself is checked (races_are_reported)");
        QCOMPARE(planted::missing_barrier(x.p, 100, out.p), int(cudaSuccess));
        QVERIFY2(std::isnan(out.get()), "a read of shared memory no thread of the block wrote must read NaN");
    }

    void failing_the_nth_launch() {
        DeviceFloats x(8, 3.0f), y(8);
        cuda_on_cpu::fail_launch_in(2);
        QCOMPARE(planted::copy(x.p, y.p, 8), int(cudaSuccess));
        QCOMPARE(planted::copy(x.p, y.p, 8), int(cudaErrorLaunchFailure));
        QCOMPARE(planted::copy(x.p, y.p, 8), int(cudaSuccess));  // a refused launch is not sticky
    }

    void copies_are_checked_against_allocations() {
        DeviceFloats x(8);
        std::vector<float> host(16);
        QCOMPARE(int(cudaMemcpy(x.p, host.data(), 16 * sizeof(float), cudaMemcpyHostToDevice)), int(cudaErrorInvalidValue));
        QCOMPARE(int(cudaMemcpy(host.data(), host.data() + 8, 8, cudaMemcpyDeviceToHost)), int(cudaErrorInvalidValue));
        QCOMPARE(int(cudaFree(host.data())), int(cudaErrorInvalidValue));
        cudaGetLastError();
    }

};

int main(int argc, char** argv) {
    if (const char* plant = std::getenv("CUDA_ON_CPU_PLANT")) return run_plant(plant);
    QCoreApplication app(argc, argv);
    TestCudaOnCpuSelfcheck t;
    return QTest::qExec(&t, argc, argv);
}

#include "test_selfcheck.moc"
