#!/usr/bin/env python3
"""Writes tests/data/scheduler/diffusers_tables.json from diffusers' own
scheduler modules (EulerDiscreteScheduler, DDIMScheduler,
DPMSolverMultistepScheduler): timesteps, sigmas, init_noise_sigma and
alphas_cumprod for SDXL's scheduler config and variants, plus short sampling
trajectories driven by a fake model.

    python3 tools/reference/make_scheduler_tables.py DIFFUSERS_SRC OUT.json

DIFFUSERS_SRC is a diffusers source tree (the folder holding `diffusers/`).
When the diffusers package imports (it needs huggingface_hub and friends) it
is used as is; otherwise the three scheduler modules are loaded unchanged in a
scratch package whose configuration/utility imports are minimal stand-ins
(config capture, logging, output dataclasses): the numerics are diffusers'.
"""
import dataclasses
import enum
import functools
import importlib
import inspect
import json
import logging
import os
import sys
import tempfile

import numpy as np
import torch

STUB_CONFIG = '''
import functools, inspect
class FrozenDict(dict):
    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k)
class ConfigMixin:
    config_name = "scheduler_config.json"
    def register_to_config(self, **kwargs):
        if not hasattr(self, "_internal_dict"):
            self._internal_dict = FrozenDict()
        self._internal_dict.update(kwargs)
    @property
    def config(self):
        return self._internal_dict
    @classmethod
    def from_config(cls, config, **kwargs):
        params = inspect.signature(cls.__init__).parameters
        args = {k: v for k, v in dict(config, **kwargs).items() if k in params}
        return cls(**args)
def register_to_config(init):
    @functools.wraps(init)
    def inner(self, *args, **kwargs):
        bound = inspect.signature(init).bind(self, *args, **kwargs)
        bound.apply_defaults()
        d = dict(bound.arguments)
        d.pop("self")
        ConfigMixin.register_to_config(self, **d)
        init(self, *args, **kwargs)
    return inner
'''
STUB_UTILS = '''
import logging as _logging
class BaseOutput:
    pass
def is_scipy_available():
    try:
        import scipy.integrate  # noqa: F401
        return True
    except ImportError:
        return False
def deprecate(*args, **kwargs):
    return None
class logging:
    get_logger = staticmethod(_logging.getLogger)
'''
STUB_TORCH_UTILS = '''
import torch
def randn_tensor(shape, generator=None, device=None, dtype=None, layout=None):
    return torch.randn(shape, generator=generator, dtype=dtype)
'''
STUB_SCHEDULING_UTILS = '''
from dataclasses import dataclass
from enum import Enum
import torch
class KarrasDiffusionSchedulers(Enum):
    DDIMScheduler = 1
    DDPMScheduler = 2
    PNDMScheduler = 3
    LMSDiscreteScheduler = 4
    EulerDiscreteScheduler = 5
    HeunDiscreteScheduler = 6
    EulerAncestralDiscreteScheduler = 7
    DPMSolverMultistepScheduler = 8
    DPMSolverSinglestepScheduler = 9
    KDPM2DiscreteScheduler = 10
    KDPM2AncestralDiscreteScheduler = 11
    DEISMultistepScheduler = 12
    UniPCMultistepScheduler = 13
    DPMSolverSDEScheduler = 14
    EDMEulerScheduler = 15
class SchedulerMixin:
    pass
@dataclass
class SchedulerOutput:
    prev_sample: torch.Tensor
'''


def load_scheduler_classes(src, wanted):
    """{module name: class name} -> ({module name: class}, how they were loaded)."""
    sys.path.insert(0, src)
    try:
        import diffusers  # noqa: F401
        out = {m: getattr(importlib.import_module("diffusers.schedulers." + m), c) for m, c in wanted.items()}
        return out, "diffusers package"
    except Exception:
        sys.path.pop(0)
        for k in [k for k in sys.modules if k == "diffusers" or k.startswith("diffusers.")]:
            del sys.modules[k]
    scratch = tempfile.mkdtemp()
    pkg = os.path.join(scratch, "diffusers")
    os.makedirs(os.path.join(pkg, "utils"))
    os.makedirs(os.path.join(pkg, "schedulers"))
    files = {
        "__init__.py": "",
        "configuration_utils.py": STUB_CONFIG,
        "utils/__init__.py": STUB_UTILS,
        "utils/torch_utils.py": STUB_TORCH_UTILS,
        "schedulers/__init__.py": "",
        "schedulers/scheduling_utils.py": STUB_SCHEDULING_UTILS,
    }
    for name, text in files.items():
        with open(os.path.join(pkg, name), "w") as f:
            f.write(text)
    for mod in wanted:
        os.symlink(os.path.join(src, "diffusers", "schedulers", mod + ".py"),
                   os.path.join(pkg, "schedulers", mod + ".py"))
    sys.path.insert(0, scratch)
    importlib.invalidate_caches()
    out = {m: getattr(importlib.import_module("diffusers.schedulers." + m), c) for m, c in wanted.items()}
    return out, "scheduler modules with stand-in config/utils imports"


