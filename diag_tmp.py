import numpy as np
from benchmarks.validate_prefix import *
from model.sim.simulate import simulate
from model.serving.evaluation import evaluate
wl = get_workload("multiturn-chat"); slo = SLO(0.5, 0.02)
scn = Scenario.build("llama-3.1-8b", wl, slo)
for rate in (40.0, 60.0, 80.0):
    req = session_or_poisson_requests(wl, rate, 4500)
    r = simulate(COL, "llama-3.1-8b", req, slo=slo, options=SimOptions(warmup_requests=1500))
    s = r.summary; rec=r.records
    print(rate, "real rate", round((len(req)-1)/req.span_s,1), "hit", round(rec.prefix_hit_rate,3), "ttft", [round(x,3) for x in s.ttft_s], "tpot", [round(x,4) for x in s.tpot_s], "q", round(s.mean_queue_wait_s,3), s.stop_reason, "att", round(s.attainment,3), s.meets_slo)
    e = evaluate(COL, scn, rate)
    print("   plan ttft", e.ttft_s.p90, "tpot", e.tpot_s.p90, e.slo_attainment)
