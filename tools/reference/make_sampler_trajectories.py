#!/usr/bin/env python3
"""Writes tests/data/scheduler/diffusers_trajectories.json: for every sampler of
hipq beyond the first five (whose tables make_scheduler_tables.py writes), the
timesteps, sigmas and init_noise_sigma diffusers' own scheduler computes, and a
short sampling trajectory driven by the same fake model:

    g = torch.Generator("cpu").manual_seed(seed)
    x = torch.randn(2, 3, 4, generator=g) * scheduler.init_noise_sigma
    for t in scheduler.timesteps:
        x = scheduler.step(fake(scheduler.scale_model_input(x, t), t), t, x, generator=g).prev_sample

The generator is passed to step() as the pipelines pass it, so the stochastic
samplers' per-step noise continues the stream that made the initial noise.

    python3 tools/reference/make_sampler_trajectories.py DIFFUSERS_SRC OUT.json

DIFFUSERS_SRC is a diffusers source tree (the folder holding `diffusers/`);
the scheduler modules are loaded as make_scheduler_tables.py loads them. Each
row of SAMPLERS is one hipq sampler name: the diffusers module, class and the
config a user would set to get it (docs/samplers.md).
"""
import inspect
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_scheduler_tables as tables  # noqa: E402

# name: (module, class, config overrides)
SAMPLERS = {
    "euler_ancestral": ("scheduling_euler_ancestral_discrete", "EulerAncestralDiscreteScheduler", {}),
    "dpmpp_2m_sde": ("scheduling_dpmsolver_multistep", "DPMSolverMultistepScheduler",
                     {"algorithm_type": "sde-dpmsolver++"}),
    "dpmpp_2m_sde_karras": ("scheduling_dpmsolver_multistep", "DPMSolverMultistepScheduler",
                            {"algorithm_type": "sde-dpmsolver++", "use_karras_sigmas": True}),
}
VARIANTS = [
    ("sdxl", {}),
    ("trailing", {"timestep_spacing": "trailing"}),
    ("linspace", {"timestep_spacing": "linspace"}),
    ("v_prediction", {"prediction_type": "v_prediction"}),
]
STEPS = [1, 2, 4, 8, 20]


def as_list(t):
    return [float(v) for v in torch.as_tensor(t).to(torch.float64).flatten().tolist()]


def main():
    src, out_path = os.path.abspath(sys.argv[1]), sys.argv[2]
    wanted = {m: c for m, c, _ in SAMPLERS.values()}
    classes, how = tables.load_scheduler_classes(src, wanted)
    cases = []
    for name, (module, _, sampler_cfg) in SAMPLERS.items():
        cls = classes[module]
        for vname, override in VARIANTS:
            cfg = dict(tables.SDXL, **sampler_cfg)
            cfg.update(override)
            for steps in STEPS:
                sch = cls.from_config(cfg)
                try:
                    sch.set_timesteps(steps)
                except Exception as e:  # a step count the scheduler refuses
                    cases.append({"sampler": name, "variant": vname, "config": override, "steps": steps,
                                  "refused": str(e)})
                    continue
                case = {
                    "sampler": name, "variant": vname, "config": override, "steps": steps,
                    "timesteps": as_list(sch.timesteps),
                    "init_noise_sigma": float(sch.init_noise_sigma),
                }
                if hasattr(sch, "sigmas"):
                    case["sigmas"] = as_list(sch.sigmas)
                seed = 1000 + steps
                g = torch.Generator("cpu").manual_seed(seed)
                x = torch.randn(2, 3, 4, generator=g, dtype=torch.float32)
                case["seed"] = seed
                case["noise"] = x.flatten().tolist()
                x = x * sch.init_noise_sigma
                takes_generator = "generator" in inspect.signature(sch.step).parameters
                trajectory = []
                for t in sch.timesteps:
                    inp = sch.scale_model_input(x, t)
                    out = tables.fake_model(inp, t)
                    if takes_generator:
                        x = sch.step(out, t, x, generator=g).prev_sample
                    else:
                        x = sch.step(out, t, x).prev_sample
                    trajectory.append(x.flatten().tolist())
                case["model_calls"] = len(trajectory)
                case["final"] = trajectory[-1]
                cases.append(case)
    doc = {
        "produced_by": "tools/reference/make_sampler_trajectories.py with torch %s, numpy %s, %s" % (
            torch.__version__, np.__version__, how),
        "fake_model": "0.3 * x + 0.2 * sin(1.7 * x + t / 250)",
        "sdxl_config": tables.SDXL,
        "samplers": {k: {"module": m, "class": c, "config": cfg} for k, (m, c, cfg) in SAMPLERS.items()},
        "cases": cases,
    }
    with open(out_path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
