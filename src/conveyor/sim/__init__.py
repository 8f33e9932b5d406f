"""The consumer-ramp simulator and the planner.

>>> from conveyor.sim import simulate
>>> run = simulate("cloudflare", messages=9, hold=60.0)
>>> run.makespan, run.peak
(254.0, 4)
"""

from conveyor.sim.cloudflare import CloudflareModel
from conveyor.sim.dispatcher import ConveyorModel
from conveyor.sim.simulation import MODELS, Simulation, simulate

__all__ = ["MODELS", "CloudflareModel", "ConveyorModel", "Simulation", "simulate"]
