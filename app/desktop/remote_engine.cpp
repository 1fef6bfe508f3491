#include "remote_engine.h"

#include <QNetworkReply>
#include <QNetworkRequest>
#include <QRegularExpression>
#include <QTextDocumentFragment>

#include <nlohmann/json.hpp>

namespace strata::desktop {
namespace {

using nlohmann::json;

QNetworkRequest make_request(const QUrl& url, const QString& key, int timeout_ms) {
    QNetworkRequest req(url);
    req.setHeader(QNetworkRequest::ContentTypeHeader, QStringLiteral("application/json"));
    if (!key.isEmpty()) req.setRawHeader("Authorization", "Bearer " + key.toUtf8());
    req.setTransferTimeout(timeout_ms);
    return req;
}

QUrl endpoint_url(const QString& base, const QString& path, QString* error) {
    QUrl u = normalize_base_url(base, error);
    if (u.isEmpty()) return u;
    u.setPath(u.path() + path);
    return u;
}

}  // namespace

QUrl normalize_base_url(const QString& text, QString* error) {
    const QUrl u = QUrl::fromUserInput(text.trimmed());
    if (!u.isValid() || u.host().isEmpty() || (u.scheme() != QLatin1String("http") && u.scheme() != QLatin1String("https"))) {
        *error = QStringLiteral("'%1' is not a server address: type one like http://127.0.0.1:8080/v1").arg(text.trimmed());
        return {};
    }
    QUrl out = u;
    QString path = out.path();
    while (path.endsWith('/')) path.chop(1);
    if (!path.endsWith(QLatin1String("/v1"))) path += QStringLiteral("/v1");
    out.setPath(path);
    out.setQuery(QString());
    out.setFragment(QString());
    return out;
}

QString http_error_reason(const QByteArray& body, const QString& content_type) {
    const json j = json::parse(body.toStdString(), nullptr, false);
    if (j.is_object() && j.contains("error")) {
        const json& e = j["error"];
        if (e.is_string()) return QString::fromStdString(e.get<std::string>()).simplified();
        if (e.is_object() && e.contains("message") && e["message"].is_string())
            return QString::fromStdString(e["message"].get<std::string>()).simplified();
        return QString::fromStdString(e.dump());
    }
    const QString text = QString::fromUtf8(body).trimmed();
    const bool html = content_type.contains(QLatin1String("html"), Qt::CaseInsensitive) || text.startsWith(QLatin1Char('<'));
    QString line;
    if (html) {
        // A proxy's or web server's error page: its title (or first heading) as text.
        static const QRegularExpression title(QStringLiteral("<title[^>]*>(.*?)</title>"),
                                              QRegularExpression::CaseInsensitiveOption | QRegularExpression::DotMatchesEverythingOption);
        static const QRegularExpression heading(QStringLiteral("<h[1-3][^>]*>(.*?)</h[1-3]>"),
                                                QRegularExpression::CaseInsensitiveOption | QRegularExpression::DotMatchesEverythingOption);
        QRegularExpressionMatch m = title.match(text);
        if (!m.hasMatch()) m = heading.match(text);
        if (m.hasMatch()) line = QTextDocumentFragment::fromHtml(m.captured(1)).toPlainText().simplified();
    } else {
        line = text.section(QLatin1Char('\n'), 0, 0).simplified();
    }
    if (line.size() > 200) line = line.left(199) + QStringLiteral("…");
    return line;
}

RemoteEngine::RemoteEngine(QObject* parent) : QObject(parent) {}

void RemoteEngine::list_models(const QString& base_url, const QString& api_key) {
    QString err;
    const QUrl url = endpoint_url(base_url, QStringLiteral("/models"), &err);
    if (url.isEmpty()) {
        Q_EMIT modelsListed({}, err);
        return;
    }
    QNetworkReply* reply = net_.get(make_request(url, api_key, timeout_ms_));
    connect(reply, &QNetworkReply::finished, this, [this, reply] {
        reply->deleteLater();
        const QByteArray body = reply->readAll();
        const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        if (reply->error() != QNetworkReply::NoError || status >= 400) {
            Q_EMIT modelsListed({}, describe_failure(reply, body));
            return;
        }
        const json j = json::parse(body.toStdString(), nullptr, false);
        QStringList ids;
        if (j.is_object() && j.contains("data") && j["data"].is_array())
            for (const json& m : j["data"])
                if (m.is_object() && m.contains("id") && m["id"].is_string()) ids << QString::fromStdString(m["id"].get<std::string>());
        if (ids.isEmpty()) {
            Q_EMIT modelsListed({}, QStringLiteral("%1 answered, but listed no models (is it an OpenAI-compatible server?)")
                                         .arg(reply->url().toString()));
            return;
        }
        Q_EMIT modelsListed(ids, QString());
    });
}

namespace {
// OpenAI streams a call in pieces: the first delta of index i has its id and
// name, the next ones more of its arguments.
void merge_tool_calls(QVariantList& calls, const json& deltas) {
    if (!deltas.is_array()) return;
    for (const json& d : deltas) {
        if (!d.is_object()) continue;
        const int i = d.contains("index") && d["index"].is_number_integer() ? d["index"].get<int>()
                                                                          : static_cast<int>(calls.size());
        if (i < 0 || i > 64) continue;
        while (calls.size() <= i) calls.append(QVariantMap{});
        QVariantMap c = calls[i].toMap();
        // The id and name come whole (some servers repeat them in every piece); the arguments in pieces.
        const auto set = [&](const char* key, const json& v) {
            if (v.is_string() && !v.get<std::string>().empty()) c[QLatin1String(key)] = QString::fromStdString(v.get<std::string>());
        };
        if (d.contains("id")) set("id", d["id"]);
        if (d.contains("function") && d["function"].is_object()) {
            const json& f = d["function"];
            if (f.contains("name")) set("name", f["name"]);
            if (f.contains("arguments") && f["arguments"].is_string())
                c[QStringLiteral("arguments")] = c.value(QStringLiteral("arguments")).toString() +
                                                 QString::fromStdString(f["arguments"].get<std::string>());
        }
        calls[i] = c;
    }
}
}  // namespace

void RemoteEngine::generate(quint64 id, const QList<ChatTurn>& turns, const sched::SamplingParams& sp, const QByteArray& tools) {
    QString err;
    const QUrl url = endpoint_url(endpoint_.base_url, QStringLiteral("/chat/completions"), &err);
    if (url.isEmpty() || endpoint_.model.isEmpty()) {
        Q_EMIT failed(id, url.isEmpty() ? err : QStringLiteral("No model is chosen for the server: pick one."), QString());
        return;
    }
    json messages = json::array();
    for (const ChatTurn& t : turns) {
        json m = {{"role", t.role.toStdString()}, {"content", t.content.toStdString()}};
        if (!t.tool_calls.isEmpty()) {
            m["tool_calls"] = json::parse(t.tool_calls.toStdString(), nullptr, false);
            if (t.content.isEmpty()) m["content"] = nullptr;
        }
        if (!t.tool_call_id.isEmpty()) m["tool_call_id"] = t.tool_call_id.toStdString();
        if (!t.name.isEmpty()) m["name"] = t.name.toStdString();
        messages.push_back(std::move(m));
    }
    json body = {{"model", endpoint_.model.toStdString()},
                 {"messages", messages},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}},
                 {"temperature", sp.temperature},
                 {"max_tokens", sp.max_tokens}};
    if (sp.top_p < 1.0f) body["top_p"] = sp.top_p;
    if (sp.seed != 0) body["seed"] = sp.seed;
    if (!sp.stop.empty()) body["stop"] = sp.stop;
    if (!tools.isEmpty()) body["tools"] = json::parse(tools.toStdString(), nullptr, false);
    Request r;
    r.clock.start();
    r.reply = net_.post(make_request(url, endpoint_.api_key, timeout_ms_),
                        QByteArray::fromStdString(body.dump(-1, ' ', false, json::error_handler_t::replace)));
    QNetworkReply* reply = r.reply;
    requests_.insert(id, r);
    connect(reply, &QNetworkReply::readyRead, this, [this, id] { on_ready_read(id); });
    connect(reply, &QNetworkReply::finished, this, [this, id] { on_finished(id); });
}

