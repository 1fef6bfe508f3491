#include "thread_priority.h"

#include <QDir>
#include <QFile>
#include <cerrno>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace strata::desktop {

namespace {

id_t this_tid() { return static_cast<id_t>(::syscall(SYS_gettid)); }

}  // namespace

bool lower_this_thread_priority(int nice) { return ::setpriority(PRIO_PROCESS, this_tid(), nice) == 0; }

int this_thread_nice() {
    errno = 0;
    return ::getpriority(PRIO_PROCESS, this_tid());
}

QList<int> process_thread_nices() {
    QList<int> out;
    const QStringList tasks = QDir(QStringLiteral("/proc/self/task")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    for (const QString& t : tasks) {
        QFile f(QStringLiteral("/proc/self/task/%1/stat").arg(t));
        if (!f.open(QIODevice::ReadOnly)) continue;
        // The fields after the name (which may hold spaces) start at the last ')'; nice is field 19.
        const QByteArray stat = f.readAll();
        const QList<QByteArray> fields = stat.mid(stat.lastIndexOf(')') + 2).split(' ');
        if (fields.size() > 16) out << fields[16].toInt();
    }
    return out;
}

}  // namespace strata::desktop
