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



def kdpm2_call_sigmas(sch):
    """KDPM2's sigma of each model call (the one scale_model_input divides by), then 0:
    diffusers keeps them in two interleaved tables (sigmas, sigmas_interpol) that hipq
    folds into one (engine/scheduler.cpp). Call j is first-order for even j."""
    ancestral = hasattr(sch, "sigmas_up")
    out = []
    for j in range(len(sch.timesteps)):
        if j % 2 == 0:
            out.append(float(sch.sigmas[j]))
        else:
            out.append(float(sch.sigmas_interpol[j - 1 if ancestral else j]))
    return out + [0.0]


# name: (module, class, config overrides[, sigma table of each model call])
SAMPLERS = {
    "euler_ancestral": ("scheduling_euler_ancestral_discrete", "EulerAncestralDiscreteScheduler", {}),
    "dpmpp_2m_sde": ("scheduling_dpmsolver_multistep", "DPMSolverMultistepScheduler",
                     {"algorithm_type": "sde-dpmsolver++"}),
    "dpmpp_2m_sde_karras": ("scheduling_dpmsolver_multistep", "DPMSolverMultistepScheduler",
                            {"algorithm_type": "sde-dpmsolver++", "use_karras_sigmas": True}),
    "heun": ("scheduling_heun_discrete", "HeunDiscreteScheduler", {}),
    "heun_karras": ("scheduling_heun_discrete", "HeunDiscreteScheduler", {"use_karras_sigmas": True}),
    "dpm2": ("scheduling_k_dpm_2_discrete", "KDPM2DiscreteScheduler", {}, kdpm2_call_sigmas),
    "dpm2_karras": ("scheduling_k_dpm_2_discrete", "KDPM2DiscreteScheduler", {"use_karras_sigmas": True},
                    kdpm2_call_sigmas),
    "dpm2_ancestral": ("scheduling_k_dpm_2_ancestral_discrete", "KDPM2AncestralDiscreteScheduler", {},
                       kdpm2_call_sigmas),
    "dpm2_ancestral_karras": ("scheduling_k_dpm_2_ancestral_discrete", "KDPM2AncestralDiscreteScheduler",
                              {"use_karras_sigmas": True}, kdpm2_call_sigmas),
    "lms": ("scheduling_lms_discrete", "LMSDiscreteScheduler", {}),
    "lms_karras": ("scheduling_lms_discrete", "LMSDiscreteScheduler", {"use_karras_sigmas": True}),
    "unipc": ("scheduling_unipc_multistep", "UniPCMultistepScheduler", {}),
    "deis": ("scheduling_deis_multistep", "DEISMultistepScheduler", {}),
    "ddpm": ("scheduling_ddpm", "DDPMScheduler", {}),
    "lcm": ("scheduling_lcm", "LCMScheduler", {}),
    "dpmpp_3m_sde": ("scheduling_dpmsolver_multistep", "DPMSolverMultistepScheduler",
                     {"algorithm_type": "sde-dpmsolver++", "solver_order": 3}),
    "dpmpp_3m_sde_karras": ("scheduling_dpmsolver_multistep", "DPMSolverMultistepScheduler",
                            {"algorithm_type": "sde-dpmsolver++", "solver_order": 3, "use_karras_sigmas": True}),
}
VARIANTS = [
    ("sdxl", {}),
    ("trailing", {"timestep_spacing": "trailing"}),
    ("linspace", {"timestep_spacing": "linspace"}),
    ("v_prediction", {"prediction_type": "v_prediction"}),
]
STEPS = [1, 2, 4, 8, 20]


_torch_linspace = torch.linspace


def torch2_linspace(start, end, steps, *args, dtype=None, **kwargs):
    """torch.linspace as torch 2.x computes it on the CPU in float32: the first half
    counts up from start, the second half down from end, each element one fused
    multiply-add (step * i + start rounded once). torch 1.x built 8-wide chunks
    from a chunk base instead, which differs in the last bit of some betas, and
    with them every sigma; diffusers users run torch 2.x, and hipq reproduces
    torch 2.x's betas bit for bit (diffusers_tables.json, made with torch 2.11).
    The products and sums below are exact in float64, so rounding them to float32
    once is the fused multiply-add."""
    if args or kwargs.get("device") not in (None, "cpu") or dtype not in (None, torch.float32) or steps < 2:
        return _torch_linspace(start, end, steps, *args, dtype=dtype, **kwargs)
    s, e = np.float32(start), np.float32(end)
    step = np.float32(np.float32(e - s) / np.float32(steps - 1))
    idx = np.arange(steps, dtype=np.float64)
    up = np.float64(step) * idx + np.float64(s)
    down = -np.float64(step) * (steps - 1 - idx) + np.float64(e)
    return torch.from_numpy(np.where(idx < steps // 2, up, down).astype(np.float32))


def as_list(t):
    return [float(v) for v in torch.as_tensor(t).to(torch.float64).flatten().tolist()]


def main():
    src, out_path = os.path.abspath(sys.argv[1]), sys.argv[2]
    betas = "torch's own linspace"
    if int(torch.__version__.split(".")[0]) < 2:
        torch.linspace = torch2_linspace
        betas = "betas by torch 2.x's linspace (torch2_linspace)"
    wanted = {row[0]: row[1] for row in SAMPLERS.values()}
    classes, how = tables.load_scheduler_classes(src, wanted)
    cases = []
    for name, (module, _, sampler_cfg, *call_sigmas) in SAMPLERS.items():
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
                if call_sigmas:
                    case["sigmas"] = call_sigmas[0](sch)
                    case["diffusers_sigmas"] = as_list(sch.sigmas)
                elif hasattr(sch, "sigmas"):
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
        "produced_by": "tools/reference/make_sampler_trajectories.py with torch %s, numpy %s, %s, %s" % (
            torch.__version__, np.__version__, how, betas),
        "fake_model": "0.3 * x + 0.2 * sin(1.7 * x + t / 250)",
        "sdxl_config": tables.SDXL,
        "samplers": {k: {"module": row[0], "class": row[1], "config": row[2]} for k, row in SAMPLERS.items()},
        "cases": cases,
    }
    with open(out_path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