void RemoteEngine::stop(quint64 id) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return;
    it->stopped = true;
    if (it->reply) it->reply->abort();  // finished() follows
}

void RemoteEngine::on_ready_read(quint64 id) {
    auto it = requests_.find(id);
    if (it == requests_.end() || !it->reply) return;
    const int status = it->reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    if (status >= 400) return;  // the error body is read whole in on_finished
    it->buffer += it->reply->readAll();
    parse_events(id, *it);
}

void RemoteEngine::parse_events(quint64 id, Request& r) {
    for (;;) {
        int end = r.buffer.indexOf("\n\n");
        int sep = 2;
        const int crlf = r.buffer.indexOf("\r\n\r\n");
        if (crlf >= 0 && (end < 0 || crlf < end)) {
            end = crlf;
            sep = 4;
        }
        if (end < 0) return;
        const QByteArray event = r.buffer.left(end);
        r.buffer.remove(0, end + sep);
        for (QByteArray line : event.split('\n')) {
            line = line.trimmed();
            if (!line.startsWith("data:")) continue;  // comments (keep-alives), event names
            const QByteArray payload = line.mid(5).trimmed();
            if (payload == "[DONE]") {
                r.done = true;
                continue;
            }
            const json j = json::parse(payload.toStdString(), nullptr, false);
            if (!j.is_object()) continue;
            if (j.contains("error")) {
                const json& e = j["error"];
                r.finish = QStringLiteral("error:") + QString::fromStdString(e.is_object() ? e.value("message", "") : e.dump());
                continue;
            }
            if (j.contains("usage") && j["usage"].is_object()) {
                r.prompt_tokens = j["usage"].value("prompt_tokens", -1);
                r.completion_tokens = j["usage"].value("completion_tokens", -1);
            }
            if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
            const json& c = j["choices"][0];
            std::string piece;
            if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") && c["delta"]["content"].is_string())
                piece = c["delta"]["content"].get<std::string>();
            if (c.contains("finish_reason") && c["finish_reason"].is_string())
                r.finish = QString::fromStdString(c["finish_reason"].get<std::string>());
            if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("tool_calls"))
                merge_tool_calls(r.calls, c["delta"]["tool_calls"]);
            if (piece.empty()) continue;
            if (r.ttft_ms < 0) r.ttft_ms = static_cast<double>(r.clock.nsecsElapsed()) / 1e6;
            ++r.chunks;
            const QString text = QString::fromStdString(piece);
            r.text += text;
            Q_EMIT token(id, text);
        }
    }
}

