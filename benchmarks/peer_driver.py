"""Driver run INSIDE the peers' virtual environment by benchmarks/peer_calculators.py (never imported
by pdplan): reads ``{"peer": NAME, "requests": [...]}`` as JSON on stdin, calls the peer's own public
API for each request, and prints ``{"versions": {...}, "results": [...]}`` as JSON on stdout.

Each request was translated from a measurement row by peer_calculators.py (the pure functions there);
each result is ``{"id", "prefill_s", "tpot_s", "e2e_s"}`` in seconds, or ``{"id", "error"}`` with the
peer's own error text when it refuses or fails on that request. Only the standard library and the
peer itself are imported here (pdplan is not installed in the peers' environment).

Peers and the calls used:
- aiconfigurator: ``aiconfigurator.cli.api.cli_estimate`` in a static mode (one static batch: the
  context phase of ``batch`` prompts, then the generation steps), SILICON database mode.
- llm-analysis: ``llm_analysis.analysis.infer`` (prefill_latency, decode_latency per token).
- genz-llm: ``GenZ.prefill_moddeling`` / ``GenZ.decode_moddeling`` (Latency, ms).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import tempfile
import traceback
import warnings
from importlib import metadata

DISTRIBUTIONS = {
    "aiconfigurator": ("aiconfigurator", "aiconfigurator-core"),
    "llm-analysis": ("llm-analysis",),
    "genz-llm": ("genz-llm",),
}


def _aiconfigurator(req: dict, tmp: str) -> dict:
    from importlib import resources

    from aiconfigurator.cli.api import cli_estimate
    from aiconfigurator_core.sdk.common import DefaultHFModels

    model, config = req["model"], req.get("hf_config")
    shipped = (
        resources.files("aiconfigurator_core") / "model_configs" / f"{model.replace('/', '--')}_config.json"
    )
    if config is None and model not in DefaultHFModels and shipped.is_file():
        # The wheel ships this config.json but leaves the id out of its default list (it would
        # download it): hand it the shipped file as a local model directory instead.
        config = json.loads(shipped.read_text(encoding="utf-8"))
    if config is not None:  # a local directory holding a config.json
        model = os.path.join(tmp, req["row_id"])
        os.makedirs(model, exist_ok=True)
        with open(os.path.join(model, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
    r = cli_estimate(model, req["system"], **req["kwargs"])
    ms = 1e-3
    return {
        "prefill_s": r.raw["ttft"] * ms,
        "tpot_s": r.raw.get("tpot", float("nan")) * ms,
        "e2e_s": r.raw.get("request_latency", float("nan")) * ms,
        "detail": {k: r.raw.get(k) for k in ("version", "gemm", "kvcache", "moe", "parallel", "memory")},
    }


def _llm_analysis(req: dict, tmp: str) -> dict:
    from llm_analysis import config
    from llm_analysis.analysis import infer

    if req.get("gpu_config"):
        config.gpu_configs[req["gpu"]] = config.GPUConfig(**req["gpu_config"])
    model = req["model"]
    if req.get("model_config"):
        model = os.path.join(tmp, req["row_id"] + ".json")
        with open(model, "w", encoding="utf-8") as f:
            json.dump(req["model_config"], f)
    out = infer(model_name=model, gpu_name=req["gpu"], log_level="ERROR", **req["kwargs"])
    osl = req["kwargs"]["num_tokens_to_generate"]
    return {
        "prefill_s": out["prefill_latency"],
        "tpot_s": out["total_decode_latency"] / osl,
        "e2e_s": out["prefill_latency"] + out["total_decode_latency"],
    }


def _genz(req: dict, tmp: str) -> dict:
    from GenZ import decode_moddeling, prefill_moddeling

    kw = dict(req["kwargs"])
    osl = kw.pop("output_tokens")
    eff = {"system_eff": req.get("prefill_eff", 1)}  # GenZ's default efficiency is 1
    pre = prefill_moddeling(model=req["model"], system_name=req["system"], **eff, **kw)
    prefill_s = float(pre["Latency"]) * 1e-3
    if osl <= 1:
        return {"prefill_s": prefill_s, "tpot_s": float("nan"), "e2e_s": prefill_s}
    # One greedy decode step (Bb=1 beam; GenZ's default is 4) after ``decode_generated_tokens``
    # tokens since the prefill: the middle of the generation, so the mean step of the request.
    gen = req["decode_generated_tokens"]
    eff = {"system_eff": req.get("decode_eff", 1)}
    dec = decode_moddeling(
        model=req["model"], system_name=req["system"], output_tokens=gen, Bb=1, **eff, **kw
    )
    step_s = float(dec["Latency"]) * 1e-3
    return {"prefill_s": prefill_s, "tpot_s": step_s, "e2e_s": prefill_s + (osl - 1) * step_s}


RUNNERS = {"aiconfigurator": _aiconfigurator, "llm-analysis": _llm_analysis, "genz-llm": _genz}


def versions(peer: str) -> dict:
    out = {}
    for dist in DISTRIBUTIONS[peer]:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main() -> None:
    job = json.load(sys.stdin)
    peer = job["peer"].split("+")[0]  # "genz-llm+eff" runs genz-llm with other inputs
    run = RUNNERS[peer]
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for req in job["requests"]:
            sink = io.StringIO()
            try:
                with contextlib.redirect_stdout(sink):
                    res = run(req, tmp)
                results.append({"id": req["row_id"], **res})
            except Exception as err:  # the peer's own refusal or failure, kept as its text
                last = traceback.extract_tb(err.__traceback__)[-1]
                where = f"{os.path.basename(last.filename)}:{last.lineno}"
                text = (str(err).strip().splitlines() or [""])[0][:300]
                msg = f"{type(err).__name__}: {text} ({where})"
                results.append({"id": req["row_id"], "error": msg})
            done = results[-1]
            print(
                f"{job['peer']} {len(results)}/{len(job['requests'])} {done['id']}",
                file=sys.stderr,
                flush=True,
            )
    json.dump({"versions": versions(peer), "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
