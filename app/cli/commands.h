#pragma once

namespace strata::cli {

// Each returns the process exit code; UsageError and strata::Error propagate
// to main(), which prints one line and exits non-zero.
int cmd_inspect(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_chat_template(int argc, char** argv);
int cmd_make_model(int argc, char** argv);
int cmd_make_trace(int argc, char** argv);
int cmd_quality(int argc, char** argv);
int cmd_routing_stats(int argc, char** argv);
int cmd_trace(int argc, char** argv);
int cmd_simulate(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);
int cmd_plan(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_quantize(int argc, char** argv);

}  // namespace strata::cli