void RemoteEngine::on_finished(quint64 id) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return;
    Request r = *it;
    requests_.erase(it);
    QNetworkReply* reply = r.reply;
    if (!reply) return;
    reply->deleteLater();
    const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    if (status >= 400 || (reply->error() != QNetworkReply::NoError && !r.stopped)) {
        Q_EMIT failed(id, describe_failure(reply, status >= 400 ? reply->readAll() : QByteArray()), r.text);
        return;
    }
    r.buffer += reply->readAll();
    r.buffer += "\n\n";
    parse_events(id, r);
    if (r.finish.startsWith(QLatin1String("error:"))) {
        Q_EMIT failed(id, QStringLiteral("The server failed mid-answer: ") + r.finish.mid(6), r.text);
        return;
    }
    const double seconds = static_cast<double>(r.clock.nsecsElapsed()) / 1e9;
    const qint64 tokens = r.completion_tokens >= 0 ? r.completion_tokens : r.chunks;
    const double decode_s = seconds - (r.ttft_ms > 0 ? r.ttft_ms / 1e3 : 0.0);
    QVariantMap stats;
    stats[QStringLiteral("text")] = r.text;
    // The app's finish names: the server's "stop" may be an end of turn or a stop string.
    stats[QStringLiteral("finish")] = r.stopped ? QStringLiteral("cancelled")
                                    : r.finish == QLatin1String("length") ? QStringLiteral("length")
                                    : QStringLiteral("eos");
    if (r.prompt_tokens >= 0) stats[QStringLiteral("promptTokens")] = r.prompt_tokens;
    stats[QStringLiteral("tokens")] = tokens;
    stats[QStringLiteral("tokS")] = tokens > 1 && decode_s > 0 ? (tokens - 1) / decode_s : 0.0;
    stats[QStringLiteral("ttftMs")] = r.ttft_ms;
    stats[QStringLiteral("seconds")] = seconds;
    stats[QStringLiteral("model")] = endpoint_.model + QStringLiteral(" @ ") + QUrl(endpoint_.base_url).host();
    stats[QStringLiteral("remote")] = true;
    stats[QStringLiteral("usageReported")] = r.completion_tokens >= 0;
    if (!r.calls.isEmpty()) stats[QStringLiteral("toolCalls")] = r.calls;
    Q_EMIT finished(id, stats);
}

