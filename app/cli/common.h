// Pieces shared by strata-cli's commands: the model, context and sampling
// options every generating command accepts, and their translation into engine
// settings.
#pragma once

#include "common/prompt_file.h"  // read_prompt_file, for the commands that take --prompts

#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "runner/context.h"
#include "model/model.h"
#include "sched/sampler.h"
#include "strata/settings.h"

namespace strata::cli {

void add_context_options(Args& a);
// Every engine setting (tiers, expert cache, prefetch, threads, context):
// accepted alike by run, eval, bench, routing-stats and calibrate. Includes
// the context options.
void add_engine_options(Args& a);
EngineSettings engine_settings(const Args& a);
// --fast-budget's value: "auto" -> 0 (automatic), "none" -> kNoBudget, else a size (not 0).
uint64_t parse_fast_budget(const std::string& text, const std::string& what);
// --cpu-moe (-1: every MoE layer) or --n-cpu-moe N (0: none).
int64_t cpu_moe_layers(const Args& a);
void add_sampling_options(Args& a, const std::string& default_temp);

model::ContextParams context_params(const Args& a);
sched::SamplingParams sampling_params(const Args& a);

// The most likely token (ties to the lowest id): greedy decoding.
int32_t argmax(const float* logits, int64_t n);

// Formats a byte count as "12.3 MiB".
std::string human_bytes(uint64_t bytes);
std::string human_count(int64_t n);  // "1.23 B", "45.6 M"


// True when s is well-formed UTF-8.
bool is_valid_utf8(const std::string& s);

// The whole file; throws strata::Error "cannot read the <what> file <path>".
std::string read_text_file(const std::string& path, const std::string& what);

// JSON string escaping (UTF-8 passes through; control characters escaped).
std::string json_escape(const std::string& s);

}  // namespace strata::cli
