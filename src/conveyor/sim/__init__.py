"""The consumer-ramp simulator and the planner (``conveyor plan``).

``simulate()`` says when each of a burst of messages starts and ends under a consumer model:
``"cloudflare"``, the ramp fitted to Cloudflare's measured one, or ``"conveyor"``, Conveyor's own
dispatcher and autoscaler as ``conveyor.consumer`` runs them. The planner puts a fan-out round of
checks over a fleet through it:

>>> from conveyor.sim import simulate, Fleet, Shape, predict_round
>>> run = simulate("cloudflare", messages=9, hold=60.0)
>>> run.makespan, run.peak
(254.0, 4)
>>> p = predict_round(Fleet(servers=21, check_seconds=0.55, deadline=300), Shape(19, 5, 3), "conveyor")
>>> round(p.round_seconds, 2), p.peak, p.risk
(0.56, 19, 'low')
"""

from conveyor.sim.cloudflare import CloudflareModel
from conveyor.sim.dispatcher import ConveyorModel
from conveyor.sim.measure import MeasurementTimeout, measure_costs
from conveyor.sim.rounds import Fleet, RoundPrediction, Shape, predict_round, search_shapes
from conveyor.sim.simulation import MODELS, Simulation, simulate

__all__ = [
    "MODELS",
    "CloudflareModel",
    "ConveyorModel",
    "Fleet",
    "MeasurementTimeout",
    "RoundPrediction",
    "Shape",
    "Simulation",
    "measure_costs",
    "predict_round",
    "search_shapes",
    "simulate",
]
