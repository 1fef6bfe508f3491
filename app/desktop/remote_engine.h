// Chatting with an OpenAI-compatible server instead of the local engine: a
// vLLM or SGLang cluster, llama-server, Ollama, LM Studio, or another Strata.
// Qt Network on the GUI thread (asynchronous, nothing blocks); the same
// request/answer signals as EngineWorker, so ChatController treats both alike
// and the conversation store keeps every exchange.
//
// Streaming: POST {base}/chat/completions with stream=true, server-sent events
// parsed as they arrive. Stopping aborts the reply and keeps what streamed.
// Failures (refused connection, unknown host, no answer within the timeout,
// an HTTP error with the server's own message) end the request with a message
// that says what happened and what to check.
#pragma once

#include <QElapsedTimer>
#include <QHash>
#include <QList>
#include <QNetworkAccessManager>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QUrl>
#include <QVariantMap>

#include "engine_worker.h"  // ChatTurn
#include "sched/sampler.h"

class QNetworkReply;

namespace strata::desktop {

struct RemoteEndpoint {
    QString base_url;   // as the user typed it
    QString api_key;    // "" = none
    QString model;      // an id from its /v1/models
    bool valid() const { return !base_url.isEmpty() && !model.isEmpty(); }
};

// "http://host:8000" -> "http://host:8000/v1"; ".../v1" stays. Empty with *error
// set for anything that is not an http(s) URL with a host.
QUrl normalize_base_url(const QString& text, QString* error);

// A server's HTTP error body as one short line of plain text: the message of
// an OpenAI error JSON; an HTML page's title (or first heading), never its
// markup; else the text's first line, cut at 200 characters. "" when the
// body says nothing (the caller uses the status's reason phrase).
QString http_error_reason(const QByteArray& body, const QString& content_type);

class RemoteEngine : public QObject {
    Q_OBJECT
public:
    explicit RemoteEngine(QObject* parent = nullptr);

    void set_endpoint(const RemoteEndpoint& e) { endpoint_ = e; }
    const RemoteEndpoint& endpoint() const { return endpoint_; }
    // No byte for this long ends a request (a server that went silent).
    void set_timeout_ms(int ms) { timeout_ms_ = ms; }

    // GET {base}/models; answers with modelsListed.
    void list_models(const QString& base_url, const QString& api_key);
    // `tools`: OpenAI function definitions (JSON) sent with the request, ""
    // for none; the calls the server returns come in finished's "toolCalls"
    // ([{id, name, arguments}]).
    void generate(quint64 id, const QList<ChatTurn>& turns, const sched::SamplingParams& params,
                  const QByteArray& tools = {});
    void stop(quint64 id);
    bool running(quint64 id) const { return requests_.contains(id); }

Q_SIGNALS:
    void modelsListed(const QStringList& ids, const QString& error);
    void token(quint64 requestId, const QString& text);
    // As EngineWorker::finished: text, finish, promptTokens, tokens, tokS, ttftMs, seconds, model, remote,
    // and toolCalls when the server returned calls.
    void finished(quint64 requestId, const QVariantMap& stats);
    void failed(quint64 requestId, const QString& message, const QString& partialText);

private:
    struct Request {
        QPointer<QNetworkReply> reply;
        QByteArray buffer;      // SSE bytes not yet parsed
        QString text;
        QString finish;
        QVariantList calls;     // streamed tool_calls, merged by index: {id, name, arguments}
        qint64 prompt_tokens = -1, completion_tokens = -1;
        int chunks = 0;
        double ttft_ms = -1;
        QElapsedTimer clock;
        bool stopped = false;
        bool done = false;      // saw [DONE]
    };
    void on_ready_read(quint64 id);
    void on_finished(quint64 id);
    void parse_events(quint64 id, Request& r);
    QString describe_failure(QNetworkReply* reply, const QByteArray& body) const;

    QNetworkAccessManager net_;
    RemoteEndpoint endpoint_;
    QHash<quint64, Request> requests_;
    int timeout_ms_ = 120000;
};

}  // namespace strata::desktop