QString RemoteEngine::describe_failure(QNetworkReply* reply, const QByteArray& body) const {
    const QString where = reply->url().toString(QUrl::RemoveUserInfo);
    const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    if (status >= 400) {
        // Plain words only: the status, its reason, and the server's own
        // message when it has one (an HTML error page is reduced to its title).
        const QString phrase = reply->attribute(QNetworkRequest::HttpReasonPhraseAttribute).toString().simplified();
        QString msg = http_error_reason(body, reply->header(QNetworkRequest::ContentTypeHeader).toString());
        while (msg.endsWith(QLatin1Char('.'))) msg.chop(1);
        QString head = QStringLiteral("The server answered HTTP %1").arg(status);
        if (!phrase.isEmpty()) head += QStringLiteral(" (%1)").arg(phrase);
        // A title such as "502 Bad Gateway" only repeats the status.
        const bool repeats = msg.isEmpty() || msg.compare(phrase, Qt::CaseInsensitive) == 0 ||
                             msg.compare(QStringLiteral("%1 %2").arg(status).arg(phrase), Qt::CaseInsensitive) == 0;
        QString hint;
        if (status == 401 || status == 403) hint = QStringLiteral(" Check the API key.");
        if (status == 404) hint = QStringLiteral(" Check the address (it usually ends in /v1) and the model.");
        if (status == 429 || status == 503) hint = QStringLiteral(" The server is busy; try again shortly.");
        if (status == 502 || status == 504) hint = QStringLiteral(" A proxy in front of the server could not reach it: is the server running?");
        return (repeats ? head : head + QStringLiteral(": ") + msg) + QLatin1Char('.') + hint;
    }
    switch (reply->error()) {
        case QNetworkReply::ConnectionRefusedError:
            return QStringLiteral("Could not connect to %1: the connection was refused. Is the server running on that port?").arg(where);
        case QNetworkReply::HostNotFoundError:
            return QStringLiteral("Could not find the host %1: check the address.").arg(reply->url().host());
        case QNetworkReply::TimeoutError:
        case QNetworkReply::OperationCanceledError:
            return QStringLiteral("%1 did not answer within %2 s: the server may be overloaded or unreachable.")
                .arg(where)
                .arg(timeout_ms_ / 1000);
        case QNetworkReply::RemoteHostClosedError:
            return QStringLiteral("%1 closed the connection before answering.").arg(where);
        default:
            return QStringLiteral("Could not reach %1: %2").arg(where, reply->errorString());
    }
}

}  // namespace strata::desktop
