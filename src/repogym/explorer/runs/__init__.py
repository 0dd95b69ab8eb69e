"""Rollouts from the explorer: run records (:mod:`.store`), which folders may run (:mod:`.locate`),
what a visitor may ask for (:mod:`.requests`), answers kept out of events (:mod:`.mask`) and the
service that runs them with the trial code of ``repogym run`` (:mod:`.service`)."""

from repogym.explorer.runs.service import LiveRun, RunLimits, RunRefused, RunService

__all__ = ["LiveRun", "RunLimits", "RunRefused", "RunService"]
