#!/usr/bin/env python3
"""Writes renderings.json: each test conversation (conversations.json) through
each chat template of a llama.cpp checkout's models/templates/, rendered as
Hugging Face's transformers does (jinja2's ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, {% generation %}, tojson as
json.dumps(ensure_ascii=False), raise_exception, strftime_now). The templates
themselves are not copied: renderings.json keys each by file name and SHA-256.

    python3 tests/chat/templates/make_renderings.py LLAMA_CPP_DIR

Needs python3-jinja2 (Debian). strftime_now is fixed at 2 Jan 2026 so the
renderings do not change with the day.
"""
import datetime
import glob
import hashlib
import json
import os
import sys

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2026, 1, 2, 10, 30, 0)


class Generation(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


def main():
    root = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    spec = json.load(open(os.path.join(here, "conversations.json"), encoding="utf-8"))
    env = environment()
    out = {"templates": {}}
    for path in sorted(glob.glob(os.path.join(root, "models", "templates", "*.jinja"))):
        source = open(path, encoding="utf-8").read()
        entry = {"sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(), "cases": {}}
        try:
            template = env.from_string(source)
        except Exception as e:  # a template jinja2 itself cannot parse
            entry["parse_error"] = str(e)
            out["templates"][os.path.basename(path)] = entry
            continue
        for name, case in spec["cases"].items():
            ctx = {"messages": case["messages"], "add_generation_prompt": case.get("add_generation_prompt", True),
                   "bos_token": "<s>", "eos_token": "</s>"}
            if case.get("tools"):
                ctx["tools"] = spec["tools"]
            try:
                entry["cases"][name] = {"text": template.render(**ctx)}
            except Exception as e:
                entry["cases"][name] = {"error": type(e).__name__ + ": " + str(e)}
        out["templates"][os.path.basename(path)] = entry
    with open(os.path.join(here, "renderings.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    n = sum(len(t["cases"]) for t in out["templates"].values())
    print(f"{len(out['templates'])} templates, {n} renderings")


if __name__ == "__main__":
    main()
