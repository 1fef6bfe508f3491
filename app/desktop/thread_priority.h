// The GUI thread's priority beside the engine's.
//
// The engine computes with a thread per core, in steps its threads finish
// together. A GUI thread at the same priority that wakes mid-step (a flush of
// streamed text, a frame, a telemetry update) takes a core from one compute
// thread, and the others wait for it: on 2 cores the app streamed at 0.65x
// strata-cli's rate while its GUI thread used about a tenth of a core. At a
// lower priority (nice +10) the GUI thread runs in the gaps the engine leaves
// and still gets its share when both want the CPU; the engine's threads are
// made by the worker thread, which keeps the default priority.
#pragma once

#include <QList>

namespace strata::desktop {

constexpr int kGuiNice = 10;

// Lowers the calling thread's priority to `nice` (Linux: per thread). Threads
// it starts afterwards inherit it, so call it once the engine's worker thread
// runs. Returns false where the system refuses (the thread keeps running).
bool lower_this_thread_priority(int nice);

// The calling thread's nice value.
int this_thread_nice();

// The nice value of each of this process's threads (/proc/self/task).
QList<int> process_thread_nices();

}  // namespace strata::desktop