def load_schedulers(src):
    classes, how = load_scheduler_classes(src, {
        "scheduling_euler_discrete": "EulerDiscreteScheduler",
        "scheduling_ddim": "DDIMScheduler",
        "scheduling_dpmsolver_multistep": "DPMSolverMultistepScheduler",
    })
    return (classes["scheduling_euler_discrete"], classes["scheduling_ddim"],
            classes["scheduling_dpmsolver_multistep"], how)


# SDXL base 1.0 scheduler/scheduler_config.json
SDXL = {
    "_class_name": "EulerDiscreteScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear",
    "beta_start": 0.00085, "clip_sample": False, "interpolation_type": "linear", "num_train_timesteps": 1000,
    "prediction_type": "epsilon", "sample_max_value": 1.0, "set_alpha_to_one": False, "skip_prk_steps": True,
    "steps_offset": 1, "timestep_spacing": "leading", "trained_betas": None, "use_karras_sigmas": False,
}


def fake_model(x, t):
    # A smooth, state-dependent stand-in for the UNet.
    return 0.3 * x + 0.2 * torch.sin(x * 1.7 + float(t) / 250.0)


def main():
    src, out_path = os.path.abspath(sys.argv[1]), sys.argv[2]
    Euler, DDIM, DPM, how = load_schedulers(src)
    classes = {"euler": Euler, "euler_karras": Euler, "ddim": DDIM, "dpmpp_2m": DPM, "dpmpp_2m_karras": DPM}
    variants = [
        ("sdxl", {}),
        ("trailing", {"timestep_spacing": "trailing"}),
        ("linspace", {"timestep_spacing": "linspace"}),
        ("linear_betas", {"beta_schedule": "linear", "beta_start": 0.0001, "beta_end": 0.02, "steps_offset": 0}),
        ("v_prediction", {"prediction_type": "v_prediction"}),
    ]
    cases = []
    for sampler, cls in classes.items():
        for vname, override in variants:
            cfg = dict(SDXL, **override)
            if sampler.endswith("karras"):
                cfg["use_karras_sigmas"] = True
            for steps in [1, 4, 20, 25, 30, 50]:
                if steps == 1 and sampler.startswith("dpmpp"):
                    continue
                sch = cls.from_config(cfg)
                sch.set_timesteps(steps)
                case = {
                    "sampler": sampler, "variant": vname, "config": override, "steps": steps,
                    "timesteps": [float(v) for v in sch.timesteps.to(torch.float64).tolist()],
                }
                if hasattr(sch, "sigmas") and sampler != "ddim":
                    case["sigmas"] = [float(v) for v in sch.sigmas.to(torch.float64).tolist()]
                ins = sch.init_noise_sigma
                case["init_noise_sigma"] = float(ins)
                if steps in (4, 20) and vname in ("sdxl", "v_prediction", "trailing"):
                    g = torch.Generator("cpu").manual_seed(steps)
                    x = torch.randn(2, 3, 4, generator=g, dtype=torch.float32)
                    case["noise"] = x.flatten().tolist()
                    x = x * sch.init_noise_sigma
                    for t in sch.timesteps:
                        inp = sch.scale_model_input(x, t)
                        out = fake_model(inp, t)
                        x = sch.step(out, t, x).prev_sample
                    case["final"] = x.flatten().tolist()
                cases.append(case)
    ac = Euler.from_config(SDXL).alphas_cumprod
    doc = {
        "produced_by": "tools/reference/make_scheduler_tables.py with torch %s, numpy %s, %s" % (
            torch.__version__, np.__version__, how),
        "fake_model": "0.3 * x + 0.2 * sin(1.7 * x + t / 250)",
        "sdxl_config": SDXL,
        "sdxl_alphas_cumprod": [float(v) for v in ac.tolist()],
        "cases": cases,
    }
    with open(out_path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
